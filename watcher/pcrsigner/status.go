package pcrsigner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/workloop"
)

// Reasons written or recorded by the controller.
const (
	// ReasonIssued is the reason of the Issued condition.
	ReasonIssued = "Issued"
	// ReasonSigned is the reason of the Normal Event emitted when a certificate is written,
	// as for CSRs.
	ReasonSigned = "Signed"
	// ReasonStatusRejected is the reason of the Warning Event emitted when the API server
	// refuses a status write as invalid (422).
	ReasonStatusRejected = "StatusRejected"
)

// writeIssued writes, in one status update, the Issued condition (reason Issued, the
// certificate's summary as message), the chain, and notBefore, notAfter and beginRefreshAt
// exactly as the server chose them. It then observes the outcome and the latency since
// creation, logs the issuance and, if the object was retried before (or every certificate
// gets one), emits the Signed Event.
func (c *Controller) writeIssued(ctx context.Context, r *request, issued signerclient.Issued, retried bool) error {
	message := issued.Summary(ctx, r.pcr.SignerName)
	result, err := c.writeStatus(ctx, r, func(status *certificatesv1.PodCertificateRequestStatus) {
		status.Conditions = append(status.Conditions, c.condition(r, certificatesv1.PodCertificateRequestConditionTypeIssued, ReasonIssued, message))
		status.CertificateChain = string(issued.Chain)
		status.NotBefore = timePtr(issued.NotBefore)
		status.NotAfter = timePtr(issued.NotAfter)
		status.BeginRefreshAt = timePtr(issued.BeginRefreshAt)
	})
	if result != workloop.Written {
		c.observeNotWritten(r, result)
		return err
	}
	c.clearRejected(r.key())
	latency := c.age(r)
	c.metrics.ObserveIssuanceLatency(r.pcr.SignerName, latency)
	c.metrics.ObserveHandled(r.pcr.SignerName, OutcomeSigned)
	if retried || c.signedEvent {
		c.event(r, corev1.EventTypeNormal, ReasonSigned, "%s", message)
	}
	// V(2), as the CSR controller's "Signed CSR": the server logs every issuance.
	klog.FromContext(ctx).V(2).Info("Issued PodCertificateRequest", "sinceCreation", latency, "certificate", message,
		"beginRefreshAt", issued.BeginRefreshAt)
	return nil
}

// markDenied writes the Denied condition with reason and message (and nothing else, as the
// API requires), then emits a Warning Event with the same reason and message.
func (c *Controller) markDenied(ctx context.Context, r *request, reason, message string) error {
	result, err := c.writeStatus(ctx, r, func(status *certificatesv1.PodCertificateRequestStatus) {
		status.Conditions = append(status.Conditions, c.condition(r, certificatesv1.PodCertificateRequestConditionTypeDenied, reason, message))
	})
	if result != workloop.Written {
		c.observeNotWritten(r, result)
		return err
	}
	c.clearRejected(r.key())
	c.metrics.ObserveHandled(r.pcr.SignerName, OutcomeDenied)
	c.event(r, corev1.EventTypeWarning, reason, "%s", message)
	klog.FromContext(ctx).Info("Denied PodCertificateRequest", "reason", reason, "message", message)
	return nil
}

// condition is a True condition of type t stamped now, for r's generation.
func (c *Controller) condition(r *request, t, reason, message string) metav1.Condition {
	return metav1.Condition{
		Type:               t,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: r.generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
		Reason:             reason,
		Message:            message,
	}
}

// timePtr returns t as a *metav1.Time, which serialises whole seconds: the server's times
// are whole seconds, as x509 keeps them.
func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// observeNotWritten counts a write that did not happen.
func (c *Controller) observeNotWritten(r *request, result workloop.WriteResult) {
	outcome := OutcomeRetried
	switch result {
	case workloop.Superseded:
		outcome = OutcomeConflict
	case workloop.Gone:
		outcome = OutcomeGone
	case workloop.Rejected:
		outcome = OutcomeRejected
	}
	c.metrics.ObserveHandled(r.pcr.SignerName, outcome)
}

// writeStatus writes a copy of r (the cached object, with its resourceVersion) whose status
// is changed by apply, with UpdateStatus, and handles a conflict as workloop.WriteStatus says.
//
// An Invalid answer (422: for example a notBefore no longer within five minutes of the API
// server's clock, a missing `sign` permission, or a certificate the API server's checks
// refuse) is logged with the API server's causes and gets a Warning Event StatusRejected;
// the first one is returned (NotWritten), so that the object is retried with back-off and a
// fresh answer from the signing server; a second one in a row for the same object drops it
// (Rejected).
func (c *Controller) writeStatus(ctx context.Context, r *request, apply func(*certificatesv1.PodCertificateRequestStatus)) (workloop.WriteResult, error) {
	return workloop.WriteStatus(ctx, r, workloop.StatusTarget[*request]{
		Kind:   "PodCertificateRequest",
		Key:    r.key(),
		UID:    func(o *request) types.UID { return o.pcr.UID },
		Update: func(ctx context.Context, base *request) error { return c.updateStatus(ctx, base, apply) },
		Get: func(ctx context.Context) (*request, error) {
			return c.api.get(ctx, r.pcr.Namespace, r.pcr.Name)
		},
		Superseded: c.supersededReason,
		Invalid:    c.statusRejected,
	})
}

// statusRejected handles an Invalid answer to a status write of r: see writeStatus.
func (c *Controller) statusRejected(ctx context.Context, r *request, err error) (workloop.WriteResult, error) {
	reason := invalidReason(err)
	key := r.key()
	c.rejectedMu.Lock()
	again := c.rejected[key] == r.pcr.UID
	c.rejected[key] = r.pcr.UID
	c.rejectedMu.Unlock()
	logger := klog.FromContext(ctx)
	if again {
		logger.Info("Dropping PodCertificateRequest: the API server refused its status twice", "reason", reason)
		c.event(r, corev1.EventTypeWarning, ReasonStatusRejected, "the API server refused the status write again: %s; no longer retried", reason)
		c.clearRejected(key)
		return workloop.Rejected, nil
	}
	logger.Info("The API server refused the status write, will retry once", "reason", reason)
	c.event(r, corev1.EventTypeWarning, ReasonStatusRejected, "the API server refused the status write: %s; retrying once", reason)
	return workloop.NotWritten, err
}

// clearRejected forgets an earlier status rejection of key.
func (c *Controller) clearRejected(key string) {
	c.rejectedMu.Lock()
	delete(c.rejected, key)
	c.rejectedMu.Unlock()
}

// invalidReason extracts the API server's causes from an Invalid error ("field: message;
// ..."), else its message.
func invalidReason(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return status.Status().Message
	}
	causes := make([]string, 0, len(details.Causes))
	for _, cause := range details.Causes {
		causes = append(causes, cause.Field+": "+cause.Message)
	}
	return strings.Join(causes, "; ")
}

// supersededReason returns why fresh, the object read again after a conflict, must not get
// the write decided for old, or "" if it must.
func (c *Controller) supersededReason(old, fresh *request) string {
	if why := skipReason(fresh, c.loop.Serves); why != "" {
		return why
	}
	// The spec is immutable in Kubernetes; a certificate is only ever written for the
	// request it was issued for.
	if !equality.Semantic.DeepEqual(old.pcr, fresh.pcr) {
		return "spec changed"
	}
	return ""
}

// updateStatus writes base's object with its status changed by apply (on a deep copy) with
// UpdateStatus. Errors wrap the API error.
func (c *Controller) updateStatus(ctx context.Context, base *request, apply func(*certificatesv1.PodCertificateRequestStatus)) error {
	if err := c.api.updateStatus(ctx, base, apply); err != nil {
		return fmt.Errorf("updating status of PodCertificateRequest %s: %w", base.key(), err)
	}
	return nil
}
