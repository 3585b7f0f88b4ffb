package watcher

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/metrics"
	"github.com/signet-pki/signet/watcher/witness"
)

// TestGatedSignerBeforeFirstCheck: before the witness's first check the signing calls fail as
// Unavailable (retried, not failed), with reason LEDGER_WITNESS_ALARM, without reaching the
// server.
func TestGatedSignerBeforeFirstCheck(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	w, err := witness.New(fake.NewClientset().CoreV1(), nil, witness.Options{
		Namespace: "signet-system", Name: DefaultWitnessConfigMap, Keys: []crypto.PublicKey{pub}, Period: time.Hour, Pause: pausedStatus})
	if err != nil {
		t.Fatal(err)
	}
	g := gatedSigner{witness: w}
	_, err = g.SignPCR(t.Context(), signerclient.PCR{})
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "has not checked") {
		t.Fatalf("SignPCR before the first check = %v, want Unavailable naming the pending check", err)
	}
	if reason, _, terminal := signerclient.Classify(err); terminal {
		t.Errorf("Classify = %s, terminal; want a retry", reason)
	}
	var found bool
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		found = found || ok && info.GetReason() == "LEDGER_WITNESS_ALARM"
	}
	if !found {
		t.Errorf("details = %v, want reason LEDGER_WITNESS_ALARM", st.Details())
	}
}

// TestWitnessResultsExported: the checks counter is exported at 0 for every result the
// witness records, from witness.Results().
func TestWitnessResultsExported(t *testing.T) {
	m := metrics.New([]string{"example.com/signer"}, nil, nil, nil)
	m.Witness().InitResults(witness.Results())
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, r := range []string{witness.ResultOK, witness.ResultAlarm, witness.ResultError} {
		if want := `signet_watcher_ledger_witness_checks_total{result="` + r + `"} 0`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
