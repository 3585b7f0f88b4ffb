package signerclient

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// serverFirstWait bounds how long ClientHandshake waits, after the TLS handshake, for the
// server's first bytes.
const serverFirstWait = 3 * time.Second

// maxRecentFailures bounds the distinct handshake failures kept for Explain.
const maxRecentFailures = 16

// HandshakeOptions configure NewHandshakeCredentials.
type HandshakeOptions struct {
	// ClientCertificate returns the leaf of the client certificate the handshake presents,
	// for the messages; nil (or a nil result) leaves it out.
	ClientCertificate func() *x509.Certificate
	// Clock judges the client certificate's validity for the messages; nil means the real
	// clock.
	Clock clock.PassiveClock
	// Logger receives one error line per distinct failure of each server (and one when a
	// handshake with it succeeds again); repeats are logged at V(4). The zero Logger discards.
	Logger klog.Logger
}

// HandshakeCredentials are TLS transport credentials for a gRPC client of a signing server
// that name a failed mutual TLS handshake: every failure about a certificate is returned as a
// *HandshakeError, logged once per distinct failure, and remembered so that Explain can
// attach it to the failed call it caused (gRPC passes a connection's error on as text only).
//
// After the handshake ClientHandshake waits (at most serverFirstWait, or the call's
// deadline) for the server's first bytes: a gRPC server sends its HTTP/2 settings at once.
// In TLS 1.3 the server judges the client certificate after the client has finished its side
// of the handshake, so its refusal (an alert: certificate required, bad certificate, ...)
// arrives only then; without the wait the client would write its preface into a closed
// connection and report "broken pipe" instead of the server's alert. When nothing arrives in
// time the connection is used as it is.
type HandshakeCredentials struct {
	credentials.TransportCredentials
	clientCert func() *x509.Certificate
	clock      clock.PassiveClock
	failures   *handshakeFailures
}

// NewHandshakeCredentials wraps creds (TLS credentials, e.g. credentials.NewTLS).
func NewHandshakeCredentials(creds credentials.TransportCredentials, opts HandshakeOptions) *HandshakeCredentials {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &HandshakeCredentials{TransportCredentials: creds, clientCert: opts.ClientCertificate, clock: clk,
		failures: &handshakeFailures{logger: opts.Logger, byServer: map[string]string{}}}
}

// ClientHandshake runs the TLS handshake, then waits for the server's first byte. A
// refusal of either side's certificate is a *HandshakeError; a connection the server closes
// without an alert fails with an error saying so.
func (c *HandshakeCredentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	server := authority
	if addr := raw.RemoteAddr(); addr != nil {
		server = addr.String()
	}
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		if he := clientRefusal(server, err, c.clock.Now()); he != nil {
			c.failures.failed(he)
			return nil, nil, he
		}
		return nil, nil, err
	}
	deadline := time.Now().Add(serverFirstWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		c.failures.succeeded(server)
		return conn, info, nil
	}
	r := bufio.NewReader(conn)
	_, err = r.Peek(1)
	_ = conn.SetReadDeadline(time.Time{})
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		conn.Close()
		if he := serverRefusal(server, err, c.leaf(), c.clock.Now()); he != nil {
			c.failures.failed(he)
			return nil, nil, he
		}
		return nil, nil, fmt.Errorf("the server closed the connection after the TLS handshake: %w", err)
	}
	c.failures.succeeded(server)
	return &peekedConn{Conn: conn, r: r}, info, nil
}

// leaf is the client certificate presented, or nil.
func (c *HandshakeCredentials) leaf() *x509.Certificate {
	if c.clientCert == nil {
		return nil
	}
	return c.clientCert()
}

// Clone returns a copy of c that shares its memory of failures.
func (c *HandshakeCredentials) Clone() credentials.TransportCredentials {
	return &HandshakeCredentials{TransportCredentials: c.TransportCredentials.Clone(), clientCert: c.clientCert, clock: c.clock, failures: c.failures}
}

// Explain returns err, a failed call's error, wrapping the *HandshakeError that caused it
// when err is an Unavailable status whose message holds a failure these credentials met: the
// result matches the failure's kind with errors.Is and keeps the status (code Unavailable,
// the HandshakeError's message). Any other err is returned as it is.
func (c *HandshakeCredentials) Explain(err error) error {
	if err == nil || status.Code(err) != codes.Unavailable {
		return err
	}
	var he *HandshakeError
	if errors.As(err, &he) {
		return err
	}
	st, _ := status.FromError(err)
	if he = c.failures.match(st.Message()); he == nil {
		return err
	}
	return &explainedError{handshake: he, call: err}
}

// explainedError is a failed call and the handshake failure that caused it.
type explainedError struct {
	handshake *HandshakeError
	call      error
}

func (e *explainedError) Error() string { return e.handshake.Error() }

// Unwrap returns the handshake failure, then the call's error.
func (e *explainedError) Unwrap() []error { return []error{e.handshake, e.call} }

// GRPCStatus is Unavailable with the handshake failure's message.
func (e *explainedError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.handshake.Error())
}

// handshakeFailures remembers the failed handshakes: per server the message last logged,
// and the recent distinct failures for Explain.
type handshakeFailures struct {
	logger klog.Logger

	mu       sync.Mutex
	byServer map[string]string // server address → message of its failure, until a handshake succeeds
	recent   []*HandshakeError // distinct messages, oldest first, at most maxRecentFailures
}

// failed records e: logged as an error when it is news for its server, at V(4) when it
// repeats.
func (f *handshakeFailures) failed(e *HandshakeError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byServer[e.Server] == e.Error() {
		f.logger.V(4).Info("TLS handshake with the signing server still fails", "server", e.Server, "reason", e.Reason())
	} else {
		f.byServer[e.Server] = e.Error()
		f.logger.Error(e, "TLS handshake with the signing server failed; retrying with back-off", "server", e.Server, "reason", e.Reason())
	}
	for i, r := range f.recent {
		if r.Error() == e.Error() {
			f.recent = append(f.recent[:i], f.recent[i+1:]...)
			break
		}
	}
	if len(f.recent) == maxRecentFailures {
		f.recent = f.recent[1:]
	}
	f.recent = append(f.recent, e)
}

// succeeded records a handshake with server that went through.
func (f *handshakeFailures) succeeded(server string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, failing := f.byServer[server]; failing {
		delete(f.byServer, server)
		f.logger.Info("TLS handshake with the signing server succeeds again", "server", server)
	}
}

// match returns the most recent failure whose message msg holds, as it is or as gRPC quotes
// it (a connection error's description is formatted with %q), or nil.
func (f *handshakeFailures) match(msg string) *HandshakeError {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.recent) - 1; i >= 0; i-- {
		text := f.recent[i].Error()
		quoted := strconv.Quote(text)
		if strings.Contains(msg, text) || strings.Contains(msg, quoted[1:len(quoted)-1]) {
			return f.recent[i]
		}
	}
	return nil
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads what was read ahead, then from the connection.
func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
