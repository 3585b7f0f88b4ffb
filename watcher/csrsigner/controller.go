// Package csrsigner is the controller that signs approved CertificateSigningRequests for the
// served signer names: it forwards each one to the signing server and writes the chain, or a
// Failed condition for a terminal refusal, into the object's status.
package csrsigner

import (
	"context"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/workloop"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Signer signs one CertificateSigningRequest and returns the PEM chain for
// status.certificate, with the leaf's serial number and NotAfter if the server reported
// them. Its errors are classified with signerclient.Classify.
type Signer interface {
	SignCSR(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (signerclient.Issued, error)
}

// Options configures a Controller.
type Options struct {
	// SignerNames are the served spec.signerName values; at least one.
	SignerNames []string
	// BackoffInitial and BackoffMax bound the per-CSR exponential retry delay; both positive.
	BackoffInitial, BackoffMax time.Duration
	// Clock stamps conditions and measures ages and latencies; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder receives the Events on CSRs (Signed, refusals, retries, give-up); nil means no
	// Events.
	Recorder record.EventRecorder
	// SignedEventAlways records the Normal Event Signed for every certificate written; by
	// default only for CSRs whose signing was retried (they already carry Warning Events).
	SignedEventAlways bool
	// Metrics receives the outcome of every handled CSR and the issuance latency; nil means
	// none.
	Metrics Metrics
	// GiveUpAfter is how long after approval a CSR that still fails transiently is marked
	// Failed (SignerUnavailable) instead of retried; 0 means DefaultGiveUpAfter and a negative
	// value disables giving up. BackoffMax must be below it.
	GiveUpAfter time.Duration
}

// DefaultGiveUpAfter is the default Options.GiveUpAfter: well inside the hour after approval
// within which kube-controller-manager's cleaner expects an approved CSR to be issued.
const DefaultGiveUpAfter = 55 * time.Minute

// Metrics receives what the controller observes: every handled CSR by outcome (OutcomeSigned,
// OutcomeFailed, OutcomeRetried, OutcomeConflict or OutcomeGone), and the issuance latency:
// the time from when the watcher saw the CSR approved to its certificate written in status,
// on the controller's clock. When the watcher saw the approval more than a second after the
// Approved condition's whole-second timestamp (its lastUpdateTime, else its
// lastTransitionTime, else the object's creation), for example after a restart or a change
// of leader, or has no record of seeing it, the latency starts at that timestamp instead
// (see latencyStart). Implementations must be safe for concurrent use.
type Metrics = workloop.Metrics

// Outcomes passed to Metrics.ObserveHandled.
const (
	// OutcomeSigned: the certificate chain was written.
	OutcomeSigned = "signed"
	// OutcomeFailed: a Failed condition was written (terminal refusal, or the signing deadline
	// passed).
	OutcomeFailed = "failed"
	// OutcomeRetried: a transient error (signing server or status write); re-queued with
	// back-off.
	OutcomeRetried = "retried"
	// OutcomeConflict: the status write conflicted and the object, read again, no longer
	// needed this write (signed, denied or failed meanwhile, or its spec changed): dropped.
	OutcomeConflict = "conflict"
	// OutcomeGone: the object was deleted, or replaced by another with the same name,
	// before its status was written: dropped.
	OutcomeGone = "gone"
)

// Outcomes lists every outcome passed to Metrics.ObserveHandled, so that their counters can
// start at zero.
func Outcomes() []string {
	return []string{OutcomeSigned, OutcomeFailed, OutcomeRetried, OutcomeConflict, OutcomeGone}
}

// Controller signs the approved CSRs of its signer names. Create it with New and call Run
// once; a later run (a new leader term) needs a new Controller.
type Controller struct {
	kube        kubeclient.Interface
	signer      Signer
	clock       clock.PassiveClock
	recorder    record.EventRecorder
	signedEvent bool // Signed Event for every certificate, not only after retries
	metrics     Metrics
	giveUpAfter time.Duration // ≤ 0: never give up

	loop *workloop.Loop

	// seen holds, by UID, when the informers first delivered each CSR approved and still to
	// be signed (see wants): the start of its issuance latency (see latencyStart). An entry
	// is forgotten once the CSR's status is written or the write dropped (see writeStatus),
	// when an event shows the CSR no longer to be signed, and when it is deleted.
	seenMu sync.Mutex
	seen   map[types.UID]time.Time
}

// New builds a Controller with one informer per signer name, each filtered by the field
// selector spec.signerName=<name> and stripped of managedFields (and finished CSRs of
// their request and certificate, see trim), all feeding one work queue
// keyed by CSR name with exponential per-item back-off (see workloop); the informers' events
// also record when each CSR was seen approved (see wants) and forget deleted ones. It
// returns an error without signer names, with a back-off that is not positive or whose max
// is below its initial delay, or whose max is not below the give-up deadline.
func New(kube kubeclient.Interface, signer Signer, opts Options) (*Controller, error) {
	giveUpAfter := opts.GiveUpAfter
	if giveUpAfter == 0 {
		giveUpAfter = DefaultGiveUpAfter
	}
	if giveUpAfter > 0 && opts.BackoffMax >= giveUpAfter {
		return nil, fmt.Errorf("creating CSR signing controller: back-off max %s is not below the give-up deadline %s", opts.BackoffMax, giveUpAfter)
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var metrics Metrics = workloop.NoMetrics{}
	if opts.Metrics != nil {
		metrics = opts.Metrics
	}
	c := &Controller{
		kube:        kube,
		signer:      signer,
		clock:       clk,
		recorder:    opts.Recorder,
		signedEvent: opts.SignedEventAlways,
		metrics:     metrics,
		giveUpAfter: giveUpAfter,
		seen:        make(map[types.UID]time.Time),
	}
	csrs := kube.CertificatesV1().CertificateSigningRequests()
	loop, err := workloop.New(workloop.Options{
		Kind: "CSR", QueueName: "signet_csr_signer", SignerNames: opts.SignerNames,
		BackoffInitial: opts.BackoffInitial, BackoffMax: opts.BackoffMax,
		Objects: workloop.ListWatch{
			List:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return csrs.List(ctx, o) },
			Watch:  func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return csrs.Watch(ctx, o) },
			Client: kube,
		},
		Object:  &certificatesv1.CertificateSigningRequest{},
		Wants:   c.wants,
		Deleted: c.deleted,
		Trim:    c.trim,
	})
	if err != nil {
		return nil, fmt.Errorf("creating CSR signing controller: %w", err)
	}
	c.loop = loop
	return c, nil
}

// Run starts the informers, waits for their caches, and runs workers until ctx is done; it
// then shuts the queue down and waits for the workers and informers to stop. It returns an
// error if workers is not positive or the caches could not sync.
func (c *Controller) Run(ctx context.Context, workers int) error {
	klog.FromContext(ctx).Info("Starting CSR signing controller", "signerNames", c.loop.SignerNames(), "workers", workers)
	if err := c.loop.Run(ctx, workers, c.sync); err != nil {
		return fmt.Errorf("running CSR signing controller: %w", err)
	}
	return nil
}
