package monitoring

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	promqlengine "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// TestServerDownAlerts evaluates SignetServerDown's and SignetServerAbsent's expressions, as the
// rules file has them, with Prometheus' own engine on the up series of two signing servers
// and a watcher, scraped once a minute: signing-1 stops answering at minute 10, signing-2 at
// minute 20, and the watcher's scrape fails all along. Down names each server whose scrape
// fails (never the watcher); Absent fires only once neither server answers, and when the
// signet-server job has no target at all (with no labels: absent() of a comparison has none).
func TestServerDownAlerts(t *testing.T) {
	down, absent := alertExpr(t, "SignetServerDown"), alertExpr(t, "SignetServerAbsent")
	const minutes = 30
	up := func(job, instance string, failsFrom int) storage.Series {
		var samples []chunks.Sample
		for i := range minutes {
			v := 1.0
			if i >= failsFrom {
				v = 0
			}
			samples = append(samples, floatSample{t: int64(i) * time.Minute.Milliseconds(), f: v})
		}
		return storage.NewListSeries(labels.FromStrings(labels.MetricName, "up", "job", job, "instance", instance), samples)
	}
	servers := memSeries{up("signet-server", "signing-1:9464", 10), up("signet-server", "signing-2:9464", 20), up("signet-watcher", "10.0.0.7:9465", 0)}
	watcherOnly := memSeries{up("signet-watcher", "10.0.0.7:9465", minutes)}
	engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 100000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	eval := func(db memSeries, expr string, minute int) []string {
		t.Helper()
		q, err := engine.NewInstantQuery(context.Background(), db, nil, expr, time.UnixMilli(int64(minute)*time.Minute.Milliseconds()))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		defer q.Close()
		vec, err := q.Exec(context.Background()).Vector()
		if err != nil {
			t.Fatalf("%s at minute %d: %v", expr, minute, err)
		}
		var out []string
		for _, s := range vec {
			out = append(out, s.Metric.Get("job")+"/"+s.Metric.Get("instance"))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		db         memSeries
		minute     int
		down, absd []string
	}{
		{servers, 5, nil, nil},
		{servers, 12, []string{"signet-server/signing-1:9464"}, nil},
		{servers, 25, []string{"signet-server/signing-1:9464", "signet-server/signing-2:9464"}, []string{"/"}},
		{watcherOnly, 5, nil, []string{"/"}},
	} {
		if got := eval(c.db, down, c.minute); !slices.Equal(got, c.down) {
			t.Errorf("minute %d: SignetServerDown fires for %v, want %v", c.minute, got, c.down)
		}
		if got := eval(c.db, absent, c.minute); !slices.Equal(got, c.absd) {
			t.Errorf("minute %d: SignetServerAbsent fires for %v, want %v", c.minute, got, c.absd)
		}
	}
}
