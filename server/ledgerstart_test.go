package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/ledger"
)

// TestServerStartIsBoundedByTheWindow writes 20,000 and 200,000 records, all older than the
// idempotency window, into the ledgers of two servers through the ledger API, starts each
// server on its ledger and reads signet_server_ledger_records_read_at_start: the larger history
// must not make the start read more than the smaller one by more than the tree's edge (255
// records). Judged by records read, not by time. Each server then signs.
func TestServerStartIsBoundedByTheWindow(t *testing.T) {
	read := map[int]float64{}
	for _, n := range []int{20_000, 200_000} {
		cfg, dir := devConfig(t)
		l, err := ledger.Open(cfg.Ledger.Dir, ledger.Options{Clock: testclock.NewFakePassiveClock(time.Now().Add(-72 * time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		fillRefusals(t, l, n)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		s, stop := runServer(t, cfg, dir)
		code, body := httpGet(t, s.srv.HTTPAddr(), "/metrics")
		if code != 200 {
			t.Fatalf("/metrics = %d", code)
		}
		read[n] = metricValue(t, body, "signet_server_ledger_records_read_at_start")
		t.Logf("%d records: the start read %.0f", n, read[n])
		if read[n] > 300 {
			t.Errorf("%d records, all outside the window: the start read %.0f records", n, read[n])
		}
		conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
		resp, err := signetv1.NewSignerServiceClient(conn).SignCertificateSigningRequest(callContext(t), signRequest(webCSR(t), fmt.Sprintf("after-%d", n)))
		if err != nil || resp.GetCertificateChainPem() == "" {
			t.Fatalf("signing after a start on %d records: %v", n, err)
		}
		stop()
	}
	if read[200_000] > read[20_000]+255 {
		t.Errorf("the start read %.0f records of 200,000 and %.0f of 20,000: it grows with the history", read[200_000], read[20_000])
	}
}

// fillRefusals appends n refusals for the dev signer to l from 64 goroutines.
func fillRefusals(t *testing.T, l *ledger.Ledger, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				_, err := l.Append(context.Background(), ledger.Record{Decision: ledger.Refused, Signer: devpki.DefaultSigner,
					Client: "spiffe://signet/watcher", ObjectUID: fmt.Sprintf("uid-%06d", i), Reason: "POLICY_VIOLATION", Message: "refused for the test"})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
}

// metricValue returns the value of the unlabelled sample name in a /metrics body.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
