package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// handshakeTimeout bounds a client's TLS handshake: the one http.Server gave it before the
// listener did the handshakes (its shortest timeout, readHeaderTimeout).
const handshakeTimeout = readHeaderTimeout

// handshakingListener is the webhook's TLS listener. Unlike tls.NewListener, whose
// connections http.Server handshakes itself (and logs each failure as an unlimited
// "http: TLS handshake error" line), it runs every handshake in its own goroutine, within a
// timeout (handshakeTimeout), reports each failure to failed (the server's refusal log,
// which tells a refused client certificate from the rest), and returns from Accept only
// handshaken *tls.Conn: http.Server then finds the handshake done, fills Request.TLS and
// serves HTTP/2 when ALPN chose h2, as before. A client slow to handshake holds its
// goroutine only, never Accept. Close stops the accept loop, aborts the handshakes in
// progress, closes the connections not yet accepted, and returns once every goroutine of
// the listener has.
type handshakingListener struct {
	inner   net.Listener
	config  *tls.Config
	timeout time.Duration
	// failed reports a failed handshake, except those Close aborted; nil reports nothing.
	failed func(remote net.Addr, err error)

	// ctx ends at Close: it aborts the handshakes and stops the goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	// ready hands handshaken connections to Accept; errs hands it inner's Accept errors.
	ready chan *tls.Conn
	errs  chan error
	// running counts the accept loop and the handshakes in progress.
	running   sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// newHandshakingListener starts accepting on inner; every connection is handshaken with
// config within timeout and its failure reported to failed.
func newHandshakingListener(inner net.Listener, config *tls.Config, timeout time.Duration, failed func(net.Addr, error)) *handshakingListener {
	l := &handshakingListener{inner: inner, config: config, timeout: timeout, failed: failed,
		ready: make(chan *tls.Conn), errs: make(chan error)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.running.Add(1)
	go l.acceptLoop()
	return l
}

// acceptLoop accepts on inner until Close and starts a handshake for each connection. An
// error of inner's Accept goes to Accept (http.Server backs off on a temporary one and stops
// on any other, closing this listener); the loop waits for it to be taken, so it never spins.
func (l *handshakingListener) acceptLoop() {
	defer l.running.Done()
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			select {
			case l.errs <- err:
				continue
			case <-l.ctx.Done():
				return
			}
		}
		if l.ctx.Err() != nil {
			_ = raw.Close()
			return
		}
		l.running.Add(1)
		go l.handshake(raw)
	}
}

// handshake runs the TLS handshake on raw, within the timeout, and hands the connection to Accept, or reports
// the failure and closes it.
func (l *handshakingListener) handshake(raw net.Conn) {
	defer l.running.Done()
	conn := tls.Server(raw, l.config)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := conn.HandshakeContext(ctx) // closes raw if ctx ends first
	cancel()
	if err != nil {
		if l.ctx.Err() == nil {
			answerPlainHTTP(err)
			if l.failed != nil {
				l.failed(raw.RemoteAddr(), err)
			}
		}
		_ = raw.Close()
		return
	}
	select {
	case l.ready <- conn:
	case <-l.ctx.Done():
		_ = conn.Close()
	}
}

// Accept returns the next handshaken connection, a *tls.Conn.
func (l *handshakingListener) Accept() (net.Conn, error) {
	select {
	case conn := <-l.ready:
		return conn, nil
	case err := <-l.errs:
		return nil, err
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close closes inner, aborts the handshakes in progress and closes the connections Accept has
// not returned, then waits for the listener's goroutines. It returns inner's Close error;
// a second call returns the first's.
func (l *handshakingListener) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		l.closeErr = l.inner.Close()
		l.running.Wait()
	})
	return l.closeErr
}

// Addr is inner's address.
func (l *handshakingListener) Addr() net.Addr { return l.inner.Addr() }

// answerPlainHTTP answers a client that sent plain HTTP to the TLS port with a 400 saying so,
// as http.Server does when it runs the handshake itself.
func answerPlainHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil || !looksLikeHTTP(re.RecordHeader) {
		return
	}
	_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
}

// looksLikeHTTP reports whether a TLS record header is the start of an HTTP request
// (net/http's test).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
