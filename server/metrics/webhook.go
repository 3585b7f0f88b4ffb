package metrics

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookMetrics are the signing webhook's own metrics: its answers by HTTP status and how
// long they took. What was decided (issued, refused and why, rate limited) is counted by
// requests_total and refusals_total for both front doors, the webhook's own refusals included;
// these count what only the webhook has, its HTTP answers (a 404 or a 415 too), and never
// count an issuance a second time.
type webhookMetrics struct {
	webhookRequests *prometheus.CounterVec
	webhookDuration *prometheus.HistogramVec
}

// webhookBuckets are latencyBuckets and the longer waits a webhook request can have: its body
// read, an HSM or TPM at its timeout (keys.timeout, 10 s by default), the write timeout (60 s).
var webhookBuckets = append(slices.Clone(latencyBuckets), 5, 10, 30, 60)

func newWebhookMetrics() *webhookMetrics {
	return &webhookMetrics{
		webhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "webhook_requests_total",
			Help: "Requests answered by the signing webhook, by HTTP status code (every answer, 404 and 405 included). " +
				"Decisions are in requests_total and refusals_total, for both front doors.",
		}, []string{"code"}),
		webhookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "webhook_request_duration_seconds",
			Help:    "Time the signing webhook took to answer a request, from its headers to the answer's body, by HTTP status code.",
			Buckets: webhookBuckets,
		}, []string{"code"}),
	}
}

func (w *webhookMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.webhookRequests, w.webhookDuration}
}

// ObserveWebhookRequest counts one answer of the signing webhook with its HTTP status code,
// which took d. The codes are the webhook's own, a bounded set (docs/webhook.md).
func (m *Metrics) ObserveWebhookRequest(code int, d time.Duration) {
	if m == nil {
		return
	}
	c := strconv.Itoa(code)
	m.webhookRequests.WithLabelValues(c).Inc()
	m.webhookDuration.WithLabelValues(c).Observe(d.Seconds())
}
