package csrsigner

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/workloop"
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
	if result != workloop.Written {
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
	// V(2): the signing server logs every issuance (serial, ledger seq) at its default level
	// and the CSR carries the certificate; one INFO line per certificate here cost about 4 %
	// of the watcher's CPU in a renewal storm (docs/benchmarks.md, "Renewal storm").
	klog.FromContext(ctx).V(2).Info("Signed CSR", "sinceApproval", latency, "certificate", message)
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
	if result != workloop.Written {
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
func (c *Controller) observeNotWritten(csr *certificatesv1.CertificateSigningRequest, result workloop.WriteResult) {
	outcome := OutcomeRetried
	switch result {
	case workloop.Superseded:
		outcome = OutcomeConflict
	case workloop.Gone:
		outcome = OutcomeGone
	}
	c.metrics.ObserveHandled(csr.Spec.SignerName, outcome)
}

// writeStatus writes a copy of csr (the object read from the cache, with its
// resourceVersion) changed by apply, with UpdateStatus, and handles a conflict as
// workloop.WriteStatus says: status.certificate is never overwritten, as only objects without
// one are written, each write conditional on the resourceVersion that was checked. Unless the
// CSR is re-queued (NotWritten), when it was seen approved is forgotten (c.seen): it is done
// with.
func (c *Controller) writeStatus(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, apply func(*certificatesv1.CertificateSigningRequest)) (result workloop.WriteResult, err error) {
	defer func() {
		if result != workloop.NotWritten {
			c.forgetSeen(csr.UID)
		}
	}()
	return workloop.WriteStatus(ctx, csr, workloop.StatusTarget[*certificatesv1.CertificateSigningRequest]{
		Kind: "CSR",
		Key:  csr.Name,
		UID:  func(o *certificatesv1.CertificateSigningRequest) types.UID { return o.UID },
		Update: func(ctx context.Context, base *certificatesv1.CertificateSigningRequest) error {
			return c.updateStatus(ctx, base, apply)
		},
		Get: func(ctx context.Context) (*certificatesv1.CertificateSigningRequest, error) {
			return c.kube.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		},
		Superseded: c.supersededReason,
	})
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
		metav1.UpdateOptions{FieldManager: workloop.FieldManager})
	if err != nil {
		return fmt.Errorf("updating status of CSR %s: %w", base.Name, err)
	}
	return nil
}
