// Package csrsigner is the controller that signs approved CertificateSigningRequests for the
// served signer names: it forwards each one to the signing server and writes the chain, or a
// Failed condition for a terminal refusal, into the object's status.
package csrsigner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/watcher/signerclient"
)

// FieldManager is the field manager of every status write.
const FieldManager = "signet-watcher"

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

// Metrics receives what the controller observes. Implementations must be safe for
// concurrent use.
type Metrics interface {
	// ObserveHandled counts one handled CSR of signerName by outcome: OutcomeSigned,
	// OutcomeFailed, OutcomeRetried, OutcomeConflict or OutcomeGone.
	ObserveHandled(signerName, outcome string)
	// ObserveIssuanceLatency observes the time from approval (the Approved condition's
	// lastUpdateTime, else the object's creation) to the certificate written in status.
	ObserveIssuanceLatency(signerName string, d time.Duration)
}

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

// noMetrics is the Metrics used when Options.Metrics is nil.
type noMetrics struct{}

func (noMetrics) ObserveHandled(string, string)                {}
func (noMetrics) ObserveIssuanceLatency(string, time.Duration) {}

// Controller signs the approved CSRs of its signer names. Create it with New and call Run
// once; a later run (a new leader term) needs a new Controller.
type Controller struct {
	kube        kubernetes.Interface
	signer      Signer
	clock       clock.PassiveClock
	recorder    record.EventRecorder
	signedEvent bool // Signed Event for every certificate, not only after retries
	metrics     Metrics
	signerNames map[string]bool

	backoffInitial, backoffMax time.Duration
	giveUpAfter                time.Duration // ≤ 0: never give up

	factories []informers.SharedInformerFactory
	listers   []certificateslisters.CertificateSigningRequestLister
	handles   []cache.ResourceEventHandlerRegistration

	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds a Controller with one informer per signer name, each filtered by the field
// selector spec.signerName=<name> and stripped of managedFields, all feeding one work queue
// keyed by CSR name with exponential per-item back-off. It returns an error without signer
// names, with a back-off that is not positive or whose max is below its initial delay, or
// whose max is not below the give-up deadline.
func New(kube kubernetes.Interface, signer Signer, opts Options) (*Controller, error) {
	if len(opts.SignerNames) == 0 {
		return nil, errors.New("creating CSR signing controller: no signer names")
	}
	if opts.BackoffInitial <= 0 || opts.BackoffMax < opts.BackoffInitial {
		return nil, fmt.Errorf("creating CSR signing controller: invalid back-off %s..%s", opts.BackoffInitial, opts.BackoffMax)
	}
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
	var metrics Metrics = noMetrics{}
	if opts.Metrics != nil {
		metrics = opts.Metrics
	}
	c := &Controller{
		kube:           kube,
		signer:         signer,
		clock:          clk,
		recorder:       opts.Recorder,
		signedEvent:    opts.SignedEventAlways,
		metrics:        metrics,
		signerNames:    make(map[string]bool, len(opts.SignerNames)),
		backoffInitial: opts.BackoffInitial,
		backoffMax:     opts.BackoffMax,
		giveUpAfter:    giveUpAfter,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.BackoffInitial, opts.BackoffMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "signet_csr_signer"},
		),
	}
	for _, name := range opts.SignerNames {
		if c.signerNames[name] {
			continue
		}
		c.signerNames[name] = true
		if err := c.addInformer(kube, name); err != nil {
			return nil, fmt.Errorf("creating CSR signing controller for %s: %w", name, err)
		}
	}
	return c, nil
}

// addInformer creates the informer factory for one signer name, without periodic resync, and
// registers the handlers.
func (c *Controller) addInformer(kube kubernetes.Interface, signerName string) error {
	selector := fields.OneTermEqualSelector("spec.signerName", signerName).String()
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }),
		informers.WithTransform(dropManagedFields),
	)
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	handle, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	if err != nil {
		return fmt.Errorf("adding event handler: %w", err)
	}
	c.factories = append(c.factories, factory)
	c.listers = append(c.listers, csrs.Lister())
	c.handles = append(c.handles, handle)
	return nil
}

// dropManagedFields is the informers' transform: managedFields are never read here and are
// a large part of every cached object.
func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// enqueue adds the CSR's name to the queue.
func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("queueing CSR: %w", err))
		return
	}
	c.queue.Add(key)
}

// Run starts the informers, waits for their caches, and runs workers until ctx is done; it
// then shuts the queue down and waits for the workers and informers to stop. It returns an
// error if workers is not positive or the caches could not sync.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		return fmt.Errorf("running CSR signing controller: %d workers", workers)
	}
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	defer func() {
		for _, f := range c.factories {
			f.Shutdown()
		}
	}()
	defer c.queue.ShutDown()

	logger.Info("Starting CSR signing controller", "signerNames", c.servedNames(), "workers", workers)
	for _, f := range c.factories {
		f.StartWithContext(ctx)
	}
	// A handler has synced once its informer has and every initial event has been delivered.
	synced := make([]cache.DoneChecker, 0, len(c.handles))
	for _, h := range c.handles {
		synced = append(synced, h.HasSyncedChecker())
	}
	if !cache.WaitFor(ctx, "CSR caches", synced...) {
		return fmt.Errorf("running CSR signing controller: waiting for caches: %w", context.Cause(ctx))
	}

	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	logger.Info("Stopping CSR signing controller")
	c.queue.ShutDown()
	for range workers {
		<-done
	}
	return nil
}

// runWorker processes items until the queue shuts down.
func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem syncs one CSR. An error re-queues it with back-off (sync has logged
// why); success forgets its back-off. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// servedNames lists the served signer names, for logs.
func (c *Controller) servedNames() []string {
	return slices.Sorted(maps.Keys(c.signerNames))
}
