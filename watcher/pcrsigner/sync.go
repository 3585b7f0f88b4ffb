package pcrsigner

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/signerclient"
)

// sync brings the PodCertificateRequest at key (namespace/name) one step forward. It is an
// early-return ladder: an object that is gone, not for a served signer, already Issued,
// Denied or Failed, or already carrying a chain is skipped (logged at V(4) with why).
// Otherwise the signer is asked, and:
//   - the chain and times are written with the Issued condition (Event Signed if the object
//     was retried before, or for every certificate with Options.SignedEventAlways);
//   - a terminal refusal becomes a Denied condition with the PodCertificateRequest reason
//     (see DeniedReason) and the server's message (Warning Event with the same);
//   - a transient error is returned, so that the object is re-queued with back-off (Warning
//     Event with the reason, the message, the delay and the attempt number), unless the
//     object is older than the give-up deadline: it is then dropped (see abandon). A
//     transient error is never written as Failed: the kubelet would treat it as permanent.
//
// Status writes resolve conflicts and rejections themselves (see writeStatus). Every handled
// object is counted by outcome.
func (c *Controller) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx).WithValues("pcr", key)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.Error(err, "Dropping malformed queue key")
		return nil
	}
	r, err := c.get(namespace, name)
	if err != nil {
		logger.Error(err, "Reading PodCertificateRequest from cache")
		return err
	}
	if r == nil {
		logger.V(4).Info("Skipping PodCertificateRequest", "why", "not found")
		c.clearRejected(key)
		return nil
	}
	logger = logger.WithValues("uid", r.pcr.UID, "signerName", r.pcr.SignerName)
	if why := skipReason(r, c.loop.Serves); why != "" {
		logger.V(4).Info("Skipping PodCertificateRequest", "why", why)
		c.clearRejected(key)
		return nil
	}
	ctx = klog.NewContext(ctx, logger)

	issued, err := c.signer.SignPCR(ctx, r.pcr)
	if err == nil {
		return c.writeIssued(ctx, r, issued, c.loop.Queue().NumRequeues(key) > 0)
	}
	reason, message, terminal := signerclient.Classify(err)
	if terminal {
		return c.markDenied(ctx, r, DeniedReason(reason), message)
	}
	if age := c.age(r); age >= c.giveUpAfter {
		c.abandon(ctx, r, age, reason, message)
		return nil
	}
	attempt := c.loop.Queue().NumRequeues(key) + 1
	delay := c.loop.RetryDelay(attempt)
	logger.Info("Signer unavailable, will retry", "reason", reason, "message", message,
		"attempt", attempt, "retryIn", delay, "err", err)
	c.event(r, corev1.EventTypeWarning, reason, "%s; retrying in %s (attempt %d)", message, delay, attempt)
	c.metrics.ObserveHandled(r.pcr.SignerName, OutcomeRetried)
	return err
}

// DeniedReason maps the TitleCase reason of a terminal refusal (signerclient.Classify) to
// the reason of the Denied condition: the API's well-known UnsupportedKeyType for
// UnsupportedKey and InvalidUnverifiedUserAnnotations for UnknownAnnotation; every other
// reason (PolicyViolation, InvalidSignature, MalformedRequest, LintFailed,
// IdempotencyConflict, SignerRefused) as the CSR controller writes it.
func DeniedReason(reason string) string {
	switch reason {
	case "UnsupportedKey":
		return certificatesv1.PodCertificateRequestConditionUnsupportedKeyType
	case "UnknownAnnotation":
		return certificatesv1.PodCertificateRequestConditionInvalidUserConfig
	}
	return reason
}

// ReasonSigningDeadlineExceeded is the reason of the Warning Event emitted when an object
// that still fails transiently is dropped at the give-up deadline.
const ReasonSigningDeadlineExceeded = "SigningDeadlineExceeded"

// abandon drops r, age old and past the give-up deadline, whose last attempt failed
// transiently: it is logged, gets a Warning Event SigningDeadlineExceeded and is counted,
// but no condition is written. Failed would be permanent for the pod, whereas the kubelet
// replaces a request that stays pending (and kube-controller-manager's cleaner deletes it
// 15 minutes after creation); the replacement gets a fresh deadline.
func (c *Controller) abandon(ctx context.Context, r *request, age time.Duration, reason, message string) {
	final := fmt.Sprintf("the signing server did not issue the certificate within %s of the request's creation (created %s ago); "+
		"last error: %s: %s; no longer retried: the kubelet replaces a request that stays pending",
		c.giveUpAfter, age.Round(time.Second), reason, message)
	klog.FromContext(ctx).Info("Giving up on PodCertificateRequest", "age", age, "reason", reason, "message", message)
	c.event(r, corev1.EventTypeWarning, ReasonSigningDeadlineExceeded, "%s", final)
	c.metrics.ObserveHandled(r.pcr.SignerName, OutcomeAbandoned)
}

// age is the time since r was created, 0 if it carries no creation time.
func (c *Controller) age(r *request) time.Duration {
	if r.created.IsZero() {
		return 0
	}
	return c.clock.Since(r.created)
}

// get returns the object namespace/name from whichever signer's cache holds it, or nil if
// none does.
func (c *Controller) get(namespace, name string) (*request, error) {
	obj, err := c.loop.Cached(namespace + "/" + name)
	return toRequest(obj), err
}

// wants is the queue's filter (workloop.Options.Wants): an object is queued if sync would not
// skip it, or if its last status write was rejected (sync then forgets the rejection), so the
// controller's own Issued or Denied write costs no queue round.
func (c *Controller) wants(obj any) bool {
	r := toRequest(obj)
	if r == nil || skipReason(r, c.loop.Serves) == "" {
		return true
	}
	c.rejectedMu.Lock()
	defer c.rejectedMu.Unlock()
	_, rejected := c.rejected[r.key()]
	return rejected
}

// trimmedChain stands for the certificate chain of an issued PodCertificateRequest in the
// watcher's cache (see trim): skipReason reads only that the chain is not empty, and the API
// server would refuse it as a chain (it is not PEM), should it ever be written back.
const trimmedChain = "(issued; trimmed from signet-watcher's cache)"

// trim is the informers' Trim (workloop.Options.Trim): an object that sync would skip
// loses, in the cache, its stub request, public key and proof of possession, and its chain
// (replaced by trimmedChain), which nothing reads from an object that is not signed next.
// After a storm of pods the cache holds every issued object until its pod goes; these fields
// are most of each object's size. A rejected write's object (see wants) is skipped by sync
// too once finished, so trimming it loses nothing.
func (c *Controller) trim(obj any) {
	r := toRequest(obj)
	if r == nil || skipReason(r, c.loop.Serves) == "" {
		return
	}
	switch o := obj.(type) {
	case *certificatesv1.PodCertificateRequest:
		o.Spec.StubPKCS10Request = nil
		if o.Status.CertificateChain != "" {
			o.Status.CertificateChain = trimmedChain
		}
	case *certificatesv1beta1.PodCertificateRequest:
		o.Spec.StubPKCS10Request, o.Spec.PKIXPublicKey, o.Spec.ProofOfPossession = nil, nil, nil
		if o.Status.CertificateChain != "" {
			o.Status.CertificateChain = trimmedChain
		}
	}
}

// skipReason returns why r must not be signed now, or "" if it must.
func skipReason(r *request, served func(signerName string) bool) string {
	switch {
	case !served(r.pcr.SignerName):
		// Defence in depth: the informers' field selectors should never let one through.
		return "signer name not served"
	case hasCondition(r, certificatesv1.PodCertificateRequestConditionTypeIssued):
		return "issued"
	case hasCondition(r, certificatesv1.PodCertificateRequestConditionTypeDenied):
		return "denied"
	case hasCondition(r, certificatesv1.PodCertificateRequestConditionTypeFailed):
		return "failed"
	case r.status.CertificateChain != "":
		return "already has a certificate chain"
	}
	return ""
}

// hasCondition reports whether r has a condition of type t. Its status is not read: the API
// server admits only True for these types, and the kubelet reads only the type.
func hasCondition(r *request, t string) bool {
	return meta.FindStatusCondition(r.status.Conditions, t) != nil
}
