package server_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/ledger"
)

// httpGet returns the status code and body of GET http://addr/path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestNoLedgerRecordNoCertificate: when the ledger stops accepting writes (its file turns
// immutable under the running server), sign calls return Unavailable/LEDGER_UNAVAILABLE with no
// certificate, /readyz turns 503 naming the ledger, the log says why, and the ledger still
// verifies with only the records acknowledged before the fault.
func TestNoLedgerRecordNoCertificate(t *testing.T) {
	t.Parallel()
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Fatalf("chattr (Debian e2fsprogs) is required for this test: %v", err)
	}
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	if code, body := httpGet(t, s.srv.HTTPAddr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q before the fault, want 200", code, body)
	}
	signOne(t, client)

	dir := filepath.Join(s.dir, "ledger")
	segment := filepath.Join(dir, "ledger-000001.jsonl")
	if out, err := exec.Command(chattr, "+i", segment).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(chattr, "-i", segment).Run() })

	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	resp, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, "after-the-fault"))
	wantStatus(t, err, codes.Unavailable, "LEDGER_UNAVAILABLE")
	if resp.GetCertificateChainPem() != "" {
		t.Fatal("a certificate left the server without a ledger record")
	}
	if !strings.Contains(err.Error(), "nothing was issued") {
		t.Errorf("error %q does not say that nothing was issued", err)
	}
	if !s.logs.Contains("is not writable") {
		t.Error("the server log does not say why the ledger failed")
	}
	if code, body := httpGet(t, s.srv.HTTPAddr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "ledger") {
		t.Errorf("/readyz = %d %q after the fault, want 503 naming the ledger", code, body)
	}
	// The gRPC health service follows within a second, so clients fail over.
	health := healthpb.NewHealthClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := health.Check(callContext(t), &healthpb.HealthCheckRequest{Service: "signet.v1.SignerService"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health = %v, %v; want NOT_SERVING while the ledger refuses records", resp.GetStatus(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = exec.Command(chattr, "-i", segment).Run()
	report, err := ledger.Verify(dir)
	if err != nil {
		t.Fatalf("ledger.Verify after the fault: %v", err)
	}
	if report.Records != 1 {
		t.Errorf("ledger holds %d records, want only the 1 acknowledged before the fault", report.Records)
	}
}

// TestIdempotencySurvivesRestart: a server started on the ledger of an earlier one returns the
// certificate already issued for an object and request, and refuses a different request for
// the same object, without issuing anything.
func TestIdempotencySurvivesRestart(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	first, stop := runServer(t, cfg, dir)
	client := signetv1.NewSignerServiceClient(first.dial(t, first.clientTLS(t, first.devClient(t))))
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	issued, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, "restart-uid"))
	if err != nil {
		t.Fatal(err)
	}
	stop()

	second, _ := runServer(t, cfg, dir)
	client = signetv1.NewSignerServiceClient(second.dial(t, second.clientTLS(t, second.devClient(t))))
	again, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, "restart-uid"))
	if err != nil {
		t.Fatalf("the same request after a restart: %v", err)
	}
	if again.GetCertificateChainPem() != issued.GetCertificateChainPem() {
		t.Error("after a restart the same object and request got a different certificate")
	}
	other := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	_, err = client.SignCertificateSigningRequest(callContext(t), signRequest(other, "restart-uid"))
	wantStatus(t, err, codes.FailedPrecondition, "IDEMPOTENCY_CONFLICT")
	report, err := ledger.Verify(cfg.Ledger.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if report.Records != 2 {
		t.Errorf("ledger holds %d records, want 2 (the issuance and the conflict's refusal)", report.Records)
	}
}

// TestMetricsReflectDecisions: /metrics counts issued and refused requests by signer and
// reason, every ledger record, and exposes the CA expiry.
func TestMetricsReflectDecisions(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	signOne(t, client)
	weak := testpki.CSR(t, testpki.Key(t, testpki.RSA1024), nil)
	_, err := client.SignCertificateSigningRequest(callContext(t), signRequest(weak, "weak"))
	wantStatus(t, err, codes.InvalidArgument, "UNSUPPORTED_KEY")

	code, body := httpGet(t, s.srv.HTTPAddr(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`signet_server_requests_total{outcome="issued",signer="signet.dev/dev"} 1`,
		`signet_server_refusals_total{reason="UNSUPPORTED_KEY",signer="signet.dev/dev"} 1`,
		`signet_server_ca_certificate_expiry_timestamp_seconds{signer="signet.dev/dev"}`,
		`signet_server_sign_duration_seconds_count{signer="signet.dev/dev"} 1`,
		// The pipeline's share of it: the refused weak key did not count.
		`signet_server_issuance_duration_seconds_count{signer="signet.dev/dev"} 1`,
		// Both decisions are records: the issuance and the refusal.
		"signet_server_ledger_records_total 2\n",
		"signet_server_ledger_append_duration_seconds_count 2\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := httpGet(t, s.srv.HTTPAddr(), "/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d, want 200", code)
	}
}

// TestLedgerSegmentRemovedOrReplaced: the ledger's segment is removed under the running
// server: the ledger restores it from the file it holds open, and signing goes on with every
// acknowledged record on disk. Another file is then put in its place: the server issues
// nothing, answers Unavailable/LEDGER_RESTART_REQUIRED (retrying it is useless until an
// operator acts; another server may take the request), and /readyz says so.
func TestLedgerSegmentRemovedOrReplaced(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	signOne(t, client)
	dir := filepath.Join(s.dir, "ledger")
	segment := filepath.Join(dir, "ledger-000001.jsonl")

	if err := os.Remove(segment); err != nil {
		t.Fatal(err)
	}
	// Signing goes on; within a check (50 ms under load, a second when idle) the segment is
	// back, with every acknowledged record.
	signOne(t, client)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(segment); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed segment was not restored within 10 s")
		}
	}
	signOne(t, client)
	if !s.logs.Contains("restored it from the open file") {
		t.Error("the server log does not say the segment was restored")
	}
	if rep, err := ledger.Verify(dir); err != nil || rep.Records != 3 {
		t.Fatalf("Verify of the restored ledger: %+v, %v; want the 3 acknowledged records", rep, err)
	}

	older := filepath.Join(t.TempDir(), "older")
	if data, err := os.ReadFile(segment); err != nil || os.WriteFile(older, data, 0o600) != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, segment); err != nil {
		t.Fatal(err)
	}
	// The writer checks the segment at most every 50 ms (and every second when idle): a call
	// in between is recorded in the file the server holds, which it keeps.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		csr := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
		resp, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, "after-replace-"+time.Now().Format(time.RFC3339Nano)))
		if err != nil {
			wantStatus(t, err, codes.Unavailable, "LEDGER_RESTART_REQUIRED")
			if resp.GetCertificateChainPem() != "" {
				t.Fatal("a certificate left the server without a ledger record")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still signing 10 s after the segment was replaced")
		}
	}
	if code, body := httpGet(t, s.srv.HTTPAddr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "restart") {
		t.Errorf("/readyz = %d %q, want 503 saying a restart is needed", code, body)
	}
}
