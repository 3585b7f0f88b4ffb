package metrics

import (
	"testing"
	"time"
)

// TestObserveWebhookRequest: the webhook's answers are counted by HTTP status code, with
// their duration in a histogram of the same label; nothing exists before the first answer
// (a server without the webhook exports none), and no decision metric moves.
func TestObserveWebhookRequest(t *testing.T) {
	t.Parallel()
	m := newTest(t)
	if n := count(t, m.webhookRequests) + count(t, m.webhookDuration); n != 0 {
		t.Errorf("%d webhook series before any request, want none", n)
	}
	m.ObserveWebhookRequest(200, 20*time.Millisecond)
	m.ObserveWebhookRequest(415, time.Millisecond)
	m.ObserveWebhookRequest(415, 2*time.Millisecond)
	for code, want := range map[string]float64{"200": 1, "415": 2} {
		if got := value(t, m.webhookRequests.WithLabelValues(code)); got != want {
			t.Errorf("webhook_requests_total{code=%q} = %v, want %v", code, got, want)
		}
		h := histogram(t, m.webhookDuration.WithLabelValues(code))
		if float64(h.GetSampleCount()) != want || len(h.GetBucket()) != len(webhookBuckets) {
			t.Errorf("webhook_request_duration_seconds{code=%q}: %d samples in %d buckets, want %v in %d",
				code, h.GetSampleCount(), len(h.GetBucket()), want, len(webhookBuckets))
		}
	}
	if got := value(t, m.requests.WithLabelValues(serving, OutcomeIssued)); got != 0 {
		t.Errorf("an answer of the webhook counted an issuance: %v", got)
	}
	checkLint(t, m)
	var none *Metrics
	none.ObserveWebhookRequest(200, time.Millisecond)
}
