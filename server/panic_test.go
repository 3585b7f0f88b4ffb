package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// panicUID is the object whose signing calls the fault makes panic.
const panicUID = "uid-panics"

// panicking panics in a signing call of object panicUID inside the decision core, in the
// object's idempotent claim, before its certificate is signed: a bug in the pipeline.
func panicking(point, objectUID string) {
	if point == decision.FaultSign && objectUID == panicUID {
		panic("injected fault: a bug in the signing pipeline")
	}
}

// TestPanicIsContained: a panic in a signing call (forced through the core's fault seam) is
// contained at each door. gRPC answers INTERNAL with the INTERNAL reason and the generic
// message; the webhook 500 INTERNAL with Retry-After. Each is counted in
// signet_server_panics_total{method} and logged at ERROR with its site, the stack only the
// first time that site panics. The server goes on: other objects are signed, the panicked
// object is signed once the fault is gone (its claim was released), /readyz is 200, and the
// ledger verifies, with the panicked calls recorded as INTERNAL refusals and nothing issued
// for them.
func TestPanicIsContained(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, nil)
	server.SetFault(w.srv, panicking)
	client := signetv1.NewSignerServiceClient(w.dial(t, w.clientTLS(t, w.devClient(t))))
	key := testpki.Key(t, testpki.P256)
	sign := func(uid string) (*signetv1.SignCertificateSigningRequestResponse, error) {
		return client.SignCertificateSigningRequest(callContext(t), signRequest(testpki.CSR(t, key, nil), uid))
	}
	for range 2 {
		_, err := sign(panicUID)
		wantStatus(t, err, codes.Internal, "INTERNAL")
		if !strings.Contains(err.Error(), "internal error") || strings.Contains(err.Error(), "injected fault") {
			t.Errorf("answer %v: want the generic message, not the panic", err)
		}
	}
	if _, err := sign("uid-after-panic"); err != nil {
		t.Fatalf("the server does not sign after a contained panic: %v", err)
	}
	// The webhook door, same fault.
	hc := w.contractClient(t, w.devClient(t))
	resp, body := webhooktest.PostError(t, hc, http.MethodPost, w.url, "application/json",
		bytes.NewReader(webhooktest.JSON(t, csrObject(panicUID, testpki.CSR(t, key, nil)))))
	if resp.StatusCode != http.StatusInternalServerError || body.Error.Status != "INTERNAL" || body.Reason() != "INTERNAL" {
		t.Errorf("webhook answered %d %s %s, want 500 INTERNAL INTERNAL", resp.StatusCode, body.Error.Status, body.Reason())
	}
	server.SetFault(w.srv, nil)
	issued, err := client.SignCertificateSigningRequest(callContext(t), signRequest(testpki.CSR(t, key, nil), panicUID))
	if err != nil {
		t.Fatalf("the object whose calls panicked cannot be signed once the fault is gone: %v", err)
	}

	code, ready := httpGet(t, w.srv.HTTPAddr(), "/readyz")
	if code != http.StatusOK {
		t.Errorf("/readyz %d %q after contained panics", code, ready)
	}
	_, metrics := httpGet(t, w.srv.HTTPAddr(), "/metrics")
	for _, want := range []string{
		`signet_server_panics_total{method="/signet.v1.SignerService/SignCertificateSigningRequest"} 2`,
		`signet_server_panics_total{method="webhook"} 1`,
		`signet_server_panics_total{method="http"} 0`,
		`signet_server_panics_total{method="/signet.v1.LedgerService/FindRecords"} 0`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// One ERROR line per panic, each naming the site; the stack with the first only.
	lines, stacks := 0, 0
	for _, line := range strings.Split(w.logs.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] == nil || !strings.HasPrefix(entry["msg"].(string), "panic contained") {
			continue
		}
		lines++
		if entry["level"] != "ERROR" || !strings.Contains(fmt.Sprint(entry["site"]), "panic_test.go") {
			t.Errorf("panic log line %s: want ERROR naming the site in panic_test.go", line)
		}
		if _, ok := entry["stack"]; ok {
			stacks++
		}
	}
	if lines != 3 || stacks != 1 {
		t.Errorf("%d panic log lines, %d with a stack; want 3, the first with its stack", lines, stacks)
	}
	w.srv.Close()
	rep, err := ledger.Verify(w.ledgerDir)
	if err != nil {
		t.Fatalf("the ledger does not verify after contained panics: %v", err)
	}
	recs := w.records(t)[panicUID]
	var refused, issuedRecs int
	for _, r := range recs {
		switch {
		case r.Decision == ledger.Refused && r.Reason == "INTERNAL":
			refused++
		case r.Decision == ledger.Issued && r.Serial == issued.GetSerialNumber():
			issuedRecs++
		default:
			t.Errorf("unexpected record of the panicked object: %+v", r)
		}
	}
	if refused != 3 || issuedRecs != 1 {
		t.Errorf("the panicked object has %d INTERNAL refusals and %d issuances in the ledger (of %d records); want 3 and 1",
			refused, issuedRecs, rep.Records)
	}
}
