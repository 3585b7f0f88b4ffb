package csrsigner

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/watcher/signerclient"
)

// sync brings the CSR called name one step forward. It is an early-return ladder: a CSR that
// is gone, not for a served signer, not approved, denied or failed, or already signed is
// skipped (logged at V(4) with why). Otherwise the signer is asked: a chain is written to
// status.certificate; a terminal refusal becomes a Failed condition; a transient error is
// returned so that the CSR is re-queued with back-off. A write conflict is returned too (the
// next sync re-reads the cache and decides again; the server's idempotency returns the same
// certificate); a CSR deleted meanwhile is dropped.
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
	if why := skipReason(csr, c.signerNames); why != "" {
		logger.V(4).Info("Skipping CSR", "why", why)
		return nil
	}
	ctx = klog.NewContext(ctx, logger)

	chain, err := c.signer.SignCSR(ctx, csr)
	if err == nil {
		return c.writeCertificate(ctx, csr, chain)
	}
	reason, message, terminal := signerclient.Classify(err)
	if terminal {
		return c.markFailed(ctx, csr, reason, message)
	}
	logger.Info("Signer unavailable, will retry", "reason", reason, "message", message,
		"attempt", c.queue.NumRequeues(name)+1, "err", err)
	return err
}

// get returns the CSR called name from whichever signer's cache holds it, or nil if none
// does.
func (c *Controller) get(name string) (*certificatesv1.CertificateSigningRequest, error) {
	for _, lister := range c.listers {
		csr, err := lister.Get(name)
		switch {
		case err == nil:
			return csr, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("getting CSR %s: %w", name, err)
		}
	}
	return nil, nil
}

// skipReason returns why csr must not be signed now, or "" if it must.
func skipReason(csr *certificatesv1.CertificateSigningRequest, served map[string]bool) string {
	switch {
	case !served[csr.Spec.SignerName]:
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

// writeCertificate stores chain in a copy of csr's status.certificate.
func (c *Controller) writeCertificate(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, chain []byte) error {
	updated := csr.DeepCopy()
	updated.Status.Certificate = chain
	if err := c.updateStatus(ctx, updated); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Signed CSR")
	return nil
}

// markFailed appends a Failed condition with reason and message to a copy of csr's status.
func (c *Controller) markFailed(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, reason, message string) error {
	now := metav1.NewTime(c.clock.Now())
	updated := csr.DeepCopy()
	updated.Status.Conditions = append(updated.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:               certificatesv1.CertificateFailed,
		Status:             corev1.ConditionTrue,
		Reason:             reason,
		Message:            message,
		LastUpdateTime:     now,
		LastTransitionTime: now,
	})
	if err := c.updateStatus(ctx, updated); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Signer refused CSR, marked Failed", "reason", reason, "message", message)
	return nil
}

// updateStatus writes csr's status. NotFound (deleted meanwhile) is dropped; any other error,
// including a Conflict, is returned so that the CSR is re-queued and decided again.
func (c *Controller) updateStatus(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	logger := klog.FromContext(ctx)
	_, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr,
		metav1.UpdateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		logger.V(4).Info("Skipping CSR", "why", "deleted before its status was written")
		return nil
	case apierrors.IsConflict(err):
		logger.V(2).Info("Status write conflicted, will retry", "err", err)
	default:
		logger.Error(err, "Writing CSR status")
	}
	return fmt.Errorf("updating status of CSR %s: %w", csr.Name, err)
}
