// Package adversarial is Signet's adversarial corpus (issue 18): requests a compromised
// watcher or a hostile tool holding a valid client certificate would send, straight to a real
// signet-server over mTLS gRPC, each with its outcome written down before the run. After the
// run every issued certificate is checked against the invariants, the server must still be
// healthy, and the ledger must verify and hold exactly one record per decision.
package adversarial

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// minCases is the least the corpus must hold (issue 18).
const minCases = 150

// buildCorpus lists every case, family by family.
func buildCorpus(t *testing.T) []*corpusCase {
	c := newCorpus(t)
	for _, family := range []func(*corpus){
		baselineCases, subjectCases, sanCases, caCases, usageCases, keyCases, lifetimeCases,
		identityCases, idempotencyCases, podCases, wireCases, doorCases, explainCases, floodCases,
	} {
		family(c)
	}
	return c.cases
}

func TestAdversarialCorpus(t *testing.T) {
	e := startEnv(t)
	cases := buildCorpus(t)
	if len(cases) < minCases {
		t.Fatalf("the corpus has %d cases, want at least %d", len(cases), minCases)
	}
	start := time.Now()
	got := runCorpus(t, e, cases)
	k := checker{e: e, start: start, end: time.Now()}
	t.Logf("ran %d cases in %s", len(cases), k.end.Sub(start).Round(time.Millisecond))

	var mismatches, violations []string
	for _, cc := range cases {
		res := got[cc.name]
		why := cc.want.mismatch(res, got)
		if why == "" && cc.check != nil {
			if err := cc.check(res, got); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			mismatches = append(mismatches, fmt.Sprintf("| %s | %s | %s | %s | %s |", cc.name, cc.client, cc.want, res.describe(), why))
		}
		if why := answerControls(res); why != "" {
			violations = append(violations, fmt.Sprintf("%s: %s", cc.name, why))
		}
		if res.err == nil && res.chainPEM != "" {
			for _, v := range k.check(cc, res) {
				violations = append(violations, fmt.Sprintf("%s: %s", cc.name, v))
			}
		}
	}
	violations = append(violations, e.health(t)...)
	lc := readLedger(t, e.ledgerDir)
	ledgerViolations, fig := checkLedger(cases, got, lc)
	violations = append(violations, ledgerViolations...)
	if err := signetctlVerify(t, e.ledgerDir); err != nil {
		violations = append(violations, err.Error())
	}

	t.Log(figures(cases, got, fig, len(violations), len(mismatches)))
	logFamilies(t, cases)
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases did not get their expected outcome:\n| case | client | want | got | why |\n|---|---|---|---|---|\n%s",
			len(mismatches), len(cases), strings.Join(mismatches, "\n"))
	}
	if len(violations) > 0 {
		t.Errorf("%d invariant violations:\n%s", len(violations), strings.Join(violations, "\n"))
	}
	if len(mismatches) == 0 && len(violations) == 0 {
		checkDocFigures(t, figuresTable(cases, got, fig))
	}
}

// answerControls says where an answer's text (a status message, an Explain message or rule
// detail) holds a raw control character, "" if nowhere: refusals quote names safely, so that
// they reach Events, conditions, logs and terminals without escape sequences.
func answerControls(r *result) string {
	texts := []string{status.Convert(r.err).Message()}
	if r.err == nil {
		texts = texts[:0]
	}
	if r.explain != nil {
		texts = append(texts, r.explain.GetMessage())
		for _, rule := range r.explain.GetRules() {
			texts = append(texts, rule.GetRule(), rule.GetDetail())
		}
	}
	for _, s := range texts {
		if strings.ContainsFunc(s, isControl) {
			return "the answer holds a raw control character: " + clip(s, 160)
		}
	}
	return ""
}

// health checks that the server still serves: gRPC health SERVING and /readyz 200.
func (e *env) health(t *testing.T) []string {
	t.Helper()
	var v []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(e.conns[clientWatcher])
	for _, svc := range []string{"", signetv1.SignerService_ServiceDesc.ServiceName} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			v = append(v, fmt.Sprintf("gRPC health of %q after the run: %v %v", svc, resp.GetStatus(), err))
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.httpAddr+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return append(v, fmt.Sprintf("/readyz after the run: %v", err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		v = append(v, fmt.Sprintf("/readyz after the run: %s", resp.Status))
	}
	return v
}

// figures is the one-line summary docs quote, counted from the answers.
func figures(cases []*corpusCase, got map[string]*result, fig ledgerFigures, violations, mismatches int) string {
	counts := map[string]int{}
	seen := map[string]bool{}
	for _, cc := range cases {
		counts[classify(cc, got[cc.name], seen).label]++
	}
	refused, refusedTotal := []string{}, 0
	var notRecorded []string
	notRecordedTotal := 0
	for _, label := range slices.Sorted(maps.Keys(counts)) {
		n := counts[label]
		switch {
		case label == "issued":
		case strings.HasPrefix(label, "refused:"):
			refused = append(refused, fmt.Sprintf("%s %d", strings.TrimPrefix(label, "refused:"), n))
			refusedTotal += n
		default:
			notRecorded = append(notRecorded, fmt.Sprintf("%s %d", label, n))
			notRecordedTotal += n
		}
	}
	return fmt.Sprintf("adversarial corpus: %d cases, %d issued, %d refused (%s), %d not recorded (%s), "+
		"%d ledger records, largest refused record %d bytes, %d outcome mismatches, violations = %d",
		len(cases), counts["issued"], refusedTotal, strings.Join(refused, ", "), notRecordedTotal, strings.Join(notRecorded, ", "),
		fig.records, fig.maxRefusedLine, mismatches, violations)
}

// logFamilies logs how many cases each family has.
func logFamilies(t *testing.T, cases []*corpusCase) {
	t.Helper()
	n := map[string]int{}
	for _, cc := range cases {
		n[cc.family]++
	}
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", f, n[f]))
	}
	t.Logf("cases by family: %s", strings.Join(parts, ", "))
}
