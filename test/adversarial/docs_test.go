package adversarial

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// updateDocs makes TestAdversarialCorpus write its figures into docs/security.md.
var updateDocs = flag.Bool("update-docs", false, "write the corpus figures into docs/security.md")

// securityDoc is the page that quotes the corpus's figures, between the two markers.
const (
	securityDoc   = "../../docs/security.md"
	figuresBegin  = "<!-- adversarial corpus figures: written by TestAdversarialCorpus -update-docs; do not edit by hand -->\n"
	figuresEnd    = "<!-- end of the adversarial corpus figures -->\n"
	figuresHeader = "| | |\n|---|---|\n"
)

// figuresTable is the table of docs/security.md: what the run sent and what it got, counted
// from the cases and the answers. Only figures the corpus fixes are in it (every case's outcome
// is written down and checked), so that the same corpus always gives the same table; the size
// of the largest refused record, which moves by a few bytes with the records' times, is given as
// its bound, which the run checks.
func figuresTable(cases []*corpusCase, got map[string]*result, fig ledgerFigures) string {
	families := map[string]int{}
	for _, cc := range cases {
		families[cc.family]++
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	for _, cc := range cases {
		counts[classify(cc, got[cc.name], seen).label]++
	}
	refused, notRecorded := map[string]int{}, map[string]int{}
	for label, n := range counts {
		switch {
		case label == "issued":
		case strings.HasPrefix(label, "refused:"):
			refused[strings.TrimPrefix(label, "refused:")] = n
		default:
			notRecorded[label] = n
		}
	}
	var b strings.Builder
	b.WriteString(figuresHeader)
	fmt.Fprintf(&b, "| cases | %d (%s) |\n", len(cases), byName(families))
	fmt.Fprintf(&b, "| issued | %d, every one within the invariants |\n", counts["issued"])
	fmt.Fprintf(&b, "| refused, one ledger record each | %d: %s |\n", total(refused), byCount(refused))
	fmt.Fprintf(&b, "| not recorded, as designed | %d: %s |\n", total(notRecorded), byCount(notRecorded))
	fmt.Fprintf(&b, "| ledger records | %d = issued + refused; `signetctl ledger verify` passes |\n", fig.records)
	fmt.Fprintf(&b, "| largest refused record | under %d bytes, whatever the caller sent (170 KiB signer names, UIDs and usernames among it) |\n", maxRefusedLine)
	b.WriteString("| outcome mismatches, invariant violations | 0, 0 |\n")
	return b.String()
}

// checkDocFigures compares docs/security.md's figures with table, or writes them with
// -update-docs.
func checkDocFigures(t *testing.T, table string) {
	t.Helper()
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, figuresBegin), strings.Index(doc, figuresEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the markers of the corpus figures (%q … %q)", securityDoc, figuresBegin, figuresEnd)
	}
	current := doc[begin+len(figuresBegin) : end]
	if current == table {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(securityDoc, []byte(doc[:begin+len(figuresBegin)]+table+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote the corpus figures into %s", securityDoc)
		return
	}
	t.Errorf("%s quotes other figures than this run's; run go test -run TestAdversarialCorpus ./test/adversarial/ -update-docs, or fix the table.\nthe doc:\n%s\nthe run:\n%s",
		securityDoc, current, table)
}

// byName is "name n" for each entry, sorted by name.
func byName(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// byCount is "name n" for each entry, the largest first (then by name).
func byCount(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
