package signerclient

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/signet-pki/signet/internal/mtlstest"
	"github.com/signet-pki/signet/internal/version"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// TestClientSendsItsVersion: every call carries the configured version, or this binary's
// when none is configured (a test binary's: devel, as internal/version says), in the signet-client-version header, once.
func TestClientSendsItsVersion(t *testing.T) {
	t.Parallel()
	ca := mtlstest.NewCA(t)
	var mu sync.Mutex
	var seen [][]string
	fake := &fakeServer{respond: func(ctx context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, metadata.ValueFromIncomingContext(ctx, signetv1.ClientVersionHeader))
		return &signetv1.SignCertificateSigningRequestResponse{CertificateChainPem: testChain}, nil
	}}
	port := startServer(t, ca, "localhost", fake)
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	for _, tc := range []struct{ configured, want string }{{"v0.7.2", "v0.7.2"}, {"", version.Version}} {
		c := newTestClient(t, Config{Address: net.JoinHostPort("localhost", port), CAFile: caFile, CertFile: certFile, KeyFile: keyFile,
			RPCTimeout: 5 * time.Second, Version: tc.configured})
		for range 2 {
			if _, err := c.SignCSR(context.Background(), testCSR()); err != nil {
				t.Fatalf("SignCSR: %v", err)
			}
		}
		mu.Lock()
		got := seen[len(seen)-2:]
		mu.Unlock()
		for _, values := range got {
			if len(values) != 1 || values[0] != tc.want {
				t.Errorf("version %q configured: the server saw %s = %q, want [%q]", tc.configured, signetv1.ClientVersionHeader, values, tc.want)
			}
		}
	}
}
