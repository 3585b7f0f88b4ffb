package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// exposition is the shape of the two processes' /metrics, trimmed: buckets, comments, other
// metrics, a health check and a failed call that the breakdown must leave out.
const exposition = `# HELP signet_watcher_server_rpc_duration_seconds Duration of calls to the signing server.
# TYPE signet_watcher_server_rpc_duration_seconds histogram
signet_watcher_server_rpc_duration_seconds_bucket{code="OK",method="SignCertificateSigningRequest",le="0.001"} 0
signet_watcher_server_rpc_duration_seconds_sum{code="OK",method="SignCertificateSigningRequest"} 0.5
signet_watcher_server_rpc_duration_seconds_count{code="OK",method="SignCertificateSigningRequest"} 100
signet_watcher_server_rpc_duration_seconds_sum{code="OK",method="SignPodCertificateRequest"} 0.1
signet_watcher_server_rpc_duration_seconds_count{code="OK",method="SignPodCertificateRequest"} 50
signet_watcher_server_rpc_duration_seconds_sum{code="OK",method="Check"} 9
signet_watcher_server_rpc_duration_seconds_count{code="OK",method="Check"} 9
signet_watcher_server_rpc_duration_seconds_sum{code="Unavailable",method="SignCertificateSigningRequest"} 7
signet_watcher_server_rpc_duration_seconds_count{code="Unavailable",method="SignCertificateSigningRequest"} 7
# TYPE signet_server_sign_duration_seconds histogram
signet_server_sign_duration_seconds_sum{signer="a"} 0.2
signet_server_sign_duration_seconds_count{signer="a"} 100
signet_server_sign_duration_seconds_sum{signer="b"} 0.1
signet_server_sign_duration_seconds_count{signer="b"} 50
# TYPE signet_server_issuance_duration_seconds histogram
signet_server_issuance_duration_seconds_sum{signer="a"} 0.12
signet_server_issuance_duration_seconds_count{signer="a"} 150
# TYPE signet_server_ledger_append_duration_seconds histogram
signet_server_ledger_append_duration_seconds_sum 0.09
signet_server_ledger_append_duration_seconds_count 150
signet_server_ledger_records_total 150
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds_sum 3
go_gc_duration_seconds_count 3
`

func TestParseSums(t *testing.T) {
	got, err := parseSums(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := sums{
		metricRPC:      {0.6, 150}, // the two signing methods that returned OK
		metricHandler:  {0.3, 150}, // both signers
		metricIssuance: {0.12, 150},
		metricLedger:   {0.09, 150},
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d histograms, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if g := got[name]; math.Abs(g.sum-w.sum) > 1e-9 || g.count != w.count {
			t.Errorf("%s: sum %v count %v, want %v and %v", name, g.sum, g.count, w.sum, w.count)
		}
	}
	if _, err := parseSums(strings.NewReader("# TYPE signet_server_sign_duration_seconds histogram\n" +
		"signet_server_sign_duration_seconds_sum{signer=\"a\"} x\n")); err == nil {
		t.Error("a value that is not a number: no error")
	}
}

func TestBreakdownOf(t *testing.T) {
	before := sums{metricRPC: {1, 100}, metricHandler: {0.5, 100}, metricIssuance: {0.2, 100}, metricLedger: {0.1, 100}}
	after := sums{metricRPC: {1.3, 200}, metricHandler: {0.7, 200}, metricIssuance: {0.29, 200}, metricLedger: {0.16, 200}}
	b := breakdownOf(before, after)
	if b.calls == 0 {
		t.Fatal("100 calls between the scrapes: no breakdown")
	}
	want := breakdown{calls: 100, rpc: 0.003, handler: 0.002, issuance: 0.0009, ledger: 0.0006}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"calls", b.calls, want.calls}, {"rpc", b.rpc, want.rpc}, {"handler", b.handler, want.handler},
		{"issuance", b.issuance, want.issuance}, {"ledger", b.ledger, want.ledger}} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s, want := b.String(), "watcher → server 3.00 ms = server 2.00 (issuance 0.90, ledger 0.60, rest 0.50) + transport and waiting 1.00"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
	if b := breakdownOf(after, after); b.calls != 0 {
		t.Error("no call between the scrapes: want no breakdown")
	}
	before[metricCheckpointLag], after[metricCheckpointLag] = sumCount{1, 10}, sumCount{3.62, 20}
	if s, want := breakdownOf(before, after).String(), "; 10 signed checkpoints, the oldest record of each waited 262.00 ms on average for it"; !strings.HasSuffix(s, want) {
		t.Errorf("String() = %q, want it to end with %q", s, want)
	}
}

func TestScrapeSums(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# TYPE signet_server_sign_duration_seconds histogram\n" +
			"signet_server_sign_duration_seconds_sum 0.5\nsignet_server_sign_duration_seconds_count 10\n"))
	}))
	defer server.Close()
	watcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# TYPE signet_watcher_server_rpc_duration_seconds histogram\n" +
			`signet_watcher_server_rpc_duration_seconds_sum{code="OK",method="SignCertificateSigningRequest"} 0.8` + "\n" +
			`signet_watcher_server_rpc_duration_seconds_count{code="OK",method="SignCertificateSigningRequest"} 10` + "\n"))
	}))
	defer watcher.Close()
	got, err := scrapeSums(context.Background(), []string{server.URL, watcher.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got[metricHandler] != (sumCount{0.5, 10}) || got[metricRPC] != (sumCount{0.8, 10}) {
		t.Errorf("merged scrapes = %v", got)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	if _, err := scrapeSums(context.Background(), []string{gone.URL}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 from /metrics: err = %v, want one naming the status", err)
	}
}
