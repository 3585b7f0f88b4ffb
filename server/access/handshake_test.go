package access

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// handshakeResult is what each side of one TLS connection saw.
type handshakeResult struct {
	serverErr      error  // the server's handshake
	serverIdentity string // Identity of the verified client, when the server's handshake passed
	clientErr      error  // the client's handshake, or its first read when the handshake passed
}

// handshake connects a client presenting clientCert to a TLS 1.3 server over loopback that
// requires verified client certificates and calls verify, exactly as server.go would wire it.
// The server sends "ok" after a successful handshake; the client reads it.
func handshake(t *testing.T, p *testPKI, verify func(tls.ConnectionState) error, clientCert tls.Certificate) handshakeResult {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	serverConf := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{p.server},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        pool,
		VerifyConnection: verify,
	}
	clientConf := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{clientCert},
		RootCAs:      pool,
		ServerName:   "signet.test",
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()

	var res handshakeResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, err := lis.Accept()
		if err != nil {
			res.serverErr = err
			return
		}
		conn := tls.Server(raw, serverConf)
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if res.serverErr = conn.Handshake(); res.serverErr != nil {
			return
		}
		res.serverIdentity = Identity(conn.ConnectionState().VerifiedChains[0][0])
		_, res.serverErr = conn.Write([]byte("ok"))
	}()

	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, clientConf)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// In TLS 1.3 the client's handshake ends before the server has checked the client's
	// certificate; the server's refusal arrives as an alert on the client's first read.
	res.clientErr = conn.Handshake()
	if res.clientErr == nil {
		buf := make([]byte, 2)
		_, res.clientErr = io.ReadFull(conn, buf)
	}
	<-done
	return res
}

func TestHandshake(t *testing.T) {
	p := newPKI(t)
	a := mustAuthorizer(t, []Client{
		{Identity: watcherID, Signers: []string{"*"}},
		{Identity: toolID, Signers: []string{signerClient}},
	})
	tests := []struct {
		name   string
		cert   tls.Certificate
		wantID string // "" = the handshake must fail
	}{
		{"URI SAN client", p.watcher, watcherID},
		{"CN client", p.tool, toolID},
		{"unknown client", p.stranger, ""},
		{"client without identity", p.anonymous, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := handshake(t, p, a.VerifyConnection, tt.cert)
			if tt.wantID != "" {
				if res.serverErr != nil || res.clientErr != nil {
					t.Fatalf("handshake failed: server: %v; client: %v", res.serverErr, res.clientErr)
				}
				if res.serverIdentity != tt.wantID {
					t.Fatalf("server saw identity %q, want %q", res.serverIdentity, tt.wantID)
				}
				return
			}
			if !errors.Is(res.serverErr, ErrUnknownClient) {
				t.Errorf("server handshake error = %v, want ErrUnknownClient", res.serverErr)
			}
			if res.clientErr == nil {
				t.Error("the refused client completed a handshake and read data")
			}
		})
	}
}

// TestHandshakeAfterReload swaps the Authorizer the way the server reloads its configuration:
// the TLS hook loads the current one for every handshake.
func TestHandshakeAfterReload(t *testing.T) {
	p := newPKI(t)
	var current atomic.Pointer[Authorizer]
	current.Store(mustAuthorizer(t, []Client{{Identity: watcherID, Signers: []string{"*"}}}))
	verify := func(cs tls.ConnectionState) error { return current.Load().VerifyConnection(cs) }

	if res := handshake(t, p, verify, p.tool); !errors.Is(res.serverErr, ErrUnknownClient) {
		t.Fatalf("before reload: server error = %v, want ErrUnknownClient", res.serverErr)
	}
	current.Store(mustAuthorizer(t, []Client{{Identity: toolID, Signers: []string{signerClient}}}))
	if res := handshake(t, p, verify, p.tool); res.serverErr != nil || res.clientErr != nil {
		t.Fatalf("after reload: server: %v; client: %v", res.serverErr, res.clientErr)
	}
	if res := handshake(t, p, verify, p.watcher); !errors.Is(res.serverErr, ErrUnknownClient) {
		t.Fatalf("removed client after reload: server error = %v, want ErrUnknownClient", res.serverErr)
	}
}

// TestHandshakeUntrustedCA shows the chain is verified before VerifyConnection runs: a
// certificate with a configured identity from another CA never reaches it.
func TestHandshakeUntrustedCA(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	a := mustAuthorizer(t, []Client{{Identity: watcherID, Signers: []string{"*"}}})
	called := false
	verify := func(cs tls.ConnectionState) error { called = true; return a.VerifyConnection(cs) }
	res := handshake(t, p, verify, other.watcher)
	if res.serverErr == nil || res.clientErr == nil {
		t.Fatalf("a client of another CA connected: server: %v; client: %v", res.serverErr, res.clientErr)
	}
	if called {
		t.Error("VerifyConnection ran for an unverified chain")
	}
}
