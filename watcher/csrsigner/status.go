package csrsigner

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/watcher/signerclient"
)

// writeResult is what became of a status write.
type writeResult int

const (
	// written: the status is stored.
	written writeResult = iota
	// superseded: after a conflict, the object read again no longer needs the write.
	superseded
	// gone: the object was deleted or replaced by another with the same name.
	gone
	// notWritten: the write failed; the error says why and the CSR is re-queued.
	notWritten
)

// writeCertificate stores the issued chain in status.certificate, then observes the outcome
// and the issuance latency (from issuanceStart to the write's end), logs the issuance
// (sinceApproval is that latency) and, if the CSR was retried before (or every certificate
// gets one), emits the Signed Event.
func (c *Controller) writeCertificate(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, issued signerclient.Issued, retried bool) error {
	// Before the write: once written, the sighting is forgotten (by writeStatus, or by the
	// informer's event of the write, which may come first).
	start := c.issuanceStart(csr)
	result, err := c.writeStatus(ctx, csr, func(updated *certificatesv1.CertificateSigningRequest) {
		updated.Status.Certificate = issued.Chain
	})
	if result != written {
		c.observeNotWritten(csr, result)
		return err
	}
	latency := c.since(start)
	c.metrics.ObserveIssuanceLatency(csr.Spec.SignerName, latency)
	c.metrics.ObserveHandled(csr.Spec.SignerName, OutcomeSigned)
	message := issued.Summary(ctx, csr.Spec.SignerName)
	if retried || c.signedEvent {
		c.event(csr, corev1.EventTypeNormal, ReasonSigned, "%s", message)
	}
	klog.FromContext(ctx).Info("Signed CSR", "sinceApproval", latency, "certificate", message)
	return nil
}

// ReasonSigned is the reason of the Normal Event emitted when a certificate is written.
const ReasonSigned = "Signed"

// markFailed appends a Failed condition with reason and message to csr's status, then emits
// a Warning Event with eventReason (reason if empty) and message, and counts the outcome.
func (c *Controller) markFailed(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, reason, message, eventReason string) error {
	result, err := c.writeStatus(ctx, csr, func(updated *certificatesv1.CertificateSigningRequest) {
		now := metav1.NewTime(c.clock.Now())
		updated.Status.Conditions = append(updated.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:               certificatesv1.CertificateFailed,
			Status:             corev1.ConditionTrue,
			Reason:             reason,
			Message:            message,
			LastUpdateTime:     now,
			LastTransitionTime: now,
		})
	})
	if result != written {
		c.observeNotWritten(csr, result)
		return err
	}
	if eventReason == "" {
		eventReason = reason
	}
	c.metrics.ObserveHandled(csr.Spec.SignerName, OutcomeFailed)
	c.event(csr, corev1.EventTypeWarning, eventReason, "%s", message)
	klog.FromContext(ctx).Info("Marked CSR Failed", "reason", reason, "message", message)
	return nil
}

// observeNotWritten counts a write that did not happen.
func (c *Controller) observeNotWritten(csr *certificatesv1.CertificateSigningRequest, result writeResult) {
	outcome := OutcomeRetried
	switch result {
	case superseded:
		outcome = OutcomeConflict
	case gone:
		outcome = OutcomeGone
	}
	c.metrics.ObserveHandled(csr.Spec.SignerName, outcome)
}

// writeStatus writes a copy of csr (the object read from the cache, with its
// resourceVersion) changed by apply, with UpdateStatus. A deleted object is dropped (gone).
// On Conflict it reads the object from the API server and decides again at once:
//   - deleted, or another object with the same name (UID changed): dropped (gone);
//   - no longer to be signed (signed, denied or failed meanwhile) or a different spec:
//     dropped (superseded);
//   - otherwise apply is written once more on the fresh object. What apply writes was
//     decided for this UID and spec, so the signing server is not asked again.
//
// Any other error, and a second conflict, is returned (notWritten) and the CSR re-queued.
// status.certificate is never overwritten: only objects without one are written, and each
// write is conditional on the resourceVersion that was checked. Unless the CSR is
// re-queued, when it was seen approved is forgotten (c.seen): it is done with.
func (c *Controller) writeStatus(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, apply func(*certificatesv1.CertificateSigningRequest)) (result writeResult, err error) {
	defer func() {
		if result != notWritten {
			c.forgetSeen(csr.UID)
		}
	}()
	logger := klog.FromContext(ctx)
	err = c.updateStatus(ctx, csr, apply)
	switch {
	case err == nil:
		return written, nil
	case apierrors.IsNotFound(err):
		logger.Info("Dropping CSR", "why", "deleted before its status was written")
		return gone, nil
	case !apierrors.IsConflict(err):
		logger.Error(err, "Writing CSR status")
		return notWritten, err
	}

	logger.V(2).Info("Status write conflicted, reading the CSR again", "err", err)
	fresh, err := c.kube.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		logger.Info("Dropping CSR", "why", "deleted before its status was written")
		return gone, nil
	case err != nil:
		logger.Error(err, "Reading CSR after a status conflict")
		return notWritten, fmt.Errorf("reading CSR %s after a status conflict: %w", csr.Name, err)
	case fresh.UID != csr.UID:
		logger.Info("Dropping CSR", "why", "replaced by another object with the same name", "newUID", fresh.UID)
		return gone, nil
	}
	if why := c.supersededReason(csr, fresh); why != "" {
		logger.Info("Dropping CSR after a status conflict", "why", why)
		return superseded, nil
	}
	err = c.updateStatus(ctx, fresh, apply)
	switch {
	case err == nil:
		logger.V(2).Info("Status written after a conflict")
		return written, nil
	case apierrors.IsNotFound(err):
		logger.Info("Dropping CSR", "why", "deleted before its status was written")
		return gone, nil
	default:
		logger.Error(err, "Writing CSR status after a conflict, will retry")
		return notWritten, err
	}
}

// supersededReason returns why fresh, the object read again after a conflict, must not get
// the write decided for old, or "" if it must.
func (c *Controller) supersededReason(old, fresh *certificatesv1.CertificateSigningRequest) string {
	if why := skipReason(fresh, c.loop.Serves); why != "" {
		return why
	}
	// The spec is immutable in Kubernetes; a certificate is only ever written for the
	// request it was issued for.
	if !equality.Semantic.DeepEqual(old.Spec, fresh.Spec) {
		return "spec changed"
	}
	return ""
}

// updateStatus writes a copy of base changed by apply with UpdateStatus. Errors wrap the API
// error.
func (c *Controller) updateStatus(ctx context.Context, base *certificatesv1.CertificateSigningRequest, apply func(*certificatesv1.CertificateSigningRequest)) error {
	updated := base.DeepCopy()
	apply(updated)
	_, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, updated,
		metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("updating status of CSR %s: %w", base.Name, err)
	}
	return nil
}
