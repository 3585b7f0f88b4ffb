package pcrsigner

import (
	"time"
)

// QueueDepth is the number of PodCertificateRequests waiting in the work queue (not counting
// those waiting out their back-off, nor those being synced).
func (c *Controller) QueueDepth() int { return c.loop.QueueDepth() }

// HasSynced reports whether every informer's cache has synced and delivered its initial
// events. It is false before Run has started them.
func (c *Controller) HasSynced() bool { return c.loop.HasSynced() }

// OldestPending returns, for every served signer name, the age (since creation) of the
// oldest cached PodCertificateRequest still to be signed (no Issued, Denied or Failed
// condition, no chain), or 0 if there is none.
func (c *Controller) OldestPending() map[string]time.Duration {
	return c.loop.OldestPending(func(obj any) (string, time.Duration, bool) {
		r := toRequest(obj)
		if r == nil || skipReason(r, c.loop.Serves) != "" {
			return "", 0, false
		}
		return r.pcr.SignerName, c.age(r), true
	})
}

// event records an Event on r's object (in its namespace) if there is a recorder.
func (c *Controller) event(r *request, eventType, reason, messageFmt string, args ...any) {
	if c.recorder == nil {
		return
	}
	c.recorder.Eventf(r.object, eventType, reason, messageFmt, args...)
}
