package signerclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// authorityFake is an AuthorityService that records every request and answers with the
// signer's CA set, or with err when set; a signer named "example.com/empty" gets an answer
// without a CA set, and "example.com/slow" one after a second.
type authorityFake struct {
	signetv1.UnimplementedAuthorityServiceServer
	err error

	mu       sync.Mutex
	requests []proto.Message
}

// answer records req and returns the CA set of signer, or the fake's error.
func (f *authorityFake) answer(ctx context.Context, req proto.Message, signer string) (*signetv1.SignerAuthority, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	switch {
	case f.err != nil:
		return nil, f.err
	case signer == "example.com/empty":
		return nil, nil
	case signer == "example.com/slow":
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			// The server's deadline (the client's, less transit) can pass before the
			// client's: an answer then would reach the client in time, as a success.
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return authorityOf(signer), nil
}

// recorded returns the requests so far.
func (f *authorityFake) recorded() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.requests...)
}

// authorityOf is the canned CA set of signer.
func authorityOf(signer string) *signetv1.SignerAuthority {
	return &signetv1.SignerAuthority{
		SignerName:          signer,
		Cas:                 []*signetv1.AuthorityCA{{Anchor: &signetv1.TrustAnchor{State: signetv1.AnchorState_ANCHOR_STATE_ACTIVE, Fingerprint: "ab12"}, KeyUri: "pkcs11:object=ca"}},
		MinPropagationDelay: durationpb.New(time.Hour),
		Activation:          &signetv1.Gate{Blocking: []string{"nothing is staged"}},
	}
}

func (f *authorityFake) GetAuthority(ctx context.Context, req *signetv1.GetAuthorityRequest) (*signetv1.GetAuthorityResponse, error) {
	var signers []*signetv1.SignerAuthority
	for _, name := range req.GetSignerNames() {
		a, err := f.answer(ctx, req, name)
		if err != nil {
			return nil, err
		}
		signers = append(signers, a)
	}
	if len(req.GetSignerNames()) == 0 {
		if _, err := f.answer(ctx, req, ""); err != nil {
			return nil, err
		}
		signers = []*signetv1.SignerAuthority{authorityOf("example.com/a"), authorityOf("example.com/b")}
	}
	return &signetv1.GetAuthorityResponse{Signers: signers}, nil
}

func (f *authorityFake) StageCA(ctx context.Context, req *signetv1.StageCARequest) (*signetv1.StageCAResponse, error) {
	a, err := f.answer(ctx, req, req.GetSignerName())
	if err != nil {
		return nil, err
	}
	return &signetv1.StageCAResponse{Authority: a}, nil
}

func (f *authorityFake) ActivateCA(ctx context.Context, req *signetv1.ActivateCARequest) (*signetv1.ActivateCAResponse, error) {
	a, err := f.answer(ctx, req, req.GetSignerName())
	if err != nil {
		return nil, err
	}
	return &signetv1.ActivateCAResponse{Authority: a}, nil
}

func (f *authorityFake) RetireCA(ctx context.Context, req *signetv1.RetireCARequest) (*signetv1.RetireCAResponse, error) {
	a, err := f.answer(ctx, req, req.GetSignerName())
	if err != nil {
		return nil, err
	}
	return &signetv1.RetireCAResponse{Authority: a}, nil
}

// authorityClient serves fake over mTLS, next to a SignerService as signet-server does, and
// returns a Client of it with the RPC timeout timeout.
func authorityClient(t *testing.T, fake *authorityFake, timeout time.Duration) *Client {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(g, &signetv1.UnimplementedSignerServiceServer{})
	signetv1.RegisterAuthorityServiceServer(g, fake)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "admin-1")
	return newTestClient(t, Config{
		Address: net.JoinHostPort("localhost", port),
		CAFile:  caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: timeout,
	})
}

func TestAuthorityCalls(t *testing.T) {
	fake := &authorityFake{}
	c := authorityClient(t, fake, 5*time.Second)
	ctx := context.Background()
	const signer = "example.com/serving"

	got, err := c.GetAuthority(ctx, signer)
	if err != nil || len(got.GetSigners()) != 1 || !proto.Equal(got.GetSigners()[0], authorityOf(signer)) {
		t.Errorf("GetAuthority(%s) = %v, %v", signer, got, err)
	}
	if got, err := c.GetAuthority(ctx); err != nil || len(got.GetSigners()) != 2 {
		t.Errorf("GetAuthority() = %v, %v; want every signer", got, err)
	}
	stage := &signetv1.StageCARequest{SignerName: signer, KeyUri: "pkcs11:object=next", CertificatePem: "CERT", IntermediatesPem: "CHAIN"}
	if resp, err := c.StageCA(ctx, stage); err != nil || !proto.Equal(resp.GetAuthority(), authorityOf(signer)) {
		t.Errorf("StageCA = %v, %v", resp, err)
	}
	activate := &signetv1.ActivateCARequest{SignerName: signer, Force: true, Reason: "incident 42"}
	if resp, err := c.ActivateCA(ctx, activate); err != nil || resp.GetAuthority().GetSignerName() != signer {
		t.Errorf("ActivateCA = %v, %v", resp, err)
	}
	retire := &signetv1.RetireCARequest{SignerName: signer, SerialNumber: "1f"}
	if resp, err := c.RetireCA(ctx, retire); err != nil || resp.GetAuthority().GetSignerName() != signer {
		t.Errorf("RetireCA = %v, %v", resp, err)
	}

	want := []proto.Message{
		&signetv1.GetAuthorityRequest{SignerNames: []string{signer}}, &signetv1.GetAuthorityRequest{},
		stage, activate, retire,
	}
	requests := fake.recorded()
	if len(requests) != len(want) {
		t.Fatalf("server got %d requests, want %d: %v", len(requests), len(want), requests)
	}
	for i, w := range want {
		if !proto.Equal(requests[i], w) {
			t.Errorf("request %d = %v, want %v", i, requests[i], w)
		}
	}
}

func TestAuthorityEmptyAnswer(t *testing.T) {
	c := authorityClient(t, &authorityFake{}, 5*time.Second)
	ctx := context.Background()
	const signer = "example.com/empty"
	if _, err := c.StageCA(ctx, &signetv1.StageCARequest{SignerName: signer}); !errors.Is(err, errNoAuthority) {
		t.Errorf("StageCA answered without a CA set: err = %v, want errNoAuthority", err)
	}
	if _, err := c.ActivateCA(ctx, &signetv1.ActivateCARequest{SignerName: signer}); !errors.Is(err, errNoAuthority) {
		t.Errorf("ActivateCA answered without a CA set: err = %v, want errNoAuthority", err)
	}
	if _, err := c.RetireCA(ctx, &signetv1.RetireCARequest{SignerName: signer, Fingerprint: "ab"}); !errors.Is(err, errNoAuthority) {
		t.Errorf("RetireCA answered without a CA set: err = %v, want errNoAuthority", err)
	}
}

// TestAuthorityRefusal: the server's refusal reaches the caller as its gRPC status, with the
// ErrorInfo reason and message intact, wrapped in an error that names the step and signer.
func TestAuthorityRefusal(t *testing.T) {
	const msg = `cluster "prod-us" has not published the staged CA`
	st, err := status.New(codes.FailedPrecondition, msg).WithDetails(&errdetails.ErrorInfo{
		Domain: signetv1.ErrorDomain,
		Reason: signetv1.ReasonName(signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := authorityClient(t, &authorityFake{err: st.Err()}, 5*time.Second)
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["GetAuthority"] = c.GetAuthority(ctx, "example.com/serving")
	_, errs["StageCA"] = c.StageCA(ctx, &signetv1.StageCARequest{SignerName: "example.com/serving"})
	_, errs["ActivateCA"] = c.ActivateCA(ctx, &signetv1.ActivateCARequest{SignerName: "example.com/serving"})
	_, errs["RetireCA"] = c.RetireCA(ctx, &signetv1.RetireCARequest{SignerName: "example.com/serving", SerialNumber: "1f"})
	for call, err := range errs {
		reason, message, terminal := Classify(err)
		if status.Code(err) != codes.FailedPrecondition || reason != "RotationRefused" || message != msg || !terminal {
			t.Errorf("%s: err = %v; classified %q, %q, %v", call, err, reason, message, terminal)
		}
		if !strings.Contains(err.Error(), "example.com/serving") {
			t.Errorf("%s: error %q does not name the signer", call, err)
		}
	}
}

func TestAuthorityTimeout(t *testing.T) {
	c := authorityClient(t, &authorityFake{}, 200*time.Millisecond)
	_, err := c.ActivateCA(context.Background(), &signetv1.ActivateCARequest{SignerName: "example.com/slow"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("ActivateCA on a slow server: err = %v, want DeadlineExceeded within the RPC timeout", err)
	}
}
