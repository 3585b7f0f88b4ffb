package server_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cryptoki "github.com/miekg/pkcs11"
	"github.com/youmark/pkcs8"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
)

// hardwareServer runs the dev server with its dev signer's CA key created inside a device at
// createURI (algorithm alg) and a root made with it, as an operator does with signetctl keys
// create and ca init. It returns the server, a client of it and the root.
func hardwareServer(t *testing.T, createURI, alg string, modify func(*config.Config)) (*testServer, signetv1.SignerServiceClient, *x509.Certificate) {
	t.Helper()
	key, uri, err := keystore.Generate(context.Background(), createURI, alg, keystore.Options{})
	if err != nil {
		t.Fatalf("creating the CA key: %v", err)
	}
	defer func() {
		if err := key.Close(); err != nil {
			t.Error(err)
		}
	}()
	return serverWithKey(t, uri, key, modify)
}

// serverWithKey runs the dev server with its dev signer's CA key at uri (key, open) and a
// root made with it.
func serverWithKey(t *testing.T, uri string, key crypto.Signer, modify func(*config.Config)) (*testServer, signetv1.SignerServiceClient, *x509.Certificate) {
	t.Helper()
	root, err := cacert.SelfSigned(key, cacert.Options{Subject: pkix.Name{CommonName: "hardware CA"}, Lifetime: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg, dir := devConfig(t)
	certPath := filepath.Join(dir, "hardware-ca.crt")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Signers {
		if cfg.Signers[i].Name == devpki.DefaultSigner {
			cfg.Signers[i].Key, cfg.Signers[i].Certificate = uri, certPath
		}
	}
	if modify != nil {
		modify(cfg)
	}
	s, _ := runServer(t, cfg, dir)
	return s, signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t)))), root
}

// TestEncryptedFileKeyIssues: a signer whose CA key is an encrypted PKCS#8 file, its
// passphrase in a file, issues through the real pipeline.
func TestEncryptedFileKeyIssues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testpki.Key(t, testpki.P384)
	der, err := pkcs8.MarshalPrivateKey(key, []byte("signet passphrase"), nil)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, passPath := filepath.Join(dir, "ca.key"), filepath.Join(dir, "ca.pass")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passPath, []byte("signet passphrase\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, client, root := serverWithKey(t, "file://"+keyPath+"?passphrase-file="+passPath, key, nil)
	if err := issueAndVerify(callContext(t), client, root, "uid-encrypted", webCSR(t)); err != nil {
		t.Fatal(err)
	}
}

// issueAndVerify asks for a certificate for uid and checks that it chains to root.
func issueAndVerify(ctx context.Context, client signetv1.SignerServiceClient, root *x509.Certificate, uid string, csrPEM []byte) error {
	resp, err := client.SignCertificateSigningRequest(ctx, signRequest(csrPEM, uid))
	if err != nil {
		return err
	}
	block, _ := pem.Decode([]byte(resp.GetCertificateChainPem()))
	if block == nil {
		return fmt.Errorf("%s: no certificate in the answer", uid)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.default.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("%s: the certificate does not verify against the hardware CA: %w", uid, err)
	}
	return nil
}

func webCSR(t *testing.T) []byte {
	t.Helper()
	return testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"web.default.svc"}})
}

// TestHardwareKeysIssue: a certificate issued through the server's real pipeline (gRPC,
// mTLS, policy, lint gate, ledger) with the CA key inside SoftHSM2 or swtpm verifies against
// the root made with that key; the signature is counted under the key's backend, and the
// signer reports SERVING under its own health service name.
func TestHardwareKeysIssue(t *testing.T) {
	tok := softhsmtest.New(t) // sets SOFTHSM2_CONF: not parallel
	tpm := swtpmtest.Start(t)
	for _, tc := range []struct {
		name, uri, alg, backend string
	}{
		{"SoftHSM2 P-256", tok.URI("ca-p256"), "P-256", "pkcs11"},
		{"SoftHSM2 RSA-2048", tok.URI("ca-rsa"), "RSA-2048", "pkcs11"},
		{"swtpm P-384 blob", tpm.URI("blob=" + filepath.Join(t.TempDir(), "ca.tpmkey")), "P-384", "tpm"},
		{"swtpm RSA-2048 handle", tpm.URI("handle=0x81000200"), "RSA-2048", "tpm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, client, root := hardwareServer(t, tc.uri, tc.alg, nil)
			ctx := callContext(t)
			if err := issueAndVerify(ctx, client, root, "uid-hw-"+tc.backend, webCSR(t)); err != nil {
				t.Fatal(err)
			}
			_, metrics := httpGet(t, s.srv.HTTPAddr(), "/metrics")
			want := fmt.Sprintf(`signet_server_key_operations_total{backend=%q,outcome="ok",signer=%q}`, tc.backend, devpki.DefaultSigner)
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
			if !strings.Contains(metrics, fmt.Sprintf(`signet_server_key_available{signer=%q} 1`, devpki.DefaultSigner)) {
				t.Error("key_available is not 1")
			}
			health := healthpb.NewHealthClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: signetv1.SignerHealthService(devpki.DefaultSigner)})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("signer health = %v, %v; want SERVING", resp.GetStatus(), err)
			}
		})
	}
}

// recoveryRun issues n certificates with callers concurrent callers, each retrying a
// transient failure as the watcher does; fault runs once, when half of them are issued
// (with the callers paused first if quiesce is set), and is given failed, which reports
// whether a call has failed as unavailable yet (never while the callers are paused). It checks
// that every request ends issued with a certificate that verifies, that the ledger holds
// exactly one issuance per object, and, by wantUnavailable, that the fault failed some calls
// (KEY_UNAVAILABLE answers and ledger records) or none (the key recovered within each call).
func recoveryRun(t *testing.T, s *testServer, client signetv1.SignerServiceClient, root *x509.Certificate, n, callers int, quiesce, wantUnavailable bool, fault func(failed func() bool)) {
	t.Helper()
	csrPEM := webCSR(t)
	var issued, unavailable atomic.Int32
	var pause sync.RWMutex
	var faultOnce sync.Once
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := range next {
				uid := fmt.Sprintf("uid-recovery-%03d", i)
				for attempt := 0; ; attempt++ {
					if quiesce {
						pause.RLock()
					}
					err := issueAndVerify(ctx, client, root, uid, csrPEM)
					if quiesce {
						pause.RUnlock()
					}
					if err == nil {
						break
					}
					if st, _ := status.FromError(err); st.Code() != codes.Unavailable || ctx.Err() != nil {
						errs <- fmt.Errorf("%s: %w", uid, err)
						return
					}
					unavailable.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				if issued.Add(1) == int32(n/2) {
					faultOnce.Do(func() {
						if quiesce {
							pause.Lock()
							defer pause.Unlock()
						}
						fault(func() bool { return unavailable.Load() > 0 })
					})
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := issued.Load(); got != int32(n) {
		t.Fatalf("%d of %d requests ended issued", got, n)
	}
	switch n := unavailable.Load(); {
	case wantUnavailable && n == 0:
		t.Error("no call failed while the device was away: the fault did not happen")
	case !wantUnavailable && n > 0:
		t.Errorf("%d calls failed as unavailable: the key should have recovered within each call", n)
	}
	perObject := map[string]int{}
	refused := 0
	err := ledger.Replay(filepath.Join(s.dir, "ledger"), time.Time{}, func(r ledger.Record) error {
		switch {
		case r.Decision == ledger.Issued:
			perObject[r.ObjectUID]++
		case r.Reason == "KEY_UNAVAILABLE":
			refused++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if uid := fmt.Sprintf("uid-recovery-%03d", i); perObject[uid] != 1 {
			t.Errorf("%s: %d issuance records, want 1", uid, perObject[uid])
		}
	}
	switch {
	case wantUnavailable && refused == 0:
		t.Error("the ledger records no KEY_UNAVAILABLE refusal")
	case !wantUnavailable && refused > 0:
		t.Errorf("the ledger records %d KEY_UNAVAILABLE refusals, want none", refused)
	}
	t.Logf("%d issued, %d calls failed as unavailable and were retried, %d KEY_UNAVAILABLE records", n, unavailable.Load(), refused)
}

// TestRecoveryFromSwtpmRestart: swtpm is killed and restarted in the middle of 200
// issuances with calls in flight; the key is re-opened by itself, no server restart.
func TestRecoveryFromSwtpmRestart(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"blob", "handle"} {
		t.Run(key, func(t *testing.T) {
			tpm := swtpmtest.Start(t)
			uri := tpm.URI("handle=0x81000300")
			if key == "blob" {
				uri = tpm.URI("blob=" + filepath.Join(t.TempDir(), "ca.tpmkey"))
			}
			s, client, root := hardwareServer(t, uri, "P-256", func(c *config.Config) { c.Keys.Timeout.Duration = 2 * time.Second })
			recoveryRun(t, s, client, root, 200, 8, false, true, func(failed func() bool) {
				// swtpm stays down until a call has failed on it (at most 30 s), so that the
				// restart surely strikes calls in flight: restarted at once, it could come
				// back between two of the callers' TPM commands, leaving nothing to recover.
				tpm.RestartAfter(t, func() {
					for deadline := time.Now().Add(30 * time.Second); !failed() && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond)
					}
				})
			})
		})
	}
}

// TestRecoveryFromLostPKCS11Sessions: in the middle of 200 issuances, every session of the
// token is closed from outside (which also logs the user out), and in another run the module
// is finalized from outside. The server finds its key again by itself: after closed sessions
// within the call (a fresh session, no call fails); after a finalized module by re-opening the
// key in the background while calls fail as KEY_UNAVAILABLE and are retried.
//
// Each fault is seen to strike. The closed sessions fail no call, so the test looks at the
// module from outside: the server's sessions are open and logged in before
// C_CloseAllSessions, none is open and the token is logged out after it. The finalized module
// fails calls as KEY_UNAVAILABLE (recoveryRun's wantUnavailable). After either, the server's
// sessions are open and logged in again.
//
// Both faults strike between calls, with the callers paused: SoftHSM's C_CloseAllSessions and
// C_Finalize free the session objects a concurrent C_Sign of another thread is using, which
// crashes the process whatever Signet does (keystore/pkcs11's recovery test has the detail).
// A network HSM's lost sessions fail the call instead; that path is the swtpm restart's.
func TestRecoveryFromLostPKCS11Sessions(t *testing.T) {
	for _, tc := range []struct {
		name            string
		wantUnavailable bool
		fault           func(*testing.T, *cryptoki.Ctx, uint)
	}{
		{"sessions closed", false, func(t *testing.T, c *cryptoki.Ctx, slot uint) {
			before := loggedInSessions(t, c, slot, "before C_CloseAllSessions")
			if err := c.CloseAllSessions(slot); err != nil {
				t.Errorf("C_CloseAllSessions: %v", err)
			}
			after, loggedOut := tokenSessions(c, slot), softhsmtest.LoggedOut(t, c, slot)
			if len(after) > 0 {
				t.Errorf("%d of the %d sessions on the token are still open after C_CloseAllSessions: the fault did not strike", len(after), before)
			}
			if !loggedOut {
				t.Error("the token is still logged in after C_CloseAllSessions: the fault did not strike")
			}
			if before > 0 && len(after) == 0 && loggedOut {
				t.Logf("%d sessions open and logged in before C_CloseAllSessions; none after, and the token logged out", before)
			}
		}},
		{"module finalized", true, func(t *testing.T, c *cryptoki.Ctx, slot uint) {
			loggedInSessions(t, c, slot, "before C_Finalize")
			if err := c.Finalize(); err != nil {
				t.Errorf("C_Finalize: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := softhsmtest.New(t)
			s, client, root := hardwareServer(t, tok.URI("ca"), "P-256", nil)
			recoveryRun(t, s, client, root, 200, 8, true, tc.wantUnavailable, func(func() bool) {
				ctx, slot := tok.Outside(t)
				tc.fault(t, ctx, slot)
			})
			ctx, slot := tok.Outside(t)
			loggedInSessions(t, ctx, slot, "after the run")
		})
	}
}

// maxProbedSession bounds the session handles tokenSessions tries. SoftHSM numbers the
// sessions of a process from 1 and gives a new one the lowest free number, so the sessions of
// one key's pool (at most 8) and a few more are all below it.
const maxProbedSession = 256

// tokenSessions returns the states of the sessions open on slot in this process, by handle,
// as the module tells c (another context on it): PKCS#11 has no call that lists sessions, so
// it asks about each handle up to maxProbedSession.
func tokenSessions(c *cryptoki.Ctx, slot uint) map[cryptoki.SessionHandle]uint {
	open := map[cryptoki.SessionHandle]uint{}
	for h := cryptoki.SessionHandle(1); h <= maxProbedSession; h++ {
		if info, err := c.GetSessionInfo(h); err == nil && info.SlotID == slot {
			open[h] = info.State
		}
	}
	return open
}

// loggedInSessions fails the test (when tells when) unless some session is open on slot, all
// of them logged in as the user, and returns how many are open.
func loggedInSessions(t *testing.T, c *cryptoki.Ctx, slot uint, when string) int {
	t.Helper()
	open := tokenSessions(c, slot)
	if len(open) == 0 {
		t.Errorf("%s: no session is open on the token (the server's key holds none?)", when)
	}
	for h, state := range open {
		if state != cryptoki.CKS_RO_USER_FUNCTIONS && state != cryptoki.CKS_RW_USER_FUNCTIONS {
			t.Errorf("%s: session %d is in state %d, not logged in as the user", when, h, state)
		}
	}
	return len(open)
}

// TestHardwareStartRefusals: the server refuses to start with a hardware key that does not
// match the signer's certificate, or whose object is missing, naming the signer and what is
// wrong, and never showing the PIN.
func TestHardwareStartRefusals(t *testing.T) {
	tok := softhsmtest.New(t)
	key, uri, err := keystore.Generate(context.Background(), tok.URI("ca"), "P-256", keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Close(); err != nil {
		t.Fatal(err)
	}
	other := testpki.CA(t)
	for _, tc := range []struct {
		name, uri string
		want      []string
	}{
		{"certificate of another key", uri, []string{devpki.DefaultSigner, "does not match the CA certificate"}},
		{"missing object", tok.URI("no-such-key"), []string{devpki.DefaultSigner, "object=", "no-such-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, dir := devConfig(t)
			certPath := filepath.Join(dir, "other-ca.crt")
			if err := os.WriteFile(certPath, other.CertPEM(), 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Signers {
				if cfg.Signers[i].Name == devpki.DefaultSigner {
					cfg.Signers[i].Key, cfg.Signers[i].Certificate = tc.uri, certPath
				}
			}
			srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				srv.Close()
				t.Fatal("the server started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tok.PIN) {
				t.Errorf("error %q shows the PIN", err)
			}
		})
	}
}

// TestSignerHealthFollowsTheKey: when the signer's TPM goes away, the next call fails as
// KEY_UNAVAILABLE, the signer's health service turns NOT_SERVING and key_available 0, while
// the server's overall health (and that asked for a signer it does not serve) stays SERVING;
// once the TPM is back the key is re-opened without any call and the signer serves again.
func TestSignerHealthFollowsTheKey(t *testing.T) {
	t.Parallel()
	tpm := swtpmtest.Start(t)
	s, client, root := hardwareServer(t, tpm.URI("blob="+filepath.Join(t.TempDir(), "ca.tpmkey")), "P-256", nil)
	health := healthpb.NewHealthClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	ctx := callContext(t)
	status := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health %s: %v", service, err)
		}
		return resp.GetStatus()
	}
	waitStatus := func(service string, want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for status(service) != want {
			if time.Now().After(deadline) {
				t.Fatalf("health %s is not %s after 15s", service, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	signer := signetv1.SignerHealthService(devpki.DefaultSigner)
	waitStatus(signer, healthpb.HealthCheckResponse_SERVING)

	tpm.Stop()
	_, err := client.SignCertificateSigningRequest(ctx, signRequest(webCSR(t), "uid-tpm-gone"))
	wantStatus(t, err, codes.Unavailable, "KEY_UNAVAILABLE")
	waitStatus(signer, healthpb.HealthCheckResponse_NOT_SERVING)
	if got := status(signetv1.HealthService); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("overall health %s while one signer's key is away, want SERVING", got)
	}
	if got := status(signetv1.SignerHealthService("example.com/not-served")); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health of a signer the server does not serve = %s, want the overall SERVING", got)
	}
	if _, metrics := httpGet(t, s.srv.HTTPAddr(), "/metrics"); !strings.Contains(metrics, fmt.Sprintf(`signet_server_key_available{signer=%q} 0`, devpki.DefaultSigner)) {
		t.Error("key_available is not 0 while the TPM is away")
	}
	if !s.logs.Contains("signer's CA key cannot sign") {
		t.Error("the lost key was not logged")
	}

	tpm.Restart(t)
	waitStatus(signer, healthpb.HealthCheckResponse_SERVING)
	if err := issueAndVerify(ctx, client, root, "uid-tpm-gone", webCSR(t)); err != nil {
		t.Fatalf("after the TPM came back: %v", err)
	}
}
