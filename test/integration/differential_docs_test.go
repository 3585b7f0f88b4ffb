package integration

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// differencesDoc is the table of deliberate differences TestDifferential allows.
const differencesDoc = "../../docs/kubernetes-differences.md"

// TestDifferencesDocumented checks the corpus against docs/kubernetes-differences.md: every
// deliberate difference has a row in the table, used by at least one case, and the row's
// last column names exactly the cases that expect it (as `signer/case name`); case names are
// unique per signer; and the corpus size the document states is the corpus's.
func TestDifferencesDocumented(t *testing.T) {
	doc, err := os.ReadFile(differencesDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(string(doc), "## The deliberate differences")
	cases := differentialCases()
	seen := map[string]bool{}
	for _, tc := range cases {
		ref := diffSigners[tc.signer].short + "/" + tc.name
		if seen[ref] {
			t.Errorf("two cases are named %q", ref)
		}
		seen[ref] = true
	}
	backticked := regexp.MustCompile("`([^`]+)`")
	for _, d := range deliberateDifferences {
		var want []string
		for _, tc := range cases {
			if tc.want.deliberate == d {
				want = append(want, diffSigners[tc.signer].short+"/"+tc.name)
			}
		}
		row, ok := rows[d.id]
		switch {
		case len(want) == 0:
			t.Errorf("difference %q: no case expects it", d.id)
		case !ok:
			t.Errorf("difference %q: no row in %s; its cases: %q", d.id, differencesDoc, want)
			continue
		}
		var got []string
		for _, m := range backticked.FindAllStringSubmatch(row[len(row)-1], -1) {
			got = append(got, m[1])
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("difference %q: the row names cases %q, want %q", d.id, got, want)
		}
	}
	if size := corpusSize(cases); !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), size) {
		t.Errorf("%s does not state the corpus size: %q", differencesDoc, size)
	}
}

// tableRows returns the rows of the first Markdown table after heading, by their first cell,
// each as its trimmed cells.
func tableRows(doc, heading string) map[string][]string {
	rows := map[string][]string{}
	_, after, _ := strings.Cut(doc, heading)
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells
	}
	return rows
}

// corpusSize states the corpus size as the document does.
func corpusSize(cases []diffCase) string {
	count := map[string]int{}
	apiserver := 0
	for _, tc := range cases {
		count[tc.signer]++
		if tc.want.apiserver != "" {
			apiserver++
		}
	}
	return fmt.Sprintf("%d cases: %d for kube-apiserver-client, %d for kube-apiserver-client-kubelet, %d for kubelet-serving, "+
		"%d for legacy-unknown, of which %d are refused by the apiserver itself",
		len(cases), count[signerAPIClient], count[signerKubeletClient], count[signerKubeletServing], count[signerLegacyUnknown], apiserver)
}
