package csrsigner

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
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
// carries no time at all.
func (c *Controller) sinceApproval(csr *certificatesv1.CertificateSigningRequest) time.Duration {
	t := approvalTime(csr)
	if t.IsZero() {
		return 0
	}
	return c.clock.Since(t)
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
