package monitoring

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	promqlengine "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// TestClientVersionRefusedAlert evaluates SignetServerClientVersionRefused's expression, as the
// rules file has it, with Prometheus' own engine on series shaped like signet-server's
// signet_server_client_version_refused_total, scraped once a minute:
//
//   - v0.4, a line next to the server's whose series exists at zero from the start: silent
//     until its first refusal (minute 30), then firing until 15 minutes after its last one
//     (minute 31), less a scrape interval;
//   - v0.9, a line whose series appears with its first refusal (minute 40): firing at once,
//     though one refusal is no increase (increase() alone would never fire), for 15 minutes;
//   - v0.1, at zero all along: never firing.
func TestClientVersionRefusedAlert(t *testing.T) {
	expr := alertExpr(t, "SignetServerClientVersionRefused")
	const name = "signet_server_client_version_refused_total"
	const minutes = 70
	series := map[string][]float64{}
	for i := range minutes {
		series["v0.1"] = append(series["v0.1"], 0)
		series["v0.4"] = append(series["v0.4"], float64(min(max(i-29, 0), 2))) // 1 at minute 30, 2 from 31
		if i >= 40 {
			series["v0.9"] = append(series["v0.9"], 1)
		}
	}
	var db memSeries
	for line, values := range series {
		start := minutes - len(values)
		var samples []chunks.Sample
		for i, v := range values {
			samples = append(samples, floatSample{t: int64(start+i) * time.Minute.Milliseconds(), f: v})
		}
		db = append(db, storage.NewListSeries(labels.FromStrings(labels.MetricName, name, "instance", "s1", "client_version", line), samples))
	}
	engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 100000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	for minute, want := range map[int][]string{
		20: nil, 29: nil,
		30: {"v0.4"}, 35: {"v0.4"}, 40: {"v0.4", "v0.9"}, 44: {"v0.4", "v0.9"}, // v0.4's last refusal is scraped at 31
		45: {"v0.9"}, 54: {"v0.9"}, // the window of increase() is left-open: (30m, 45m] misses the sample before 31's
		55: nil, 69: nil,
	} {
		q, err := engine.NewInstantQuery(context.Background(), db, nil, expr, time.UnixMilli(int64(minute)*time.Minute.Milliseconds()))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		res := q.Exec(context.Background())
		vec, err := res.Vector()
		if err != nil {
			t.Fatalf("minute %d: %v", minute, err)
		}
		var firing []string
		for _, s := range vec {
			firing = append(firing, s.Metric.Get("client_version"))
		}
		slices.Sort(firing)
		if !slices.Equal(firing, want) {
			t.Errorf("minute %d: the alert fires for %v, want %v", minute, firing, want)
		}
		q.Close()
	}
}

// alertExpr is the expression of the rules file's alert.
func alertExpr(t *testing.T, alert string) string {
	t.Helper()
	plain, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range parseRules(t, rulesFile, plain).Groups {
		for _, r := range g.Rules {
			if r.Alert == alert {
				return strings.TrimSpace(r.Expr)
			}
		}
	}
	t.Fatalf("%s has no alert %s", rulesFile, alert)
	return ""
}

// memSeries is an in-memory storage.Queryable over a few float series.
type memSeries []storage.Series

func (m memSeries) Querier(int64, int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
		out := &seriesList{}
		for _, s := range m {
			if matchAll(s.Labels(), matchers) {
				out.series = append(out.series, s)
			}
		}
		slices.SortFunc(out.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		return out
	}}, nil
}

// matchAll reports whether lset matches every matcher.
func matchAll(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesList is a storage.SeriesSet over a slice.
type seriesList struct {
	series []storage.Series
	next   int // the index of the series Next moves to
}

func (l *seriesList) Next() bool                      { l.next++; return l.next <= len(l.series) }
func (l *seriesList) At() storage.Series              { return l.series[l.next-1] }
func (*seriesList) Err() error                        { return nil }
func (*seriesList) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }
