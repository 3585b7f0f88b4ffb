package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// serverFirstWait bounds how long the client waits, after the TLS handshake, for the server's
// first bytes (see firstReadCreds).
const serverFirstWait = 3 * time.Second

// firstReadCreds are TLS credentials that wait, after the handshake, for the server's first
// bytes (a gRPC server sends its HTTP/2 settings at once). In TLS 1.3 the server judges the
// client certificate after the client has finished its handshake, so its refusal (an alert:
// certificate required, bad certificate, ...) arrives only then; without this wait the client
// writes its preface into a closed connection and reports "broken pipe" instead of the
// server's reason. When nothing arrives within serverFirstWait (or the call's deadline) the
// connection is used as it is.
type firstReadCreds struct {
	credentials.TransportCredentials
}

// ClientHandshake runs the TLS handshake, then peeks at the server's first byte.
func (c firstReadCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(serverFirstWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return conn, info, nil
	}
	r := bufio.NewReader(conn)
	_, err = r.Peek(1)
	_ = conn.SetReadDeadline(time.Time{})
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		conn.Close()
		return nil, nil, fmt.Errorf("the server closed the connection after the TLS handshake: %w", err)
	}
	return &peekedConn{Conn: conn, r: r}, info, nil
}

// Clone returns a copy of c.
func (c firstReadCreds) Clone() credentials.TransportCredentials {
	return firstReadCreds{c.TransportCredentials.Clone()}
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads what was read ahead, then from the connection.
func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
