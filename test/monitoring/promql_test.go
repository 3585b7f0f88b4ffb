package monitoring

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promql parses expressions as Prometheus does by default (no experimental functions).
var promql = parser.NewParser(parser.Options{})

// checkExpr parses expr and returns one problem per vector selector that names no metric, a
// metric s does not export, or a label that metric's series do not carry.
func checkExpr(s series, expr string) []string {
	ast, err := promql.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("parsing %q: %v", expr, err)}
	}
	var problems []string
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selectorName(vs)
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("selector %s names no metric (by a plain name or __name__=\"...\")", vs))
		case !s.has(name):
			problems = append(problems, fmt.Sprintf("metric %s is not exported by signet-server or signet-watcher", name))
		default:
			for _, m := range vs.LabelMatchers {
				if !s.hasLabel(name, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %q (selector %s)", name, m.Name, vs))
				}
			}
		}
		return nil
	})
	return problems
}

// selectorName is the metric a selector names: its name, or an equality matcher on __name__.
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// grafanaVariable matches a Grafana variable in a query: $name, ${name} or ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// expandGrafana replaces Grafana's variables in a dashboard query by values PromQL parses:
// the interval variables ($__rate_interval, $__interval, $__range, ...) by a duration, the
// dashboard's own variables by a label value.
func expandGrafana(query string) string {
	return grafanaVariable.ReplaceAllStringFunc(query, func(v string) string {
		if strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(v, "$"), "{"), "__") {
			return "5m"
		}
		return "value"
	})
}

// labelValuesQuery matches a Grafana label_values(selector, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^\s*label_values\(\s*(.+)\s*,\s*(\w+)\s*\)\s*$`)

// checkVariableQuery checks a Grafana Prometheus variable query: label_values(selector,
// label), whose selector must name an exported metric carrying label, or a PromQL expression
// (query_result).
func checkVariableQuery(s series, query string) []string {
	query = expandGrafana(query)
	m := labelValuesQuery.FindStringSubmatch(query)
	if m == nil {
		if strings.HasPrefix(strings.TrimSpace(query), "query_result(") {
			query = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(query), "query_result("), ")")
		}
		return checkExpr(s, query)
	}
	problems := checkExpr(s, m[1])
	if len(problems) == 0 {
		if vs, ok := mustParse(m[1]).(*parser.VectorSelector); !ok {
			problems = append(problems, fmt.Sprintf("label_values over %q, not a series selector", m[1]))
		} else if name := selectorName(vs); !s.hasLabel(name, m[2]) {
			problems = append(problems, fmt.Sprintf("label_values(%s, %s): %s has no label %s", m[1], m[2], name, m[2]))
		}
	}
	return problems
}

// mustParse parses an expression already checked by checkExpr.
func mustParse(expr string) parser.Expr {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		panic(err)
	}
	return e
}
