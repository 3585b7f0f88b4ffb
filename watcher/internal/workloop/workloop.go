// Package workloop is the machinery the signing controllers (csrsigner, pcrsigner) share: one
// informer per served signer name — filtered with the field selector spec.signerName=<name>,
// without periodic resync, stripped of managedFields — all feeding one work queue of
// namespace/name keys (name alone for cluster-scoped objects) with exponential per-key
// back-off, and the workers that drain it with the controller's sync function (handle).
package workloop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Metrics receives what a signing controller observes. Implementations must be safe for
// concurrent use.
type Metrics interface {
	// ObserveHandled counts one handled object of signerName by outcome (the controller's
	// Outcomes).
	ObserveHandled(signerName, outcome string)
	// ObserveIssuanceLatency observes the time from the object's start (for a CSR, when the
	// watcher saw it approved: see csrsigner; for a PodCertificateRequest, its creation) to
	// its certificate written.
	ObserveIssuanceLatency(signerName string, d time.Duration)
}

// NoMetrics is the Metrics of a controller configured without any: it records nothing.
type NoMetrics struct{}

// ObserveHandled does nothing.
func (NoMetrics) ObserveHandled(string, string) {}

// ObserveIssuanceLatency does nothing.
func (NoMetrics) ObserveIssuanceLatency(string, time.Duration) {}

// Options configures a Loop.
type Options struct {
	// Kind names the objects in logs and errors, e.g. "CSR".
	Kind string
	// QueueName names the work queue (its client-go workqueue metrics).
	QueueName string
	// SignerNames are the served spec.signerName values; at least one. Duplicates are ignored.
	SignerNames []string
	// BackoffInitial and BackoffMax bound the per-key exponential retry delay; both positive,
	// BackoffMax not below BackoffInitial.
	BackoffInitial, BackoffMax time.Duration
	// Objects lists and watches the controller's objects, in every namespace; the Loop sets
	// the field selector spec.signerName=<name> of each signer name's informer. Object is an
	// empty object of their type. The Loop reads the informers' caches (Cached,
	// OldestPending).
	Objects ListWatch
	Object  runtime.Object
	// Wants, if not nil, tells whether an added or updated object may need work; an object it
	// turns down is not queued (a key already queued stays, and its sync finds nothing to do).
	// It saves a queue round and a worker wake-up for the events that cannot need work (a CSR
	// created, not yet approved; the certificate just written). It must be cheap and must
	// never turn down an object that needs work: nothing else queues it.
	Wants func(obj any) bool
	// Deleted, if not nil, is told of every object deleted from an informer's cache, so that
	// the controller can forget what it keeps about it. It is given the object itself, also
	// when the informer missed the deletion (its last known state, unwrapped from
	// cache.DeletedFinalStateUnknown). It must be cheap; it does not change the queue (a key
	// already queued stays, and its sync finds the object gone).
	Deleted func(obj any)
	// Trim, if not nil, is called by the informers' transform on every object before it is
	// cached or handed to Wants: it may drop, in place, fields the controller never reads
	// again, so that a cache of thousands of finished objects stays small (a renewal storm
	// leaves them all in the cache until the cleaner deletes them). It must leave every field
	// Wants and the sync read from a finished object, and must not trim an object that may
	// still need work.
	Trim func(obj any)
}

// Loop runs the informers, the queue and the workers of one controller. Build it with New;
// Run it once.
type Loop struct {
	kind   string
	served map[string]bool

	backoffInitial, backoffMax time.Duration
	wants                      func(obj any) bool
	deleted                    func(obj any)

	informers []cache.SharedIndexInformer // one per signer name
	stop      context.CancelFunc          // stops the informers Start started
	running   sync.WaitGroup              // the informers Start started
	handles   []cache.ResourceEventHandlerRegistration
	queue     workqueue.TypedRateLimitingInterface[string]
}

// ListWatch lists and watches a controller's objects (a typed client's List and Watch).
type ListWatch struct {
	List  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	Watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// Client is the clientset List and Watch use: the informer asks it whether it supports
	// streaming lists (a fake clientset does not), as generated informers do.
	Client any
}

// New builds the Loop: one informer per signer name (no resync, managedFields dropped), which
// enqueues every added or updated object that Options.Wants accepts and tells Options.Deleted
// of every deleted one. It returns an error without signer names or with an invalid back-off.
func New(opts Options) (*Loop, error) {
	if len(opts.SignerNames) == 0 {
		return nil, errors.New("no signer names")
	}
	if opts.BackoffInitial <= 0 || opts.BackoffMax < opts.BackoffInitial {
		return nil, fmt.Errorf("invalid back-off %s..%s", opts.BackoffInitial, opts.BackoffMax)
	}
	l := &Loop{
		kind:           opts.Kind,
		served:         make(map[string]bool, len(opts.SignerNames)),
		backoffInitial: opts.BackoffInitial,
		backoffMax:     opts.BackoffMax,
		wants:          opts.Wants,
		deleted:        opts.Deleted,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.BackoffInitial, opts.BackoffMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.QueueName},
		),
	}
	for _, name := range opts.SignerNames {
		if l.served[name] {
			continue
		}
		l.served[name] = true
		informer, err := newInformer(opts, fields.OneTermEqualSelector("spec.signerName", name).String())
		if err != nil {
			return nil, fmt.Errorf("informer for %s: %w", name, err)
		}
		handle, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    l.enqueue,
			UpdateFunc: func(_, obj any) { l.enqueue(obj) },
			DeleteFunc: l.onDelete,
		})
		if err != nil {
			return nil, fmt.Errorf("adding event handler for %s: %w", name, err)
		}
		l.informers = append(l.informers, informer)
		l.handles = append(l.handles, handle)
	}
	return l, nil
}

// newInformer is the informer of the objects whose fields match selector, as a generated
// informer factory would build it: no resync, the namespace index, managedFields dropped.
func newInformer(opts Options, selector string) (cache.SharedIndexInformer, error) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return opts.Objects.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return opts.Objects.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, opts.Objects.Client), opts.Object, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	transform := dropManagedFields
	if opts.Trim != nil {
		transform = func(obj any) (any, error) {
			obj, err := dropManagedFields(obj)
			opts.Trim(obj)
			return obj, err
		}
	}
	if err := informer.SetTransform(transform); err != nil {
		return nil, err
	}
	return informer, nil
}

// dropManagedFields is the informers' transform: managedFields are never read here and are
// a large part of every cached object.
func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// enqueue adds the object's key to the queue, unless Options.Wants turns the object down.
func (l *Loop) enqueue(obj any) {
	if l.wants != nil && !l.wants(obj) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("queueing %s: %w", l.kind, err))
		return
	}
	l.queue.Add(key)
}

// onDelete passes a deleted object to Options.Deleted, if set, unwrapping the last known
// state of an object whose deletion the informer missed.
func (l *Loop) onDelete(obj any) {
	if l.deleted == nil {
		return
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	l.deleted(obj)
}

// Serves reports whether signerName is served.
func (l *Loop) Serves(signerName string) bool { return l.served[signerName] }

// SignerNames lists the served signer names, sorted.
func (l *Loop) SignerNames() []string { return slices.Sorted(maps.Keys(l.served)) }

// Cached returns the object with key (the queue's key: name, or namespace/name) from
// whichever signer name's cache holds it, or nil if none does.
func (l *Loop) Cached(key string) (any, error) {
	for _, inf := range l.informers {
		obj, exists, err := inf.GetIndexer().GetByKey(key)
		if err != nil {
			return nil, fmt.Errorf("getting %s %s from the cache: %w", l.kind, key, err)
		}
		if exists {
			return obj, nil
		}
	}
	return nil, nil
}

// OldestPending returns, for every served signer name, the largest age that pending reports
// over the cached objects, or 0 if it reports none. pending returns an object's signer name
// and age, and false for an object that is not pending (or not of the controller's type).
func (l *Loop) OldestPending(pending func(obj any) (signerName string, age time.Duration, ok bool)) map[string]time.Duration {
	oldest := make(map[string]time.Duration, len(l.served))
	for name := range l.served {
		oldest[name] = 0
	}
	for _, inf := range l.informers {
		for _, obj := range inf.GetStore().List() {
			if name, age, ok := pending(obj); ok && l.served[name] && age > oldest[name] {
				oldest[name] = age
			}
		}
	}
	return oldest
}

// Queue is the work queue, for the controller's retry bookkeeping (NumRequeues) and tests.
func (l *Loop) Queue() workqueue.TypedRateLimitingInterface[string] { return l.queue }

// QueueDepth is the number of keys waiting in the queue (not counting those waiting out their
// back-off, nor those being synced).
func (l *Loop) QueueDepth() int { return l.queue.Len() }

// HasSynced reports whether every informer's cache has synced and delivered its initial
// events. It is false before the informers are started.
func (l *Loop) HasSynced() bool {
	for _, h := range l.handles {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// RetryDelay is the back-off before the given attempt's retry, as the queue's exponential
// rate limiter computes it: BackoffInitial·2^(attempt−1), capped at BackoffMax.
func (l *Loop) RetryDelay(attempt int) time.Duration {
	d := float64(l.backoffInitial) * math.Pow(2, float64(attempt-1))
	if d >= float64(l.backoffMax) {
		return l.backoffMax
	}
	return time.Duration(d)
}

// Start starts the informers; Shutdown stops them.
func (l *Loop) Start(ctx context.Context) {
	ctx, l.stop = context.WithCancel(ctx)
	for _, inf := range l.informers {
		l.running.Go(func() { inf.RunWithContext(ctx) })
	}
}

// WaitForCacheSync waits until every handler has synced (its informer has, and every initial
// event has been delivered); false if ctx ends first.
func (l *Loop) WaitForCacheSync(ctx context.Context) bool {
	synced := make([]cache.DoneChecker, 0, len(l.handles))
	for _, h := range l.handles {
		synced = append(synced, h.HasSyncedChecker())
	}
	return cache.WaitFor(ctx, l.kind+" caches", synced...)
}

// Shutdown shuts the queue down and stops the informers, waiting for them.
func (l *Loop) Shutdown() {
	l.queue.ShutDown()
	if l.stop != nil {
		l.stop()
	}
	l.running.Wait()
}

// Run starts the informers, waits for their caches and runs workers calling sync for each key
// until ctx is done; it then shuts the queue down and waits for the workers and informers to
// stop. An error from handle (the controller's sync) re-queues the key with back-off (handle
// has logged why); success forgets its back-off. It returns an error if workers is not positive or the caches could not sync.
func (l *Loop) Run(ctx context.Context, workers int, handle func(ctx context.Context, key string) error) error {
	if workers < 1 {
		return fmt.Errorf("%d workers", workers)
	}
	defer utilruntime.HandleCrashWithContext(ctx)
	defer l.Shutdown()
	l.Start(ctx)
	if !l.WaitForCacheSync(ctx) {
		return fmt.Errorf("waiting for caches: %w", context.Cause(ctx))
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for l.processNextWorkItem(ctx, handle) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	klog.FromContext(ctx).Info("Stopping " + l.kind + " signing controller")
	l.queue.ShutDown()
	wg.Wait()
	return nil
}

// processNextWorkItem syncs one key. It returns false once the queue is shut down.
func (l *Loop) processNextWorkItem(ctx context.Context, handle func(context.Context, string) error) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	if err := handle(ctx, key); err != nil {
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}
