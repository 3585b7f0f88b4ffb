// Package signerclient is the gRPC client of the Signet signing servers, shared by the
// watcher, signetctl, the bench and any tool that signs through Signet: it dials
// every endpoint with mTLS, spreads calls over the healthy ones (fail-over), signs
// CertificateSigningRequests and PodCertificateRequests (v1 or v1beta1) with the requests
// objectrequest builds from them, and classifies the server's errors as terminal or
// transient.
package signerclient

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/health" // client-side health checking (healthCheckConfig)
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// Keepalive parameters of the connection. They fit the server's enforcement policy (MinTime
// 10s, PermitWithoutStream true): a ping at most every 30s, and only while a call is in flight,
// so an idle watcher costs the server nothing and is never closed with too_many_pings.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// serviceConfig spreads calls over every endpoint that is connected and reports service
// SERVING (grpc.health.v1.Health/Watch; the server reports signetv1.HealthService NOT_SERVING
// when it stops gracefully or its ledger fails, and a signer's SignerHealthService also while
// the signer's CA key cannot be reached); a stopped, unhealthy or unreachable endpoint is
// skipped until it recovers. A server without the health service counts as healthy.
func serviceConfig(service string) string {
	return `{"loadBalancingConfig":[{"round_robin":{}}],` +
		`"healthCheckConfig":{"serviceName":"` + service + `"}}`
}

// Flow-control windows of the connection to the server, fixed.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// resolverScheme is the scheme of the per-client manual resolver holding the endpoints.
const resolverScheme = "signet-endpoints"

// Config is how to reach the signing server.
type Config struct {
	// Address is one server's host:port; shorthand for a one-element Addresses. Both may be
	// set: the endpoints are Address then Addresses, duplicates removed; at least one.
	Address string
	// Addresses are the host:port of every signing server (fail-over endpoints). Calls go
	// round-robin to the endpoints that are connected and healthy.
	Addresses []string
	// CAFile is the PEM bundle of CA certificates that verify the server. It is loaded again
	// when its content changes (a SHA-256 digest of the file, not its modification time or
	// size), checked on use at most every few seconds; new connections use the new bundle, so
	// a server can move to a new CA without a restart (publish old and new CA in the bundle,
	// then switch the server's certificate).
	CAFile string
	// CertFile and KeyFile are the client certificate (chain) and key, PEM. They are loaded
	// again when their contents change (a SHA-256 digest of both files, not their
	// modification time or size), checked on use at most every few seconds; a pair that does
	// not load keeps the previous one in use.
	CertFile, KeyFile string
	// ServerName is the name verified in every server's certificate; empty means the host
	// part of each endpoint's address.
	ServerName string
	// HealthService is the grpc.health.v1 service whose status decides which endpoints take
	// calls: signetv1.HealthService when empty. A client of a single signer sets
	// signetv1.SignerHealthService(name), so that it also fails over when that signer's CA
	// key (an HSM or TPM) is unreachable on one endpoint.
	HealthService string
	// RPCTimeout bounds every call; it must be positive.
	RPCTimeout time.Duration
	// Clock paces the TLS file reload checks and times the calls for ObserveRPC; nil means
	// the real clock.
	Clock clock.PassiveClock
	// Logger reports TLS file reloads and failed TLS handshakes (once per distinct failure of
	// each server, and when a handshake succeeds again); the zero Logger discards.
	Logger klog.Logger
	// ObserveRPC, if not nil, is called after every call with the method's name (the part
	// after the last "/", e.g. "SignCertificateSigningRequest"), the call's gRPC code (OK on
	// success; client-side failures such as a deadline or no healthy endpoint have their code
	// too) and its duration. It must be safe for concurrent use.
	ObserveRPC func(method string, code codes.Code, d time.Duration)
	// Version is the version the client reports in the signetv1.ClientVersionHeader metadata
	// of every call, which the server checks against its skew policy (docs/compatibility.md);
	// empty means this binary's own (internal/version.Version).
	Version string
}

// Client signs CertificateSigningRequests and PodCertificateRequests with the signing server. It is safe for concurrent
// use.
type Client struct {
	conn    *grpc.ClientConn
	creds   *HandshakeCredentials // names failed handshakes (Explain)
	rpc     signetv1.SignerServiceClient
	health  healthpb.HealthClient
	timeout time.Duration
	certs   *certReloader // the client certificate, for ClientCertificate
}

// New loads the TLS material in cfg and returns a Client for the servers at cfg.Address and
// cfg.Addresses. It does not wait for a connection: endpoints connect in the background; a
// call waits (within its deadline) while they are still connecting and fails with
// Unavailable, a transient error, once none is connected and healthy. Each endpoint is
// reconnected with gRPC's back-off and rejoins when healthy. TLS 1.3 is the minimum.
//
// A call that fails because the TLS handshake failed over a certificate returns an error
// matching the failure's kind with errors.Is (ErrClientNotConfigured, ErrClientCAUntrusted,
// ErrServerNameMismatch, ...; see HandshakeError), still an Unavailable status, whose message
// says what to do; each distinct failure is logged once (cfg.Logger). The connection keeps
// being retried with back-off, so a certificate renewed on disk (or a server reconfigured)
// cures it without a restart.
func New(cfg Config) (*Client, error) {
	if cfg.RPCTimeout <= 0 {
		return nil, fmt.Errorf("creating signer client: rpc timeout %s is not positive", cfg.RPCTimeout)
	}
	endpoints, err := resolverAddresses(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating signer client: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	creds, certs, err := clientCredentials(cfg, clk)
	if err != nil {
		return nil, fmt.Errorf("creating signer client: %w", err)
	}
	endpointResolver := manual.NewBuilderWithScheme(resolverScheme)
	endpointResolver.InitialState(resolver.State{Addresses: endpoints})
	opts := []grpc.DialOption{
		grpc.WithResolvers(endpointResolver),
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                keepaliveTime,
			Timeout:             keepaliveTimeout,
			PermitWithoutStream: false,
		}),
		grpc.WithDefaultServiceConfig(serviceConfig(cmp.Or(cfg.HealthService, signetv1.HealthService))),
		grpc.WithUserAgent("signet-watcher"),
		// Fixed flow-control windows: the dynamic default pings the server on almost every
		// answer to measure bandwidth (see signet-server's streamWindow); the messages are small.
		grpc.WithStaticStreamWindowSize(streamWindow),
		grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithChainUnaryInterceptor(versionInterceptor(cmp.Or(cfg.Version, version.Version)), explainInterceptor(creds)),
	}
	if cfg.ObserveRPC != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(observeInterceptor(cfg.ObserveRPC, clk)))
	}
	conn, err := grpc.NewClient(resolverScheme+":///signing-server", opts...)
	if err != nil {
		return nil, fmt.Errorf("creating signer client for %s: %w", endpointList(endpoints), err)
	}
	return &Client{conn: conn, creds: creds, rpc: signetv1.NewSignerServiceClient(conn), health: healthpb.NewHealthClient(conn),
		timeout: cfg.RPCTimeout, certs: certs}, nil
}

// resolverAddresses returns the endpoints of cfg, Address first, without duplicates, each
// with the name its certificate is verified against: cfg.ServerName, or the endpoint's host.
func resolverAddresses(cfg Config) ([]resolver.Address, error) {
	var out []resolver.Address
	seen := make(map[string]bool)
	for _, addr := range append([]string{cfg.Address}, cfg.Addresses...) {
		if addr == "" || seen[addr] {
			continue
		}
		seen[addr] = true
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("parsing server address %q: %w", addr, err)
		}
		serverName := cfg.ServerName
		if serverName == "" {
			serverName = host
		}
		out = append(out, resolver.Address{Addr: addr, ServerName: serverName})
	}
	if len(out) == 0 {
		return nil, errors.New("no server address")
	}
	return out, nil
}

// endpointList joins the endpoints' addresses, for errors.
func endpointList(endpoints []resolver.Address) string {
	addrs := make([]string, len(endpoints))
	for i, e := range endpoints {
		addrs[i] = e.Addr
	}
	return strings.Join(addrs, ",")
}

// observeInterceptor reports every unary call to observe, timed with clk.
func observeInterceptor(observe func(string, codes.Code, time.Duration), clk clock.PassiveClock) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := clk.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		observe(method[strings.LastIndex(method, "/")+1:], status.Code(err), clk.Since(start))
		return err
	}
}

// explainInterceptor attaches to a failed call the handshake failure that caused it
// (HandshakeCredentials.Explain).
func explainInterceptor(creds *HandshakeCredentials) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return creds.Explain(invoker(ctx, method, req, reply, cc, opts...))
	}
}

// clientCredentials builds the mTLS credentials: TLS 1.3, servers verified against the
// current CAFile bundle (re-read when it changes) under the name each endpoint carries (see
// resolverAddresses), the client certificate served from disk by a reloader, which it also
// returns (Client.ClientCertificate); failed handshakes are named (HandshakeCredentials).
func clientCredentials(cfg Config, clk clock.PassiveClock) (*HandshakeCredentials, *certReloader, error) {
	roots, err := newCAReloader(cfg.CAFile, clk, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	certs, err := newCertReloader(cfg.CertFile, cfg.KeyFile, clk, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	creds := &reloadingTLS{roots: roots, base: &tls.Config{
		MinVersion:           tls.VersionTLS13,
		ServerName:           cfg.ServerName,
		GetClientCertificate: certs.GetClientCertificate,
	}}
	return NewHandshakeCredentials(creds, HandshakeOptions{
		ClientCertificate: func() *x509.Certificate { return certs.Get().Leaf },
		Clock:             clk,
		Logger:            cfg.Logger,
	}), certs, nil
}

// Issued is what the server returned for one signed CSR or PodCertificateRequest.
type Issued struct {
	// Chain is the PEM chain for status.certificate (status.certificateChain), leaf first.
	Chain []byte
	// Serial is the leaf's serial number in lower-case hexadecimal, as the server records it;
	// empty if the server did not say.
	Serial string
	// NotBefore is the leaf's NotBefore; zero if the server did not say (always set for a
	// PodCertificateRequest).
	NotBefore time.Time
	// NotAfter is the leaf's NotAfter; zero if the server did not say (always set for a
	// PodCertificateRequest).
	NotAfter time.Time
	// BeginRefreshAt is when the kubelet should start refreshing the certificate, for a
	// PodCertificateRequest's status.beginRefreshAt; zero for a CSR.
	BeginRefreshAt time.Time
}

// SignCSR asks the server to sign csr and returns the PEM chain for status.certificate, leaf
// first, with the leaf's serial number and NotAfter as the server reports them. The call is
// bounded by the client's RPC timeout. Errors wrap the gRPC status; see Classify.
func (c *Client) SignCSR(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, nodeAddresses ...corev1.NodeAddress) (Issued, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := objectrequest.CSR(csr)
	req.NodeAddresses = objectrequest.NodeAddresses(nodeAddresses)
	resp, err := c.rpc.SignCertificateSigningRequest(ctx, req)
	if err != nil {
		return Issued{}, fmt.Errorf("signing CSR %s: %w", csr.Name, err)
	}
	if resp.GetCertificateChainPem() == "" {
		return Issued{}, fmt.Errorf("signing CSR %s: %w", csr.Name, errEmptyChain)
	}
	issued := Issued{Chain: []byte(resp.GetCertificateChainPem()), Serial: resp.GetSerialNumber()}
	if ts := resp.GetNotBefore(); ts != nil {
		issued.NotBefore = ts.AsTime()
	}
	if ts := resp.GetNotAfter(); ts != nil {
		issued.NotAfter = ts.AsTime()
	}
	return issued, nil
}

// CheckHealth asks a server, picked as a signing call would be, whether it serves the signing
// service (a grpc.health.v1 Check of HealthService), within the client's RPC timeout. It fails
// on an error or an answer other than SERVING.
func (c *Client) CheckHealth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: signetv1.HealthService})
	if err != nil {
		return fmt.Errorf("checking the health of %s: %w", signetv1.HealthService, err)
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("checking the health of %s: %s", signetv1.HealthService, st)
	}
	return nil
}

// errEmptyChain is returned when the server answers without a certificate; it is transient.
var errEmptyChain = errors.New("server returned an empty certificate chain")

// Close closes the connection to the server.
func (c *Client) Close() error {
	return c.conn.Close()
}
