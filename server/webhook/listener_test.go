package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
)

// testTLS is a server configuration as the webhook's (TLS 1.3, client certificates required
// and verified, ALPN h2 and HTTP/1.1) and a client's trusting it, presenting a certificate of
// the client CA when withCert.
type testTLS struct {
	server *tls.Config
	client func(withCert bool) *tls.Config
}

func newTestTLS(t *testing.T) testTLS {
	t.Helper()
	ca := testpki.CA(t)
	serverKey := testpki.Key(t, testpki.P256)
	serverCert := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "server"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, serverKey.Public())
	clientKey := testpki.Key(t, testpki.P256)
	clientCert := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, clientKey.Public())
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	server := TLSConfig(&tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	})
	return testTLS{server: server, client: func(withCert bool) *tls.Config {
		c := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}}
		if withCert {
			c.Certificates = []tls.Certificate{{Certificate: [][]byte{clientCert.Raw}, PrivateKey: clientKey}}
		}
		return c
	}}
}

// failures records what a listener reports.
type failures struct {
	mu   sync.Mutex
	seen map[string]error // by remote address
}

func (f *failures) report(remote net.Addr, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]error{}
	}
	if _, dup := f.seen[remote.String()]; dup {
		panic("reported twice: " + remote.String())
	}
	f.seen[remote.String()] = err
}

// wait returns the error reported for remote, waiting up to 5 s; nil if none was.
func (f *failures) wait(remote string) error {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		err := f.seen[remote]
		f.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *failures) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

// listen starts a handshakingListener on a loopback port, closed when the test ends.
func listen(t *testing.T, cfg *tls.Config, timeout time.Duration, f *failures) *handshakingListener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newHandshakingListener(inner, cfg, timeout, f.report)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// accepted runs Accept in the background.
func accepted(l net.Listener) <-chan net.Conn {
	out := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(out)
			return
		}
		out <- c
	}()
	return out
}

// idle opens a TCP connection to l and sends nothing: a client stuck before its ClientHello.
func idle(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server closed c within 2 s: a read returns EOF or a
// reset.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// listenerGoroutines counts the goroutines running the listener's code.
func listenerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "webhook.(*handshakingListener).") {
			n++
		}
	}
	return n
}

// TestListenerAccepts: Accept returns the handshaken *tls.Conn of a good client, with the
// ALPN protocol it chose and its verified chain, although a client that never sends its
// ClientHello connected first; nothing is reported.
func TestListenerAccepts(t *testing.T) {
	tt := newTestTLS(t)
	var f failures
	l := listen(t, tt.server, time.Minute, &f)
	idle(t, l)
	got := accepted(l)
	client, err := tls.Dial("tcp", l.Addr().String(), tt.client(true))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var conn net.Conn
	select {
	case conn = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return the good client: the idle one holds it")
	}
	defer conn.Close()
	tc, ok := conn.(*tls.Conn)
	if !ok {
		t.Fatalf("Accept returned a %T, want a *tls.Conn", conn)
	}
	cs := tc.ConnectionState()
	if !cs.HandshakeComplete || cs.NegotiatedProtocol != "h2" || len(cs.VerifiedChains) == 0 ||
		tc.RemoteAddr().String() != client.LocalAddr().String() {
		t.Errorf("accepted %s: complete %t, protocol %q, %d verified chains; want the good client's, handshaken, h2, verified",
			tc.RemoteAddr(), cs.HandshakeComplete, cs.NegotiatedProtocol, len(cs.VerifiedChains))
	}
	if f.count() != 0 {
		t.Errorf("reported %v", f.seen)
	}
}

// TestListenerReportsFailures: a refused client, a client that sends plain HTTP (answered
// 400, as net/http does) and one that does not handshake within the timeout are each
// reported once with their address, closed, and never returned by Accept.
func TestListenerReportsFailures(t *testing.T) {
	tt := newTestTLS(t)
	var f failures
	l := listen(t, tt.server, 300*time.Millisecond, &f)
	got := accepted(l)

	noCert, err := tls.Dial("tcp", l.Addr().String(), tt.client(false))
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	if _, err := noCert.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("the client without a certificate read %v, want the alert certificate required", err)
	}
	if err := f.wait(noCert.LocalAddr().String()); err == nil || !strings.Contains(err.Error(), "client didn't provide a certificate") {
		t.Errorf("reported %v for the client without a certificate", err)
	}

	plain := idle(t, l)
	if _, err := io.WriteString(plain, "POST / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(plain), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP got %v, %v; want 400", resp, err)
	} else if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP got %q", body)
	}
	if err := f.wait(plain.LocalAddr().String()); err == nil {
		t.Error("plain HTTP was not reported")
	}

	slow := idle(t, l)
	if err := f.wait(slow.LocalAddr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("reported %v for the client that never handshook, want the deadline", err)
	}
	if !closedByServer(slow) {
		t.Error("the client that never handshook is still connected")
	}

	select {
	case c := <-got:
		t.Errorf("Accept returned %s", c.RemoteAddr())
	default:
	}
}

// TestListenerClose: Close, with a client stuck before its ClientHello and one handshaken but
// not yet accepted, returns at once (not after the handshake timeout), closes both
// connections, reports neither, makes Accept return net.ErrClosed, and leaves no goroutine
// of the listener behind.
func TestListenerClose(t *testing.T) {
	before := listenerGoroutines()
	tt := newTestTLS(t)
	var f failures
	l := listen(t, tt.server, time.Minute, &f)
	stuck := idle(t, l)
	done, err := tls.Dial("tcp", l.Addr().String(), tt.client(true))
	if err != nil {
		t.Fatal(err)
	}
	defer done.Close()
	time.Sleep(50 * time.Millisecond) // the server's side of the handshake finishes

	start := time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if !closedByServer(stuck) {
		t.Error("the client mid-handshake is still connected")
	}
	if !closedByServer(done) {
		t.Error("the handshaken client nobody accepted is still connected")
	}
	if c, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, %v; want net.ErrClosed", c, err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if f.count() != 0 {
		t.Errorf("Close's aborts were reported: %v", f.seen)
	}
	for deadline := time.Now().Add(time.Second); listenerGoroutines() > before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the listener left after Close", listenerGoroutines()-before)
		}
	}
}
