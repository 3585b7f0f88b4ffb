// Package tpmapprover is the watcher's optional approver for the signer names whose profile
// requires TPM attestation (kubelet-client-tpm): for each CertificateSigningRequest of those
// names that is neither approved nor denied, it asks the signing server to verify the
// request's attestation without signing (signerclient.Client.VerifyAttestation) and approves
// it, or denies it with the server's reason. It approves nothing else: the approval of every
// other signer is untouched. It needs the approve verb on signers with exactly those names
// and update on certificatesigningrequests/approval (deploy/watcher).
package tpmapprover

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/workloop"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Condition reasons and Event reasons the approver writes.
const (
	// ReasonVerified approves a request whose attestation the server verified.
	ReasonVerified = "SignetAttestationVerified"
)

// Verifier verifies a CSR's attestation without signing it.
type Verifier interface {
	VerifyAttestation(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (signerclient.Attested, error)
}

// Options configures a Controller.
type Options struct {
	// SignerNames are the attested signer names to approve for; at least one.
	SignerNames []string
	// BackoffInitial and BackoffMax bound the retry delay after a transient error.
	BackoffInitial, BackoffMax time.Duration
	// Clock stamps conditions; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder receives the Events (Approved, denials); nil means none.
	Recorder record.EventRecorder
}

// Controller approves or denies the attested CSRs of its signer names.
type Controller struct {
	kube     kubeclient.Interface
	verifier Verifier
	clock    clock.PassiveClock
	recorder record.EventRecorder
	loop     *workloop.Loop
}

// New builds the approver: one informer per signer name feeding one work queue of the CSRs
// that wait for a decision.
func New(kube kubeclient.Interface, verifier Verifier, opts Options) (*Controller, error) {
	c := &Controller{kube: kube, verifier: verifier, clock: opts.Clock, recorder: opts.Recorder}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	csrs := kube.CertificatesV1().CertificateSigningRequests()
	loop, err := workloop.New(workloop.Options{
		Kind: "CSR", QueueName: "signet_tpm_approver", SignerNames: opts.SignerNames,
		BackoffInitial: opts.BackoffInitial, BackoffMax: opts.BackoffMax,
		Objects: workloop.ListWatch{
			List:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return csrs.List(ctx, o) },
			Watch:  func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return csrs.Watch(ctx, o) },
			Client: kube,
		},
		Object: &certificatesv1.CertificateSigningRequest{},
		Wants: func(obj any) bool {
			csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
			return !ok || undecided(csr)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the TPM approver: %w", err)
	}
	c.loop = loop
	return c, nil
}

// HasSynced reports whether the informers' caches have synced.
func (c *Controller) HasSynced() bool { return c.loop.HasSynced() }

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	klog.FromContext(ctx).Info("Starting TPM approver", "signerNames", c.loop.SignerNames(), "workers", workers)
	if err := c.loop.Run(ctx, workers, c.sync); err != nil {
		return fmt.Errorf("running the TPM approver: %w", err)
	}
	return nil
}

// undecided reports whether a CSR has neither an Approved, a Denied nor a Failed condition.
func undecided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return true
}

// sync decides on the CSR called name: gone, not served or already decided is skipped;
// otherwise the server verifies its attestation, and the CSR is approved (reason
// SignetAttestationVerified), or denied with the server's reason for a terminal refusal
// (AttestationFailed, MalformedRequest, ...), or re-queued with back-off for a transient one.
func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("csr", name)
	obj, err := c.loop.Cached(name)
	if err != nil {
		return err
	}
	cached, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok || cached == nil || !c.loop.Serves(cached.Spec.SignerName) || !undecided(cached) {
		logger.V(4).Info("Skipping CSR", "why", "gone, not served or decided")
		return nil
	}
	csr := cached.DeepCopy()
	att, err := c.verifier.VerifyAttestation(ctx, csr)
	if err != nil {
		reason, message, terminal := signerclient.Classify(err)
		if !terminal {
			logger.Info("Signing server unavailable, will retry", "reason", reason, "message", message)
			return err
		}
		return c.decide(ctx, csr, certificatesv1.CertificateDenied, reason, message, corev1.EventTypeWarning)
	}
	msg := fmt.Sprintf("TPM attestation verified by the signing server: node %q, endorsement key %s (%s), provider ID %q", att.Node, att.EK, att.EKTrust, att.ProviderID)
	if att.FirstUse {
		msg += "; first use of this endorsement key: signing binds it to the node"
	}
	return c.decide(ctx, csr, certificatesv1.CertificateApproved, ReasonVerified, msg, corev1.EventTypeNormal)
}

// decide writes the condition through the approval subresource and records the Event.
func (c *Controller) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, kind certificatesv1.RequestConditionType, reason, message, eventType string) error {
	now := metav1.NewTime(c.clock.Now())
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: kind, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastUpdateTime: now, LastTransitionTime: now,
	})
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the %s condition of CSR %s: %w", kind, csr.Name, err)
	}
	if c.recorder != nil {
		c.recorder.Event(csr, eventType, reason, message)
	}
	klog.FromContext(ctx).Info("CSR decided", "csr", csr.Name, "decision", kind, "reason", reason, "message", message)
	return nil
}
