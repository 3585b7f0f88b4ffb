package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/monitoring/prometheusrule.yaml from signet-rules.yaml")

const (
	// repoRoot is the repository, from this package's folder.
	repoRoot = "../.."
	// rulesFile is the plain rules file, the source of the PrometheusRule.
	rulesFile = repoRoot + "/deploy/monitoring/signet-rules.yaml"
	// prometheusRuleFile holds the same groups as a PrometheusRule.
	prometheusRuleFile = repoRoot + "/deploy/monitoring/prometheusrule.yaml"
	// runbookPrefix starts every runbook_url: the repository's files on its forge.
	runbookPrefix = "https://github.com/signet-pki/signet/blob/main/"
)

// severities are the values of an alert's severity label.
var severities = []string{"critical", "warning", "info"}

// parseRules parses a rules file's content with Prometheus' own parser and validation
// (expressions, durations, label names, annotation templates).
func parseRules(t *testing.T, what string, content []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, promql, nil)
	for _, err := range errs {
		t.Errorf("%s: %v", what, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule groups", what)
	}
	return groups
}

// prometheusRule is the part of a PrometheusRule the test reads.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// readPrometheusRule parses the PrometheusRule and its spec as a rules file.
func readPrometheusRule(t *testing.T) (*prometheusRule, *rulefmt.RuleGroups) {
	t.Helper()
	data, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", prometheusRuleFile, err)
	}
	// The spec is JSON now, which YAML parsers read as it is.
	return &pr, parseRules(t, prometheusRuleFile+" spec", pr.Spec)
}

func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	plain, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		writePrometheusRule(t, plain)
	}
	want := parseRules(t, rulesFile, plain)
	pr, got := readPrometheusRule(t)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("%s is %s %s named %q, want a monitoring.coreos.com/v1 PrometheusRule with a name",
			prometheusRuleFile, pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s and %s hold different groups; edit the rules file and run\n"+
			"  go test ./test/monitoring -run TestPrometheusRuleMatchesRulesFile -update", prometheusRuleFile, rulesFile)
	}
}

// writePrometheusRule rewrites the PrometheusRule's spec from the rules file: it keeps the
// PrometheusRule's lines up to "spec:" (its header, metadata and labels, which operators
// adapt) and puts the rules file's groups, indented, under spec.
func writePrometheusRule(t *testing.T, plain []byte) {
	t.Helper()
	old, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := bytes.Cut(old, []byte("\nspec:\n"))
	if !ok {
		t.Fatalf("%s has no top-level spec: line to write under", prometheusRuleFile)
	}
	i := bytes.Index(plain, []byte("\ngroups:"))
	if i < 0 {
		t.Fatalf("%s has no top-level groups: line", rulesFile)
	}
	var out bytes.Buffer
	out.Write(head)
	out.WriteString("\nspec:\n")
	for line := range strings.SplitAfterSeq(string(plain[i+1:]), "\n") {
		if strings.TrimSpace(line) != "" {
			out.WriteString("  ")
		}
		out.WriteString(line)
	}
	if err := os.WriteFile(prometheusRuleFile, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAlertRules checks every rule of the rules file: an alert (no recording rules), a unique
// name, a severity, a summary, a description and a runbook_url into a heading of the
// repository's docs, and an expression whose every metric and matched label is exported.
func TestAlertRules(t *testing.T) {
	plain, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	s := exported(t)
	seen := map[string]bool{}
	for _, g := range parseRules(t, rulesFile, plain).Groups {
		if len(g.Rules) == 0 {
			t.Errorf("group %s has no rules", g.Name)
		}
		for _, r := range g.Rules {
			where := g.Name + "/" + r.Alert
			if r.Alert == "" {
				t.Errorf("group %s: recording rule %q; only alerts belong here", g.Name, r.Record)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("%s: alert name used twice", where)
			}
			seen[r.Alert] = true
			if !strings.HasPrefix(r.Alert, "Signet") {
				t.Errorf("%s: alert names start with Signet", where)
			}
			if sev := r.Labels["severity"]; !slices.Contains(severities, sev) {
				t.Errorf("%s: severity %q, want one of %v", where, sev, severities)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			if err := checkRunbook(r.Annotations["runbook_url"]); err != "" {
				t.Errorf("%s: %s", where, err)
			}
			for _, p := range checkExpr(s, r.Expr) {
				t.Errorf("%s: %s", where, p)
			}
		}
	}
}

// checkRunbook returns why url is not a link to a heading of a file of this repository, ""
// when it is.
func checkRunbook(url string) string {
	path, ok := strings.CutPrefix(url, runbookPrefix)
	if !ok {
		return "runbook_url " + url + " does not start with " + runbookPrefix
	}
	file, anchor, _ := strings.Cut(path, "#")
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(file)))
	if err != nil {
		return "runbook_url " + url + ": " + err.Error()
	}
	if anchor != "" && !slices.Contains(headingAnchors(string(data)), anchor) {
		return "runbook_url " + url + ": " + file + " has no heading #" + anchor + "; headings: " + strings.Join(headingAnchors(string(data)), ", ")
	}
	return ""
}

// headingAnchors returns the anchors a forge gives the Markdown headings of doc (outside
// fenced code): lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(doc string) []string {
	var out []string
	fenced := false
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		heading, ok := strings.CutPrefix(line, "#")
		if fenced || !ok {
			continue
		}
		heading = strings.TrimSpace(strings.TrimLeft(heading, "#"))
		out = append(out, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, heading))
	}
	return out
}

func TestHeadingAnchors(t *testing.T) {
	doc := "# Operating Signet\n\n## 5. Failure modes and what you see\n```sh\n# a comment\n```\n### Rotating a signer's CA\n#not-a-heading-without-space\n"
	got := headingAnchors(doc)
	want := []string{"operating-signet", "5-failure-modes-and-what-you-see", "rotating-a-signers-ca", "not-a-heading-without-space"}
	if !slices.Equal(got, want) {
		t.Errorf("headingAnchors = %q, want %q", got, want)
	}
}

// inhibitAlert matches an alert name in the README's Alertmanager example.
var inhibitAlert = regexp.MustCompile(`\bSignet[A-Za-z]+\b`)

// TestReadmeNamesRealAlerts: every alert the folder's README names exists.
func TestReadmeNamesRealAlerts(t *testing.T) {
	readme, err := os.ReadFile(repoRoot + "/deploy/monitoring/README.md")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range parseRules(t, rulesFile, plain).Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
		}
	}
	for _, name := range inhibitAlert.FindAllString(string(readme), -1) {
		if !alerts[name] {
			t.Errorf("README.md names %s, which is not an alert of %s", name, rulesFile)
		}
	}
	for name := range alerts {
		if !strings.Contains(string(readme), name) {
			t.Errorf("README.md does not list the alert %s", name)
		}
	}
}
