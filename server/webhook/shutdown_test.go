package webhook_test

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// TestWebhookStopsMidHandshake: a server stops at once while webhook clients are in the
// middle of their TLS handshake (one connected and sent nothing, one sent part of a
// ClientHello), rather than after the handshake timeout, and closes their connections.
func TestWebhookStopsMidHandshake(t *testing.T) {
	t.Parallel()
	cfg, _ := servertest.DevConfig(t, devpki.Options{})
	cfg.Webhook = config.Webhook{Address: "127.0.0.1:0", MaxRequestBytes: config.MinWebhookRequestBytes}
	r := servertest.Start(t, cfg, slog.New(slog.DiscardHandler))
	var clients []net.Conn
	for _, first := range [][]byte{nil, {0x16, 0x03, 0x01, 0x02, 0x00, 0x01}} {
		c, err := net.Dial("tcp", r.WebhookAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(first); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	time.Sleep(100 * time.Millisecond) // the server has accepted both
	start := time.Now()
	r.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stopping took %v with clients mid-handshake", d)
	}
	for i, c := range clients {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("client %d: read data, want the connection closed", i)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("client %d: still connected after the server stopped", i)
		}
	}
}
