package server_test

// The harness the door tests (doors_test.go, fuzz_doors_test.go) share: one in-process server
// with the webhook on, the two callers every door is tried as, the registered gRPC methods
// found by reflection, calls through the typed and the raw path, and the contract every answer
// is held to.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// The callers. doorAll is the dev client (devpki's signet-watcher), allowed every signer and
// given the admin role; doorNone is configured and allowed no signer.
const (
	doorAll  = "all"
	doorNone = "none"
)

// doorNoneIdentity is the mTLS identity of the caller allowed no signer.
const doorNoneIdentity = "doors-nobody"

// doorPodAnnotation is the unverified user annotation the pod-identity signer accepts, so that
// a valid PodCertificateRequest can carry one.
const doorPodAnnotation = "example.com/purpose"

// doorCallTimeout bounds one call: an answer later than this is a handler that hangs.
const doorCallTimeout = 15 * time.Second

// doorEnv is a signet-server serving the dev PKI (both dev signers) with the webhook on, and a
// connection and a webhook client for each caller.
type doorEnv struct {
	*servertest.Running
	cfg     *config.Config
	dir     string
	conns   map[string]*grpc.ClientConn
	hooks   map[string]*http.Client
	hookURL string
	methods []*doorMethod
}

// startDoors starts the server and connects both callers; everything stops when tb ends.
func startDoors(tb testing.TB) *doorEnv {
	tb.Helper()
	cfg, dir := servertest.DevConfig(tb, devpki.Options{PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	cfg.Webhook = config.Webhook{Address: "127.0.0.1:0", MaxRequestBytes: config.MinWebhookRequestBytes}
	for i := range cfg.Clients {
		if cfg.Clients[i].Identity == devpki.ClientName {
			cfg.Clients[i].Admin = true
		}
	}
	cfg.Clients = append(cfg.Clients, access.Client{Identity: doorNoneIdentity, Signers: []string{}})
	for i := range cfg.Signers {
		if p := cfg.Signers[i].Profile.PodIdentity; p != nil {
			p.AllowedAnnotations = append(p.AllowedAnnotations, doorPodAnnotation)
		}
	}
	run := servertest.Start(tb, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	e := &doorEnv{Running: run, cfg: cfg, dir: dir, conns: map[string]*grpc.ClientConn{}, hooks: map[string]*http.Client{},
		hookURL: "https://" + run.WebhookAddr() + "/"}
	all, err := devpki.ClientTLSConfig(dir)
	if err != nil {
		tb.Fatal(err)
	}
	none := all.Clone()
	none.Certificates = []tls.Certificate{doorClientCert(tb, dir, doorNoneIdentity)}
	for name, tlsConfig := range map[string]*tls.Config{doorAll: all, doorNone: none} {
		conn, err := grpc.NewClient(run.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = conn.Close() })
		e.conns[name] = conn
		tr := &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}
		tb.Cleanup(tr.CloseIdleConnections)
		e.hooks[name] = &http.Client{Transport: tr, Timeout: doorCallTimeout}
	}
	e.methods = doorMethods(tb, run.ServiceInfo())
	return e
}

// doorClientCert is a client certificate for identity from the dev TLS CA.
func doorClientCert(tb testing.TB, dir, identity string) tls.Certificate {
	tb.Helper()
	key := testpki.Key(tb, testpki.P256)
	cert := servertest.DevTLSCA(tb, dir).Sign(tb, &x509.Certificate{Subject: pkix.Name{CommonName: identity},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, key.Public())
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// doorMethod is one registered gRPC method, described from the protobuf registry.
type doorMethod struct {
	full   string // "/signet.v1.SignerService/SignCertificateSigningRequest"
	pkg    protoreflect.FullName
	desc   protoreflect.MethodDescriptor
	stream grpc.StreamDesc // StreamName empty for a unary method
	unary  bool
}

// newRequest is an empty request message of m (the generated type when linked, else dynamic).
func (m *doorMethod) newRequest() proto.Message { return doorNewMessage(m.desc.Input()) }

func (m *doorMethod) newResponse() proto.Message { return doorNewMessage(m.desc.Output()) }

func doorNewMessage(d protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(d)
}

// signet reports whether m belongs to the signet.v1 API, whose errors carry an ErrorInfo.
func (m *doorMethod) signet() bool { return m.pkg == "signet.v1" }

// doorMethods lists every method of every service in info, sorted by full name, failing tb
// when a service or method has no descriptor in the protobuf registry.
func doorMethods(tb testing.TB, info map[string]grpc.ServiceInfo) []*doorMethod {
	tb.Helper()
	var out []*doorMethod
	for name, si := range info {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			tb.Fatalf("service %s is registered but has no descriptor: %v", name, err)
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			tb.Fatalf("%s is a %T, not a service", name, d)
		}
		for _, mi := range si.Methods {
			md := sd.Methods().ByName(protoreflect.Name(mi.Name))
			if md == nil {
				tb.Fatalf("method %s/%s is registered but not in the descriptor", name, mi.Name)
			}
			m := &doorMethod{full: "/" + name + "/" + mi.Name, pkg: sd.ParentFile().Package(), desc: md,
				unary: !mi.IsClientStream && !mi.IsServerStream}
			m.stream = grpc.StreamDesc{StreamName: mi.Name, ServerStreams: mi.IsServerStream, ClientStreams: mi.IsClientStream}
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *doorMethod) int { return strings.Compare(a.full, b.full) })
	if !slices.ContainsFunc(out, (*doorMethod).signet) {
		tb.Fatal("the server registers no signet.v1 method")
	}
	return out
}

// doorRaw is a request already encoded: its bytes go on the wire as they are.
type doorRaw []byte

// doorRawCodec sends and receives doorRaw without looking at it; named "proto" so that the
// server decodes the bytes with its own codec.
type doorRawCodec struct{}

func (doorRawCodec) Marshal(v any) ([]byte, error) { return *v.(*doorRaw), nil }

func (doorRawCodec) Unmarshal(data []byte, v any) error {
	*v.(*doorRaw) = bytes.Clone(data)
	return nil
}

func (doorRawCodec) Name() string { return "proto" }

// call sends req (a proto.Message, or a *doorRaw sent with the raw codec) to m as caller and
// returns the answer: the response (nil for a raw call) and the error. A streaming method is
// called as a stream: req is sent, the first answer read, and the stream cancelled.
func (e *doorEnv) call(caller string, m *doorMethod, req any) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), doorCallTimeout)
	defer cancel()
	var resp any
	var opts []grpc.CallOption
	if _, ok := req.(*doorRaw); ok {
		resp, opts = new(doorRaw), []grpc.CallOption{grpc.ForceCodec(doorRawCodec{})}
	} else {
		resp = m.newResponse()
	}
	conn := e.conns[caller]
	var err error
	if m.unary {
		err = conn.Invoke(ctx, m.full, req, resp, opts...)
	} else {
		err = doorStream(ctx, conn, m, req, resp, opts)
	}
	if msg, ok := resp.(proto.Message); ok && err == nil {
		return msg, nil
	}
	return nil, err
}

// doorStream sends req on a new stream of m and reads the first answer into resp; a stream
// that ends without a message is an OK answer.
func doorStream(ctx context.Context, conn *grpc.ClientConn, m *doorMethod, req, resp any, opts []grpc.CallOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := conn.NewStream(ctx, &m.stream, m.full, opts...)
	if err != nil {
		return err
	}
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if err := s.RecvMsg(resp); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// doorAnswer describes an answer for a failure message.
func doorAnswer(resp proto.Message, err error) string {
	if err == nil {
		if resp == nil {
			return "OK"
		}
		return "OK " + doorShort(fmt.Sprint(resp))
	}
	st := status.Convert(err)
	info := doorErrorInfo(st)
	return fmt.Sprintf("%s %q ErrorInfo{%s/%s}", st.Code(), doorShort(st.Message()), info.GetDomain(), info.GetReason())
}

// doorShort cuts s to a length a failure message can show.
func doorShort(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

// doorErrorInfo is st's first ErrorInfo detail, nil when it has none.
func doorErrorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// doorContract is the rule every answer of m obeys, whatever the request and the caller: never
// Unknown or Internal (a handler that panicked or an error nobody classified); for signet.v1,
// OK or a status with an ErrorInfo of the signet.dev domain whose reason ParseReason knows.
// grpc.health.v1 answers with its protocol's codes and no ErrorInfo (NotFound for a service it
// does not know).
func doorContract(m *doorMethod, err error) error {
	st := status.Convert(err)
	switch {
	case st.Code() == codes.OK:
		return nil
	case st.Code() == codes.Unknown || st.Code() == codes.Internal:
		return fmt.Errorf("answered %s, which no input may get", st.Code())
	case !m.signet():
		return nil
	}
	info := doorErrorInfo(st)
	if info == nil || info.GetDomain() != signetv1.ErrorDomain {
		return fmt.Errorf("status %s without an ErrorInfo of domain %s", st.Code(), signetv1.ErrorDomain)
	}
	if _, ok := signetv1.ParseReason(info.GetReason()); !ok {
		return fmt.Errorf("ErrorInfo reason %q is not a signet.v1 reason", info.GetReason())
	}
	return nil
}

// doorMalformedReason is the ErrorInfo reason of a request that cannot be used as sent.
var doorMalformedReason = signetv1.ReasonName(signetv1.ErrorReason_ERROR_REASON_MALFORMED_REQUEST)

// doorMalformed checks that an answer refuses the request as malformed: INVALID_ARGUMENT with
// MALFORMED_REQUEST, or, when verdict is true, an OK answer that is a dry run's verdict
// (a top-level string field "reason" saying MALFORMED_REQUEST, as ExplainCertificateSigningRequest
// answers).
func doorMalformed(resp proto.Message, err error, verdict bool) error {
	if err == nil {
		if verdict && resp != nil {
			r := resp.ProtoReflect()
			if fd := r.Descriptor().Fields().ByName("reason"); fd != nil && fd.Kind() == protoreflect.StringKind &&
				r.Get(fd).String() == doorMalformedReason {
				return nil
			}
		}
		return fmt.Errorf("accepted, want %s %s", codes.InvalidArgument, doorMalformedReason)
	}
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || doorErrorInfo(st).GetReason() != doorMalformedReason {
		return fmt.Errorf("want %s %s", codes.InvalidArgument, doorMalformedReason)
	}
	return nil
}

// stillServing fails tb unless the server still does its work: a valid CSR is signed, gRPC
// health reports SERVING and /readyz answers 200.
func (e *doorEnv) stillServing(tb testing.TB, uid string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doorCallTimeout)
	defer cancel()
	conn := e.conns[doorAll]
	if _, err := signetv1.NewSignerServiceClient(conn).SignCertificateSigningRequest(ctx, doorSignCSR(tb, uid)); err != nil {
		tb.Errorf("a valid CSR is no longer signed: %v", err)
	}
	if resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: signetv1.HealthService}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		tb.Errorf("health of %s: %v %v, want SERVING", signetv1.HealthService, resp.GetStatus(), err)
	}
	if code := e.readyz(tb); code != http.StatusOK {
		tb.Errorf("/readyz answered %d, want 200", code)
	}
}

// readyz is the status code of GET /readyz.
func (e *doorEnv) readyz(tb testing.TB) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doorCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.HTTPAddr()+"/readyz", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Errorf("GET /readyz: %v", err)
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
