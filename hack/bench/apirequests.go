package main

// The API server's requests during a -cluster scenario, by verb and resource, from
// kube-apiserver's own apiserver_request_total: what each signer costs the control plane per
// certificate, beyond the load generator's share (which the ceiling's row shows alone).

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// requestCounts are API server requests by "VERB resource[/subresource]".
type requestCounts map[string]float64

// scrapeAPIRequests reads apiserver_request_total from the API server's /metrics and sums it
// by verb, resource and subresource (over codes, groups, versions, scopes). Requests to
// non-resource paths (/metrics itself, /healthz) are left out.
func scrapeAPIRequests(ctx context.Context, kube kubernetes.Interface) (requestCounts, error) {
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-apiserver /metrics: %w", err)
	}
	return parseAPIRequests(body)
}

// parseAPIRequests sums apiserver_request_total in a Prometheus text exposition by verb,
// resource and subresource.
func parseAPIRequests(body []byte) (requestCounts, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing kube-apiserver /metrics: %w", err)
	}
	out := requestCounts{}
	family, ok := families["apiserver_request_total"]
	if !ok {
		return out, nil
	}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["resource"] == "" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// since is c minus the earlier counts before, without the entries that did not grow.
func (c requestCounts) since(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total is the sum of all counts.
func (c requestCounts) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// perCertificate renders the counts divided by n, largest first, leaving out those under
// 0.01 per certificate (the API server's own background requests over a run).
func (c requestCounts) perCertificate(n int) string {
	if n == 0 || len(c) == 0 {
		return "–"
	}
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		if per := c[k] / float64(n); per >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per))
		}
	}
	return strings.Join(parts, ", ")
}

// apiRequestsTable renders, for every result with counts, the API server's requests per
// certificate in its timed run: in all, beyond the ceiling's in the same workload (the load
// generator's creates, approvals and watch, and the status write the ceiling makes itself),
// and by verb and resource.
func apiRequestsTable(results []result) string {
	var sb strings.Builder
	ceiling := map[string]float64{}
	for _, r := range results {
		if r.signer.kind == "ceiling" && r.signed > 0 && r.requests != nil {
			ceiling[r.load.label] = r.requests.total() / float64(r.signed)
		}
	}
	for _, r := range results {
		if r.requests == nil || r.signed == 0 {
			continue
		}
		if sb.Len() == 0 {
			sb.WriteString("\nAPI server requests per certificate over each timed run (kube-apiserver's apiserver_request_total, by verb and resource; " +
				"the ceiling's row is the load generator's own: create, approve, its watch, and the certificate it writes itself):\n\n" +
				"| workload | signer | requests per certificate | beyond the ceiling | by verb and resource |\n|---|---|---|---|---|\n")
		}
		per := r.requests.total() / float64(r.signed)
		beyond := "–"
		if c, ok := ceiling[r.load.label]; ok && r.signer.kind != "ceiling" {
			beyond = fmt.Sprintf("%.2f", per-c)
		}
		fmt.Fprintf(&sb, "| %s | %s | %.2f | %s | %s |\n", r.load.label, r.signer.label, per, beyond, r.requests.perCertificate(r.signed))
	}
	return sb.String()
}
