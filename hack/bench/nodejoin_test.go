package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// joins makes samples of the given totals (ms), each with beforeCSR a tenth of it and, when
// tpm, a twentieth of it in 19 TPM commands.
func joins(tpm bool, totals ...float64) []joinSample {
	out := make([]joinSample, len(totals))
	for i, v := range totals {
		out[i] = joinSample{total: msd(v), beforeCSR: msd(v / 10)}
		if tpm {
			out[i].tpm, out[i].tpmCalls = msd(v/20), 19
		}
	}
	return out
}

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 200)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond // 200 down to 1 ms: unsorted
	}
	// Nearest rank: p50 the 100th, p90 the 180th, p99 the 198th.
	if got, want := percentiles(ds), [4]time.Duration{100 * time.Millisecond, 180 * time.Millisecond, 198 * time.Millisecond, 200 * time.Millisecond}; got != want {
		t.Errorf("percentiles = %v, want %v", got, want)
	}
	if ds[0] != 200*time.Millisecond {
		t.Error("percentiles reordered its argument")
	}
	if got := percentiles(nil); got != ([4]time.Duration{}) {
		t.Errorf("percentiles(nil) = %v", got)
	}
	for n, want := range map[int]int{1: 1, 30: 1, 60: 2, 100: 2, 200: 3} {
		if got := p99FromTop(n); got != want {
			t.Errorf("p99FromTop(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestNodeJoinTable(t *testing.T) {
	run := nodeJoinRun{kubeVersion: "v1.37.1", jitter: 500 * time.Millisecond, elapsed: 3 * time.Minute, busy: 0.05,
		binaries: "Signet's binaries: test.\n"}
	run.samples[joinPlain] = joins(false, 20, 30, 25, 40)
	run.samples[joinAttested] = joins(true, 50, 40, 45, 100)
	run.warmUp[joinPlain] = joinSample{total: msd(60)}
	run.warmUp[joinAttested] = joinSample{total: msd(70), beforeCSR: msd(30)}
	got := nodeJoinTable(run)
	for _, want := range []string{
		"4 rounds, each one join of each kind",
		"[0, 500ms)",
		// Nearest rank over 4: p50 the 2nd, p90 and p99 the 4th.
		"| plain bootstrap-token join | 4 | 25.0 | 40.0 | 40.0 | 40.0 |\n",
		"| TPM-attested join (node agent, swtpm) | 4 | 45.0 | 100 | 100 | 100 |\n",
		"| **attested − plain** | | **+20.0** | **+60.0** | **+60.0** | **+60.0** |\n",
		// Round by round: 50/20, 40/30, 45/25, 100/40.
		"attested / plain median 2.15×, range 1.33–2.50×",
		"| start → CSR create sent | plain: key, request, client | 2.50 | 4.00 | 4.00 | 4.00 |\n",
		"| of which in TPM commands | attested (19 commands a join, one unix-socket connection each) | 2.25 | 5.00 | 5.00 | 5.00 |\n",
		"| CSR create sent → certificate | attested: Signet's approver (the server verifies the evidence), approval, signing, the watch | 40.5 | 90.0 | 90.0 | 90.0 |\n",
		"Warm-up joins (not in the tables): plain 60.0 ms; attested 70.0 ms",
		"Attested p99 100 ms − plain p99 40.0 ms = +60.0 ms: meets, with 4.0 % of the allowance used.",
		"the allowance leaves it 1440 ms more at p99",
		"p99 by nearest rank is the slowest join of each",
		"Signet's binaries: test.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}

func TestNodeJoinVerdict(t *testing.T) {
	p := func(v float64) [4]time.Duration { return [4]time.Duration{msd(v), msd(v), msd(v), msd(v)} }
	for _, tt := range []struct {
		plain, attested float64
		want, not       string
	}{
		{plain: 500, attested: 2100, want: "= +1600 ms: MISSES, by 100 ms.", not: "allowance leaves"},
		{plain: 500, attested: 2000, want: "= +1500 ms: meets, with 100.0 % of the allowance used."},
		{plain: 100, attested: 80, want: "= −20.0 ms: meets; the attested joins' p99 is no higher than the plain ones'.", not: "%!"},
	} {
		got := nodeJoinVerdict(p(tt.plain), p(tt.attested), p(10), 200)
		if !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
			t.Errorf("plain %v, attested %v: %q", tt.plain, tt.attested, got)
		}
		if strings.Contains(got, "nearest rank") {
			t.Errorf("200 joins: %q warns about the rank", got)
		}
	}
}

func TestCSRMark(t *testing.T) {
	var sent []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.Method+" "+r.URL.Path)
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	m := &csrMark{}
	rt := m.wrap(base)
	start := time.Now()
	do := func(method, path string) {
		req, err := http.NewRequest(method, "https://127.0.0.1:6443"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	do(http.MethodGet, "/apis/certificates.k8s.io/v1/certificatesigningrequests")
	if m.since(start) != 0 {
		t.Fatal("a GET was taken for the create call")
	}
	do(http.MethodPost, "/apis/certificates.k8s.io/v1/certificatesigningrequests")
	first := m.since(start)
	if first <= 0 {
		t.Fatal("the create call was not recorded")
	}
	time.Sleep(2 * time.Millisecond)
	do(http.MethodPost, "/apis/certificates.k8s.io/v1/certificatesigningrequests")
	if m.since(start) != first {
		t.Error("a second create call moved the mark")
	}
	if len(sent) != 3 {
		t.Errorf("the wrapped transport saw %v", sent)
	}
}

type fakeTPM struct{ err error }

func (f fakeTPM) Send(cmd []byte) ([]byte, error) {
	time.Sleep(time.Millisecond)
	return cmd, f.err
}

func TestTimedTPM(t *testing.T) {
	tpm := &timedTPM{tpm: fakeTPM{}}
	for range 3 {
		if _, err := tpm.Send([]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	failing := errors.New("TPM gone")
	tpm.tpm = fakeTPM{err: failing}
	if _, err := tpm.Send(nil); !errors.Is(err, failing) {
		t.Errorf("the TPM's error became %v", err)
	}
	if tpm.calls != 4 || tpm.spent < 4*time.Millisecond {
		t.Errorf("%d calls in %s, want 4 in at least 4 ms", tpm.calls, tpm.spent)
	}
}
