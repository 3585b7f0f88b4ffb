package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The histograms a Signet run is broken down by: the watcher's calls to the server, and
// inside the server the signing handler, the issuance pipeline and the ledger append.
const (
	metricRPC      = "signet_watcher_server_rpc_duration_seconds"
	metricHandler  = "signet_server_sign_duration_seconds"
	metricIssuance = "signet_server_issuance_duration_seconds"
	metricLedger   = "signet_server_ledger_append_duration_seconds"
	// metricCheckpointLag is the time from a record's acknowledgement to the first signed
	// checkpoint that covers it (the oldest record of each checkpoint).
	metricCheckpointLag = "signet_server_ledger_checkpoint_lag_seconds"
)

// sumCount is a histogram's _sum and _count, added over the series a scrape keeps.
type sumCount struct{ sum, count float64 }

// sums maps a histogram's name to its sumCount.
type sums map[string]sumCount

// keepSeries reports whether a series of histogram name counts: of the watcher's calls, only
// the signing methods that returned OK (not health checks, not failures); of the server's
// histograms, every series.
func keepSeries(name string, m *dto.Metric) bool {
	if name != metricRPC {
		return true
	}
	var code, method string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "code":
			code = l.GetValue()
		case "method":
			method = l.GetValue()
		}
	}
	return code == "OK" && strings.HasPrefix(method, "Sign")
}

// parseSums reads the _sum and _count of the breakdown's histograms from r, a Prometheus text
// exposition, adding up the series keepSeries keeps.
func parseSums(r io.Reader) (sums, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := sums{}
	for _, name := range []string{metricRPC, metricHandler, metricIssuance, metricLedger, metricCheckpointLag} {
		for _, m := range families[name].GetMetric() {
			if h := m.GetHistogram(); h != nil && keepSeries(name, m) {
				sc := out[name]
				sc.sum += h.GetSampleSum()
				sc.count += float64(h.GetSampleCount())
				out[name] = sc
			}
		}
	}
	return out, nil
}

// scrapeSums fetches each /metrics URL and merges what parseSums finds (the server and the
// watcher export different histograms).
func scrapeSums(ctx context.Context, urls []string) (sums, error) {
	out := sums{}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %w", u, err)
		}
		var s sums
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		} else {
			s, err = parseSums(resp.Body)
		}
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %w", u, err)
		}
		for k, v := range s {
			out[k] = v
		}
	}
	return out, nil
}

// breakdown is where Signet's time per object went in one timed run: the means of the
// watcher's signing calls and of the server's handler, issuance pipeline and ledger append,
// in seconds, over the calls made during the run.
type breakdown struct {
	calls                          float64
	rpc, handler, issuance, ledger float64
	// checkpoints signed during the run and their mean lag (see metricCheckpointLag).
	checkpoints, checkpointLag float64
}

// breakdownOf is the breakdown of the calls made between two scrapes (with calls 0 if no
// signing call was observed in between).
func breakdownOf(before, after sums) breakdown {
	mean := func(name string) float64 {
		n := after[name].count - before[name].count
		if n <= 0 {
			return 0
		}
		return (after[name].sum - before[name].sum) / n
	}
	return breakdown{
		calls:    after[metricRPC].count - before[metricRPC].count,
		rpc:      mean(metricRPC),
		handler:  mean(metricHandler),
		issuance: mean(metricIssuance),
		ledger:   mean(metricLedger),

		checkpoints:   after[metricCheckpointLag].count - before[metricCheckpointLag].count,
		checkpointLag: mean(metricCheckpointLag),
	}
}

// String reads as "watcher → server 2.91 ms = server 1.90 (issuance 0.88, ledger 0.62, rest
// 0.40) + transport and waiting 1.01; 12 checkpoints, a record waited 262 ms for one".
func (b breakdown) String() string {
	ms := func(s float64) string { return strconv.FormatFloat(1000*s, 'f', 2, 64) }
	out := fmt.Sprintf("watcher → server %s ms = server %s (issuance %s, ledger %s, rest %s) + transport and waiting %s",
		ms(b.rpc), ms(b.handler), ms(b.issuance), ms(b.ledger), ms(b.handler-b.issuance-b.ledger), ms(b.rpc-b.handler))
	if b.checkpoints > 0 {
		out += fmt.Sprintf("; %.0f signed checkpoints, the oldest record of each waited %s ms on average for it", b.checkpoints, ms(b.checkpointLag))
	}
	return out
}
