package csrsigner

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/signerclient"
)

// sync brings the CSR called name one step forward. It is an early-return ladder: a CSR that
// is gone, not for a served signer, not approved, denied or failed, or already signed is
// skipped (logged at V(4) with why). Otherwise the signer is asked, and:
//   - a chain is written to status.certificate (Event Signed if the CSR was retried before,
//     or for every certificate with Options.SignedEventAlways);
//   - a terminal refusal becomes a Failed condition with the server's TitleCase reason and
//     message (Warning Event with the same reason and message);
//   - a transient error is returned, so that the CSR is re-queued with back-off (Warning Event
//     with the transient reason, the message, the delay and the attempt number), unless the
//     approval is older than the give-up deadline: see giveUp.
//
// Status writes resolve conflicts themselves (see writeStatus). Every handled CSR is counted
// by outcome.
func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("csr", name)
	csr, err := c.get(name)
	if err != nil {
		logger.Error(err, "Reading CSR from cache")
		return err
	}
	if csr == nil {
		logger.V(4).Info("Skipping CSR", "why", "not found")
		return nil
	}
	logger = logger.WithValues("uid", csr.UID, "signerName", csr.Spec.SignerName)
	if why := skipReason(csr, c.loop.Serves); why != "" {
		logger.V(4).Info("Skipping CSR", "why", why)
		return nil
	}
	ctx = klog.NewContext(ctx, logger)

	issued, err := c.signer.SignCSR(ctx, csr)
	if err == nil {
		return c.writeCertificate(ctx, csr, issued, c.loop.Queue().NumRequeues(name) > 0)
	}
	reason, message, terminal := signerclient.Classify(err)
	if terminal {
		return c.markFailed(ctx, csr, reason, message, "")
	}
	if age := c.sinceApproval(csr); c.giveUpAfter > 0 && age >= c.giveUpAfter {
		return c.giveUp(ctx, csr, age, reason, message)
	}
	attempt := c.loop.Queue().NumRequeues(name) + 1
	delay := c.loop.RetryDelay(attempt)
	logger.Info("Signer unavailable, will retry", "reason", reason, "message", message,
		"attempt", attempt, "retryIn", delay, "err", err)
	c.event(csr, corev1.EventTypeWarning, reason, "%s; retrying in %s (attempt %d)", message, delay, attempt)
	c.metrics.ObserveHandled(csr.Spec.SignerName, OutcomeRetried)
	return err
}

// giveUp ends the retries of a CSR whose approval is age old, past the give-up deadline, and
// whose last attempt failed transiently: it is marked Failed with reason SignerUnavailable
// and a Warning Event SigningDeadlineExceeded is emitted.
//
// Why Failed rather than leaving it for the cleaner: kube-controller-manager's CSR cleaner
// (1.37) deletes an approved CSR 1 hour after approval only once it is issued; an approved,
// unissued CSR without Failed stays for 24 hours, shown as Approved and waiting, and a
// restarted watcher would try it again. Failed is a final state that kubectl and the
// requester (for example the kubelet's certificate manager, which then files a new CSR)
// understand, and the cleaner deletes it 1 hour after the condition. The requester's new CSR
// gets a fresh deadline.
func (c *Controller) giveUp(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, age time.Duration, reason, message string) error {
	final := fmt.Sprintf("the signing server did not issue the certificate within %s of approval (approved %s ago); last error: %s: %s",
		c.giveUpAfter, age.Round(time.Second), reason, message)
	return c.markFailed(ctx, csr, signerclient.ReasonSignerUnavailable, final, ReasonSigningDeadlineExceeded)
}

// ReasonSigningDeadlineExceeded is the reason of the Warning Event emitted when a CSR is
// marked Failed because it could not be signed before the give-up deadline.
const ReasonSigningDeadlineExceeded = "SigningDeadlineExceeded"

// get returns the CSR called name from whichever signer's cache holds it, or nil if none
// does.
func (c *Controller) get(name string) (*certificatesv1.CertificateSigningRequest, error) {
	obj, err := c.loop.Cached(name)
	csr, _ := obj.(*certificatesv1.CertificateSigningRequest)
	return csr, err
}

// skipReason returns why csr must not be signed now, or "" if it must.
func skipReason(csr *certificatesv1.CertificateSigningRequest, served func(signerName string) bool) string {
	switch {
	case !served(csr.Spec.SignerName):
		// Defence in depth: the informers' field selectors should never let one through.
		return "signer name not served"
	case !hasCondition(csr, certificatesv1.CertificateApproved):
		return "not approved"
	case hasCondition(csr, certificatesv1.CertificateDenied):
		return "denied"
	case hasCondition(csr, certificatesv1.CertificateFailed):
		return "failed"
	case len(csr.Status.Certificate) > 0:
		return "already signed"
	}
	return ""
}

// wants is the queue's filter (workloop.Options.Wants): only a CSR that sync would not skip
// is queued, so the creation of a CSR and the write of its certificate cost no queue round.
// It reads the served names from c.loop, which is set before any informer runs.
//
// It also keeps c.seen, in the informers' event path so that the time a CSR waits in the
// queue counts in its issuance latency: the first time a CSR is wanted, the clock's now is
// recorded for its UID (later events keep the first time); a CSR turned down (signed,
// failed or denied, by this watcher or another writer) is forgotten.
func (c *Controller) wants(obj any) bool {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return true
	}
	if skipReason(csr, c.loop.Serves) != "" {
		c.forgetSeen(csr.UID)
		return false
	}
	c.markSeen(csr.UID)
	return true
}

// trimmedCertificate stands for the certificate of a signed CSR in the watcher's cache (see
// trim): skipReason reads only that status.certificate is not empty, and the API server
// would refuse it as a certificate (it is not PEM), should it ever be written back.
var trimmedCertificate = []byte("(signed; trimmed from signet-watcher's cache)")

// trim is the informers' Trim (workloop.Options.Trim): a CSR that sync would skip loses,
// in the cache, its request and its certificate (replaced by trimmedCertificate), which
// nothing reads from a CSR that is not signed next. After a renewal storm the cache holds
// every signed CSR until kube-controller-manager's cleaner deletes it an hour later; these
// two fields are most of each object's size. A CSR that later needs work (approved after
// it was created) arrives whole again in the informer's event of that change.
func (c *Controller) trim(obj any) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok || skipReason(csr, c.loop.Serves) == "" {
		return
	}
	csr.Spec.Request = nil
	if len(csr.Status.Certificate) > 0 {
		csr.Status.Certificate = trimmedCertificate
	}
}

// deleted is told of every CSR deleted from the informers' caches
// (workloop.Options.Deleted): its entry in c.seen is forgotten.
func (c *Controller) deleted(obj any) {
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		c.forgetSeen(csr.UID)
	}
}

// hasCondition reports whether csr has a condition of type t with status True. An empty
// status counts as True: before v1, conditions had no status field.
func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == t && (cond.Status == corev1.ConditionTrue || cond.Status == "") {
			return true
		}
	}
	return false
}
