// Package pcrsigner is the controller that signs PodCertificateRequests for the served signer
// names: it forwards each pending one to the signing server and writes, in one status update,
// either the Issued condition with the chain and the times the server chose, or a Denied
// condition for a terminal refusal. PodCertificateRequests have no approval step, and the
// kubelet treats Denied and Failed as permanent for the pod: transient failures are only ever
// retried, never written.
//
// The cluster serves PodCertificateRequests as certificates.k8s.io/v1 (Kubernetes 1.37+) or
// v1beta1 (1.35–1.36); see Discover.
package pcrsigner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/workloop"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Signer issues the certificate of one PodCertificateRequest. Its errors are classified
// with signerclient.Classify.
type Signer interface {
	SignPCR(ctx context.Context, pcr objectrequest.PCR) (signerclient.Issued, error)
}

// Options configures a Controller.
type Options struct {
	// Version is the served API version (V1 or V1beta1); see Discover.
	Version APIVersion
	// SignerNames are the served spec.signerName values; at least one.
	SignerNames []string
	// BackoffInitial and BackoffMax bound the per-object exponential retry delay; both
	// positive, and BackoffMax below the give-up deadline.
	BackoffInitial, BackoffMax time.Duration
	// GiveUpAfter is the age (since creation) past which an object whose signing still fails
	// transiently is dropped (Warning Event, no condition) instead of retried; 0 means
	// DefaultGiveUpAfter.
	GiveUpAfter time.Duration
	// Clock stamps conditions and measures ages and latencies; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder receives the Events (Signed, refusals, retries, give-ups); nil means none.
	Recorder record.EventRecorder
	// SignedEventAlways records the Normal Event Signed for every certificate written; by
	// default only for objects whose signing was retried.
	SignedEventAlways bool
	// Metrics receives outcomes and latencies; nil means none.
	Metrics Metrics
}

// DefaultGiveUpAfter is the default Options.GiveUpAfter. kube-controller-manager's cleaner
// deletes every PodCertificateRequest 15 minutes after creation, and a kubelet whose request
// was lost makes a new one after about 10 minutes: retrying longer only races both.
const DefaultGiveUpAfter = 10 * time.Minute

// Metrics receives what the controller observes: every handled object by outcome (see
// Outcomes), and the time from the object's creation to its Issued status written.
// Implementations must be safe for concurrent use.
type Metrics = workloop.Metrics

// Outcomes passed to Metrics.ObserveHandled.
const (
	// OutcomeSigned: Issued, with the chain and times, was written.
	OutcomeSigned = "signed"
	// OutcomeDenied: Denied was written (terminal refusal).
	OutcomeDenied = "denied"
	// OutcomeRetried: a transient error, or a first status rejection; re-queued with back-off.
	OutcomeRetried = "retried"
	// OutcomeConflict: the status write conflicted and the object, read again, no longer
	// needed it: dropped.
	OutcomeConflict = "conflict"
	// OutcomeGone: deleted or replaced before its status was written: dropped.
	OutcomeGone = "gone"
	// OutcomeAbandoned: still failing transiently past the give-up deadline: dropped without
	// a condition.
	OutcomeAbandoned = "abandoned"
	// OutcomeRejected: the API server refused the status write as invalid twice in a row:
	// dropped without a condition.
	OutcomeRejected = "rejected"
)

// Outcomes lists every outcome passed to Metrics.ObserveHandled.
func Outcomes() []string {
	return []string{OutcomeSigned, OutcomeDenied, OutcomeRetried, OutcomeConflict, OutcomeGone, OutcomeAbandoned, OutcomeRejected}
}

// Controller signs the PodCertificateRequests of its signer names. Create it with New and
// call Run once; a later run (a new leader term) needs a new Controller.
type Controller struct {
	api         versionClient
	version     APIVersion
	signer      Signer
	clock       clock.PassiveClock
	recorder    record.EventRecorder
	signedEvent bool
	metrics     Metrics
	giveUpAfter time.Duration

	loop *workloop.Loop

	// rejected holds, by key, the UID of objects whose last status write was refused as
	// invalid (422): a second refusal drops them.
	rejectedMu sync.Mutex
	rejected   map[string]types.UID
}

// New builds a Controller for opts.Version with one informer per signer name (field
// selector spec.signerName=<name>, every namespace, managedFields dropped), all feeding one
// work queue keyed by namespace/name with exponential per-item back-off (see workloop). It
// returns an error for an unsupported version, without signer names, or with an invalid
// back-off.
func New(kube kubeclient.Interface, signer Signer, opts Options) (*Controller, error) {
	api, err := newVersionClient(kube, opts.Version)
	if err != nil {
		return nil, fmt.Errorf("creating PodCertificateRequest signing controller: %w", err)
	}
	giveUpAfter := opts.GiveUpAfter
	if giveUpAfter == 0 {
		giveUpAfter = DefaultGiveUpAfter
	}
	if opts.BackoffMax >= giveUpAfter {
		return nil, fmt.Errorf("creating PodCertificateRequest signing controller: back-off max %s is not below the give-up deadline %s",
			opts.BackoffMax, giveUpAfter)
	}
	c := &Controller{
		api:         api,
		version:     opts.Version,
		signer:      signer,
		clock:       opts.Clock,
		recorder:    opts.Recorder,
		signedEvent: opts.SignedEventAlways,
		metrics:     opts.Metrics,
		giveUpAfter: giveUpAfter,
		rejected:    make(map[string]types.UID),
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.metrics == nil {
		c.metrics = workloop.NoMetrics{}
	}
	loop, err := workloop.New(workloop.Options{
		Kind: "PodCertificateRequest", QueueName: "signet_pcr_signer", SignerNames: opts.SignerNames,
		BackoffInitial: opts.BackoffInitial, BackoffMax: opts.BackoffMax,
		Objects: api.objects(),
		Object:  api.object(),
		Wants:   c.wants,
		Trim:    c.trim,
	})
	if err != nil {
		return nil, fmt.Errorf("creating PodCertificateRequest signing controller: %w", err)
	}
	c.loop = loop
	return c, nil
}

// Run starts the informers, waits for their caches, and runs workers until ctx is done; it
// then shuts the queue down and waits for the workers and informers to stop. It returns an
// error if workers is not positive or the caches could not sync.
func (c *Controller) Run(ctx context.Context, workers int) error {
	klog.FromContext(ctx).Info("Starting PodCertificateRequest signing controller", "apiVersion", c.version,
		"signerNames", c.loop.SignerNames(), "workers", workers, "giveUpAfter", c.giveUpAfter)
	if err := c.loop.Run(ctx, workers, c.sync); err != nil {
		return fmt.Errorf("running PodCertificateRequest signing controller: %w", err)
	}
	return nil
}
