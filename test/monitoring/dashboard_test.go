package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboardFile is the Grafana dashboard.
const dashboardFile = repoRoot + "/deploy/monitoring/signet-dashboard.json"

// dataSourceRef is how every panel and query names the data source: the dashboard's
// datasource variable, never a fixed uid.
const dataSourceRef = "${datasource}"

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *dataSource    `json:"datasource"`
	Targets    []target       `json:"targets"`
	Panels     []panel        `json:"panels"` // a collapsed row's
	GridPos    map[string]int `json:"gridPos"`
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *dataSource `json:"datasource"`
}

type dataSource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *dataSource     `json:"datasource"`
}

// query returns a query variable's query: a string, or the query field of an object (the
// Prometheus variable editor's form).
func (v variable) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// panelsOf flattens the rows of ps (a collapsed row holds its panels).
func panelsOf(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, panelsOf(p.Panels)...)
	}
	return out
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// TestDashboardQueries parses every panel query and variable query of the dashboard with
// promql/parser (after Grafana's variables are replaced) and checks that each names only
// exported metrics and labels, through the datasource variable.
func TestDashboardQueries(t *testing.T) {
	d := readDashboard(t)
	s := exported(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: want both", d.Title, d.UID)
	}
	hasDataSourceVar := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			if "${"+v.Name+"}" == dataSourceRef && v.query() == "prometheus" {
				hasDataSourceVar = true
			}
		case "query":
			checkDataSource(t, "variable "+v.Name, v.Datasource)
			for _, p := range checkVariableQuery(s, v.query()) {
				t.Errorf("variable %s: %s", v.Name, p)
			}
		}
	}
	if !hasDataSourceVar {
		t.Errorf("no datasource variable of type prometheus named %s", dataSourceRef)
	}
	ids := map[int]string{}
	for _, p := range panelsOf(d.Panels) {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if other, ok := ids[p.ID]; ok {
			t.Errorf("%s: id used by %q too", where, other)
		}
		ids[p.ID] = p.Title
		if p.GridPos["x"]+p.GridPos["w"] > 24 || p.GridPos["w"] <= 0 || p.GridPos["h"] <= 0 {
			t.Errorf("%s: gridPos %v outside the 24 columns", where, p.GridPos)
		}
		if p.Type == "row" || p.Type == "text" {
			continue
		}
		checkDataSource(t, where, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			if q.Datasource != nil {
				checkDataSource(t, where+" query "+q.RefID, q.Datasource)
			}
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("%s query %s: empty", where, q.RefID)
			}
			for _, problem := range checkExpr(s, expandGrafana(q.Expr)) {
				t.Errorf("%s query %s: %s", where, q.RefID, problem)
			}
		}
	}
}

// checkDataSource fails unless ds is the dashboard's Prometheus datasource variable.
func checkDataSource(t *testing.T, where string, ds *dataSource) {
	t.Helper()
	if ds == nil || ds.UID != dataSourceRef || (ds.Type != "" && ds.Type != "prometheus") {
		t.Errorf("%s: datasource %+v, want {prometheus %s}", where, ds, dataSourceRef)
	}
}

// TestDashboardCoversOperations: the dashboard shows each thing an operator watches (issue
// 22's list), by the metrics that measure it.
func TestDashboardCoversOperations(t *testing.T) {
	used := map[string]bool{}
	for _, p := range panelsOf(readDashboard(t).Panels) {
		for _, q := range p.Targets {
			ast, err := promql.ParseExpr(expandGrafana(q.Expr))
			if err != nil {
				continue // TestDashboardQueries reports it
			}
			parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					used[selectorName(vs)] = true
				}
				return nil
			})
		}
	}
	for what, metrics := range map[string][]string{
		"issuance rate":               {"signet_server_requests_total"},
		"refusals by reason":          {"signet_server_refusals_total"},
		"latency":                     {"signet_server_sign_duration_seconds_bucket", "signet_watcher_issuance_latency_seconds_bucket"},
		"queue depth":                 {"signet_watcher_queue_depth", "signet_watcher_pod_certificate_queue_depth"},
		"oldest pending":              {"signet_watcher_oldest_pending_approved_seconds", "signet_watcher_oldest_pending_pod_certificate_seconds"},
		"CA expiry":                   {"signet_server_ca_certificate_expiry_timestamp_seconds"},
		"server TLS expiry":           {"signet_server_tls_certificate_expiry_timestamp_seconds"},
		"watcher client cert expiry":  {"signet_watcher_client_certificate_expiry_timestamp_seconds"},
		"key availability":            {"signet_server_key_available"},
		"ledger":                      {"signet_server_ledger_records_total"},
		"leader":                      {"signet_watcher_leader"},
		"server unreachable":          {"signet_watcher_server_rpc_errors_total"},
		"trust bundles":               {"signet_watcher_trust_bundle_published_timestamp_seconds", "signet_watcher_trust_bundle_publish_errors_total"},
		"rotation (and forced steps)": {"signet_server_ca_rotation_steps_total", "signet_server_ca_rotation_forced_total"},
		"TLS clients refused":         {"signet_server_tls_client_refused_total"},
		"webhook answers":             {"signet_server_webhook_requests_total"},
	} {
		for _, m := range metrics {
			if !used[m] {
				t.Errorf("the dashboard shows no %s: no panel queries %s", what, m)
			}
		}
	}
}
