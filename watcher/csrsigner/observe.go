package csrsigner

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
)

// QueueDepth is the number of CSRs waiting in the work queue (not counting those waiting out
// their back-off, nor those being synced).
func (c *Controller) QueueDepth() int { return c.loop.QueueDepth() }

// HasSynced reports whether every informer's cache has synced and delivered its initial
// events. It is false before Run has started them.
func (c *Controller) HasSynced() bool { return c.loop.HasSynced() }

// OldestPending returns, for every served signer name, the time since approval of the
// oldest CSR in the cache that is to be signed (approved, not denied or failed, no
// certificate), or 0 if there is none.
func (c *Controller) OldestPending() map[string]time.Duration {
	return c.loop.OldestPending(func(obj any) (string, time.Duration, bool) {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok || skipReason(csr, c.loop.Serves) != "" {
			return "", 0, false
		}
		return csr.Spec.SignerName, c.sinceApproval(csr), true
	})
}

// sinceApproval is the time since csr was approved (see approvalTime), or 0 if the object
// carries no time at all. It is the approval's age, the same across restarts: the give-up
// deadline and the oldest-pending gauge use it, not the issuance latency (see
// issuanceStart).
func (c *Controller) sinceApproval(csr *certificatesv1.CertificateSigningRequest) time.Duration {
	return c.since(approvalTime(csr))
}

// since is the clock's time since t, or 0 for the zero time.
func (c *Controller) since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return c.clock.Since(t)
}

// issuanceStart is when csr's issuance latency starts: see latencyStart, with the time the
// informers first delivered it approved (c.seen), if recorded.
func (c *Controller) issuanceStart(csr *certificatesv1.CertificateSigningRequest) time.Time {
	c.seenMu.Lock()
	seen := c.seen[csr.UID]
	c.seenMu.Unlock()
	return latencyStart(approvalTime(csr), seen)
}

// latencyStart returns when the issuance latency of a CSR starts, from approved, its
// approval time (see approvalTime), and seen, when the watcher first saw it approved (zero if
// it has no record):
//   - seen, if it is at most one second after approved: the API server stores the condition's
//     time in whole seconds, so the approval happened in [approved, approved+1s) and seen,
//     later than the approval only by the watch's delivery, is much closer to it;
//   - approved otherwise: the watcher saw the approval late (it was down, not the leader, or
//     started after it) or has no record of seeing it (a restart), and the condition's time,
//     truncated, is the better bound; also when approved is zero (an object without any
//     time, which an API server never stores), which reports a latency of 0.
//
// A watcher clock ahead of the API server's by more than a second makes every sighting look
// late, which gives the condition's time again; seen before approved (a clock behind) is
// still a sighting on the watcher's own clock, and used.
func latencyStart(approved, seen time.Time) time.Time {
	if seen.IsZero() || approved.IsZero() || seen.Sub(approved) > time.Second {
		return approved
	}
	return seen
}

// markSeen records the clock's now as the time csr uid was first seen approved, unless a
// time is already recorded.
func (c *Controller) markSeen(uid types.UID) {
	now := c.clock.Now()
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	if _, ok := c.seen[uid]; !ok {
		c.seen[uid] = now
	}
}

// forgetSeen forgets when CSR uid was seen approved.
func (c *Controller) forgetSeen(uid types.UID) {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	delete(c.seen, uid)
}

// approvalTime is the lastUpdateTime of csr's Approved condition, else its
// lastTransitionTime, else the object's creation time.
func approvalTime(csr *certificatesv1.CertificateSigningRequest) time.Time {
	for _, cond := range csr.Status.Conditions {
		if cond.Type != certificatesv1.CertificateApproved {
			continue
		}
		switch {
		case !cond.LastUpdateTime.IsZero():
			return cond.LastUpdateTime.Time
		case !cond.LastTransitionTime.IsZero():
			return cond.LastTransitionTime.Time
		}
	}
	return csr.CreationTimestamp.Time
}

// event records an Event on csr if there is a recorder.
func (c *Controller) event(csr *certificatesv1.CertificateSigningRequest, eventType, reason, messageFmt string, args ...any) {
	if c.recorder == nil {
		return
	}
	c.recorder.Eventf(csr, eventType, reason, messageFmt, args...)
}
