package signerclient_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/signerclient"
)

// syncBuffer is a log sink the server writes to from its handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// versionCSR is an approved CSR for the dev signer that the dev profile issues.
func versionCSR(t *testing.T, uid string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	exp := int32(3600)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-" + uid, UID: types.UID(uid)},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: devpki.DefaultSigner, ExpirationSeconds: &exp, Username: "alice",
			Request: testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}),
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}
}

// TestVersionSkewWithARealServer: a real signet-server of version v0.3.1 and real clients
// reporting their versions. Clients of v0.3.x and v0.2.x (and development builds) are
// accepted: GetServerInfo answers and a CSR is signed. A v0.1.x and a v0.4.0 client are
// refused at their first call, and at every signing call, with FailedPrecondition, the reason
// UNSUPPORTED_CLIENT_VERSION and a message naming both versions and the policy; Classify keeps
// their objects waiting (transient, reason UnsupportedClientVersion), and nothing of theirs is
// recorded. The server logs each refused and each unchecked client once.
//
// Not parallel: it sets the version the in-process server reports (server.Version, read by
// server.New, as signet-server's main sets it), and the package's parallel tests start only
// after it has returned.
func TestVersionSkewWithARealServer(t *testing.T) {
	defer func(v string) { server.Version = v }(server.Version)
	server.Version = "v0.3.1"
	logs := &syncBuffer{}
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	srv := servertest.Start(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	newClient := func(v string) *signerclient.Client {
		t.Helper()
		c, err := signerclient.New(signerclient.Config{Address: srv.Addr, CAFile: filepath.Join(dir, devpki.TLSCACert),
			CertFile: filepath.Join(dir, devpki.ClientCert), KeyFile: filepath.Join(dir, devpki.ClientKey), RPCTimeout: 10 * time.Second,
			Version: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := context.Background()

	for _, v := range []string{"v0.3.1", "v0.3.0", "v0.3.9", "v0.2.0", "v0.2.7-3-gabc1234", "81c084c-dirty", "devel"} {
		c := newClient(v)
		info, err := c.ServerInfo(ctx)
		if err != nil || info.Version != "v0.3.1" {
			t.Errorf("client %s: ServerInfo = %+v, %v; want the server's version v0.3.1", v, info, err)
		}
		if issued, err := c.SignCSR(ctx, versionCSR(t, "accepted-"+v)); err != nil || len(issued.Chain) == 0 {
			t.Errorf("client %s: SignCSR = %v, %v; want a certificate", v, issued, err)
		}
	}

	refused := map[string][]string{
		"v0.1.9": {"signet-server v0.3.1 does not accept clients of version v0.1.9", "v0.3.x or v0.2.x", "upgrade the client"},
		"v0.4.0": {"signet-server v0.3.1 does not accept clients of version v0.4.0, newer than itself", "upgrade the signing servers first"},
		"v1.0.0": {"does not accept clients of version v1.0.0, newer than itself"},
	}
	for v, wantMessage := range refused {
		c := newClient(v)
		_, infoErr := c.ServerInfo(ctx)
		_, signErr := c.SignCSR(ctx, versionCSR(t, "refused-"+v))
		for call, err := range map[string]error{"ServerInfo": infoErr, "SignCSR": signErr} {
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("client %s: %s = %v, want FailedPrecondition", v, call, err)
				continue
			}
			refusal, ok := signerclient.UnsupportedVersion(err)
			if !ok || refusal.ServerVersion != "v0.3.1" || refusal.ClientVersion != v {
				t.Errorf("client %s: %s: UnsupportedVersion = %+v, %v", v, call, refusal, ok)
			}
			for _, w := range wantMessage {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("client %s: %s = %v\n does not say %q", v, call, err, w)
				}
			}
			if reason, _, terminal := signerclient.Classify(err); terminal || reason != "UnsupportedClientVersion" {
				t.Errorf("client %s: %s: Classify = %s, terminal %v; want UnsupportedClientVersion, transient", v, call, reason, terminal)
			}
		}
		if logged := logs.lines(t, "refused a client's version"); !logsVersion(logged, v, 1) {
			t.Errorf("client %s: the server logged %d refusals of it, want one: %v", v, countVersion(logged, v), logged)
		}
	}
	if logged := logs.lines(t, "accepting a client without a version check"); !logsVersion(logged, "81c084c-dirty", 1) || !logsVersion(logged, "devel", 1) ||
		countVersion(logged, "v0.2.0") != 0 {
		t.Errorf("the server's warnings for development clients: %v", logged)
	}

	var uids []string
	if err := ledger.Replay(cfg.Ledger.Dir, time.Time{}, func(r ledger.Record) error {
		uids = append(uids, r.ObjectUID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, uid := range uids {
		if strings.HasPrefix(uid, "refused-") {
			t.Errorf("the ledger records %s, a call refused before any decision", uid)
		}
	}
	if got := strings.Count(strings.Join(uids, " "), "accepted-"); got != 7 {
		t.Errorf("the ledger records %d accepted clients' CSRs, want 7: %q", got, uids)
	}
}

// logsVersion reports whether exactly n of lines name client version v.
func logsVersion(lines []map[string]any, v string, n int) bool { return countVersion(lines, v) == n }

func countVersion(lines []map[string]any, v string) int {
	n := 0
	for _, l := range lines {
		if l["client_version"] == v {
			n++
		}
	}
	return n
}

// TestUnsupportedVersionOfOtherErrors: only the version refusal is one.
func TestUnsupportedVersionOfOtherErrors(t *testing.T) {
	t.Parallel()
	for _, err := range []error{nil, errors.New("not a status"), status.Error(codes.FailedPrecondition, "policy")} {
		if _, ok := signerclient.UnsupportedVersion(err); ok {
			t.Errorf("UnsupportedVersion(%v) is true", err)
		}
	}
}
