package main

import (
	"strings"
	"testing"
)

const apiMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="certificates.k8s.io",resource="certificatesigningrequests",scope="cluster",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="certificates.k8s.io",resource="certificatesigningrequests",scope="cluster",subresource="status",verb="PUT",version="v1"} 9
apiserver_request_total{code="409",component="apiserver",dry_run="",group="certificates.k8s.io",resource="certificatesigningrequests",scope="cluster",subresource="status",verb="PUT",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 7
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="POST",le="+Inf"} 3
apiserver_request_duration_seconds_sum{verb="POST"} 1
apiserver_request_duration_seconds_count{verb="POST"} 3
`

func TestParseAPIRequests(t *testing.T) {
	got, err := parseAPIRequests([]byte(apiMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := requestCounts{
		"POST certificatesigningrequests":       10,
		"PUT certificatesigningrequests/status": 10, // codes summed
		"POST events":                           4,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v (non-resource requests left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestRequestCountsPerCertificate(t *testing.T) {
	before := requestCounts{"POST certificatesigningrequests": 100, "GET leases": 50}
	after := requestCounts{"POST certificatesigningrequests": 300, "PUT certificatesigningrequests/status": 200, "POST events": 1, "GET leases": 50}
	d := after.since(before)
	if d.total() != 401 {
		t.Errorf("total = %v, want 401 (leases did not grow)", d.total())
	}
	got := d.perCertificate(200)
	if want := "POST certificatesigningrequests 1.00, PUT certificatesigningrequests/status 1.00"; got != want {
		t.Errorf("perCertificate = %q, want %q (largest first, under 0.01 left out)", got, want)
	}
}

func TestAPIRequestsTable(t *testing.T) {
	burst := workload{label: "burst 100", n: 100}
	results := []result{
		{signer: ceilingSigner, load: burst, signed: 100, requests: requestCounts{"POST certificatesigningrequests": 100, "PUT certificatesigningrequests/approval": 100, "PUT certificatesigningrequests/status": 100}},
		{signer: signetSigner, load: burst, signed: 100, requests: requestCounts{"POST certificatesigningrequests": 100, "PUT certificatesigningrequests/approval": 100, "PUT certificatesigningrequests/status": 100, "POST events": 50}},
	}
	table := apiRequestsTable(results)
	for _, want := range []string{"| burst 100 | " + ceilingSigner.label + " | 3.00 | – |", "| burst 100 | " + signetSigner.label + " | 3.50 | 0.50 | ", "POST events 0.50"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if apiRequestsTable([]result{{signer: kcmFast, load: burst}}) != "" {
		t.Error("a table without counts")
	}
}

func TestParseClusterSigners(t *testing.T) {
	if got, err := parseClusterSigners("ceiling, kcm-qps,signet"); err != nil || strings.Join(got, ",") != "ceiling,kcm-qps,signet" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "kcm,kcm", "signet,kcm-fast"} {
		if _, err := parseClusterSigners(bad); err == nil {
			t.Errorf("parseClusterSigners(%q) accepted", bad)
		}
	}
}
