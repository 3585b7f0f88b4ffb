// Package signerclient is the watcher's gRPC client of the Signet signing server: it dials
// with mTLS, turns a CertificateSigningRequest into a SignCertificateSigningRequestRequest, and
// classifies the server's errors as terminal or transient.
package signerclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// Keepalive parameters of the connection. The server's keepalive enforcement policy must
// allow pings this often (MinTime ≤ 30s), or it closes the connection with too_many_pings.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// serviceConfig spreads calls over every address the server name resolves to.
const serviceConfig = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// Config is how to reach the signing server.
type Config struct {
	// Address is the server's host:port.
	Address string
	// CAFile is the PEM bundle of CA certificates that verify the server.
	CAFile string
	// CertFile and KeyFile are the client certificate (chain) and key, PEM. They are re-read
	// when their modification time changes, checked at most every few seconds.
	CertFile, KeyFile string
	// ServerName is the name verified in the server's certificate; empty means the host part
	// of Address.
	ServerName string
	// RPCTimeout bounds every call; it must be positive.
	RPCTimeout time.Duration
	// Clock paces the certificate reload checks; nil means the real clock.
	Clock clock.PassiveClock
	// Logger reports certificate reloads; the zero Logger discards.
	Logger klog.Logger
}

// Client signs CertificateSigningRequests with the signing server. It is safe for concurrent
// use.
type Client struct {
	conn    *grpc.ClientConn
	rpc     signetv1.SignerServiceClient
	timeout time.Duration
}

// New loads the TLS material in cfg and returns a Client for the server at cfg.Address. It
// does not wait for the connection: the first call connects. TLS 1.3 is the minimum.
func New(cfg Config) (*Client, error) {
	if cfg.RPCTimeout <= 0 {
		return nil, fmt.Errorf("creating signer client: rpc timeout %s is not positive", cfg.RPCTimeout)
	}
	tlsConfig, err := clientTLSConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating signer client: %w", err)
	}
	conn, err := grpc.NewClient(cfg.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                keepaliveTime,
			Timeout:             keepaliveTimeout,
			PermitWithoutStream: false,
		}),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithUserAgent("signet-watcher"),
	)
	if err != nil {
		return nil, fmt.Errorf("creating signer client for %s: %w", cfg.Address, err)
	}
	return &Client{conn: conn, rpc: signetv1.NewSignerServiceClient(conn), timeout: cfg.RPCTimeout}, nil
}

// clientTLSConfig builds the mTLS configuration: the server verified against CAFile under
// ServerName (or the host of Address), the client certificate served from disk by a reloader.
func clientTLSConfig(cfg Config) (*tls.Config, error) {
	serverName := cfg.ServerName
	if serverName == "" {
		host, _, err := net.SplitHostPort(cfg.Address)
		if err != nil {
			return nil, fmt.Errorf("parsing server address %q: %w", cfg.Address, err)
		}
		serverName = host
	}
	caPEM, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading server CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("reading server CA %s: no PEM certificates found", cfg.CAFile)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	reloader, err := newCertReloader(cfg.CertFile, cfg.KeyFile, clk, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		RootCAs:              roots,
		ServerName:           serverName,
		GetClientCertificate: reloader.GetClientCertificate,
	}, nil
}

// SignCSR asks the server to sign csr and returns the PEM chain for status.certificate, leaf
// first. The call is bounded by the client's RPC timeout. Errors wrap the gRPC status; see
// Classify.
func (c *Client) SignCSR(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.SignCertificateSigningRequest(ctx, BuildRequest(csr))
	if err != nil {
		return nil, fmt.Errorf("signing CSR %s: %w", csr.Name, err)
	}
	if resp.GetCertificateChainPem() == "" {
		return nil, fmt.Errorf("signing CSR %s: %w", csr.Name, errEmptyChain)
	}
	return []byte(resp.GetCertificateChainPem()), nil
}

// errEmptyChain is returned when the server answers without a certificate; it is transient.
var errEmptyChain = errors.New("server returned an empty certificate chain")

// Close closes the connection to the server.
func (c *Client) Close() error {
	return c.conn.Close()
}

// BuildRequest turns csr into the request the server expects: the spec's signer name,
// PKCS#10 request, usages, optional expirationSeconds and requester identity, and the
// object's UID and name (the server derives its idempotency key from them).
func BuildRequest(csr *certificatesv1.CertificateSigningRequest) *signetv1.SignCertificateSigningRequestRequest {
	spec := &csr.Spec
	usages := make([]string, 0, len(spec.Usages))
	for _, u := range spec.Usages {
		usages = append(usages, string(u))
	}
	var extra map[string]*signetv1.ExtraValue
	if len(spec.Extra) > 0 {
		extra = make(map[string]*signetv1.ExtraValue, len(spec.Extra))
		for k, v := range spec.Extra {
			extra[k] = &signetv1.ExtraValue{Values: append([]string(nil), v...)}
		}
	}
	req := &signetv1.SignCertificateSigningRequestRequest{
		SignerName: spec.SignerName,
		Request:    spec.Request,
		Usages:     usages,
		Requester: &signetv1.Requester{
			Username: spec.Username,
			Uid:      spec.UID,
			Groups:   append([]string(nil), spec.Groups...),
			Extra:    extra,
		},
		Object: &signetv1.KubernetesObject{
			Uid:  string(csr.UID),
			Name: csr.Name,
		},
	}
	if spec.ExpirationSeconds != nil {
		seconds := *spec.ExpirationSeconds
		req.ExpirationSeconds = &seconds
	}
	return req
}
