// Package leader runs a function only while this process holds a coordination.k8s.io Lease,
// so that of several watcher replicas exactly one signs at a time and a standby takes over
// within one lease period when the leader dies.
package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLeaseLost is returned by Run when this process stopped leading without being asked to:
// the Lease could not be renewed within the renew deadline, or another holder took it. The
// process is expected to exit and start over.
var ErrLeaseLost = errors.New("leader election lost")

// Config is one leader election.
type Config struct {
	// Namespace and Name locate the Lease; both required.
	Namespace, Name string
	// Identity is this candidate's holderIdentity, unique among the candidates; required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader-election timings:
	// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Leases is the client of the Lease (kube.CoordinationV1()); required.
	Leases coordinationv1client.LeasesGetter
	// Recorder receives the "became leader" and "stopped leading" Events on the Lease; it
	// may be nil.
	Recorder resourcelock.EventRecorder
	// OnLeading, if set, is called with true when this process starts leading and with false
	// when it stops; calls never overlap.
	OnLeading func(leading bool)
}

// Run campaigns for the Lease until ctx is done. While it holds the Lease it runs lead with
// a context that ends when leadership ends or ctx is done. Run returns only after lead has
// returned, and releases the Lease only then, so a successor never overlaps a stopping
// leader that shuts down cleanly.
//
// Run returns nil when ctx ended (leading or not), lead's error if lead failed on its own
// (the Lease is released), and an error wrapping ErrLeaseLost if leadership was lost while
// ctx was still live. It returns an error at once if cfg is invalid.
func Run(ctx context.Context, cfg Config, lead func(context.Context) error) error {
	if cfg.Leases == nil || cfg.Namespace == "" || cfg.Name == "" || cfg.Identity == "" {
		return errors.New("leader election: namespace, name, identity and a Lease client are required")
	}
	logger := klog.FromContext(ctx).WithValues("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	// The election runs on a context of its own, cancelled only after lead has returned:
	// cancelling it releases the Lease (ReleaseOnCancel).
	electionCtx, cancelElection := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	defer cancelElection()

	r := &term{ctx: ctx, cancelElection: cancelElection, lead: lead, onLeading: cfg.OnLeading, done: make(chan struct{})}
	lock := &observedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity, EventRecorder: cfg.Recorder},
	}}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: r.run,
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// Stop campaigning when ctx ends, unless a term has started: then the term's end
	// cancels the election, after lead has returned.
	stopWatch := context.AfterFunc(ctx, r.cancelIfIdle)
	defer stopWatch()

	logger.Info("Campaigning for leadership")
	elector.Run(electionCtx)
	return r.result(lock.acquired.Load())
}

// observedLock records whether this candidate ever wrote itself as the holder: the elector
// calls OnStartedLeading, in a goroutine, exactly when that write succeeded.
type observedLock struct {
	resourcelock.Interface
	acquired atomic.Bool
}

// Create implements resourcelock.Interface.
func (l *observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.observe(ler, err)
	return err
}

// Update implements resourcelock.Interface.
func (l *observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.observe(ler, err)
	return err
}

func (l *observedLock) observe(ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && ler.HolderIdentity != "" && ler.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
}

// term is the state of one Run: at most one leadership term.
type term struct {
	ctx            context.Context
	cancelElection context.CancelFunc
	lead           func(context.Context) error
	onLeading      func(bool)
	done           chan struct{}

	mu       sync.Mutex
	started  bool
	leadErr  error
	leaseEnd bool // leadership ended while ctx was live
}

// cancelIfIdle ends the election if no term has started.
func (r *term) cancelIfIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.cancelElection()
	}
}

// run is OnStartedLeading: it runs lead until leadership ends (leaseCtx) or r.ctx ends, then
// cancels the election, which releases the Lease.
func (r *term) run(leaseCtx context.Context) {
	defer close(r.done)
	defer r.cancelElection()
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()

	logger := klog.FromContext(leaseCtx)
	logger.Info("Started leading")
	if r.onLeading != nil {
		r.onLeading(true)
		defer r.onLeading(false)
	}
	ctx, cancel := context.WithCancel(leaseCtx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	err := r.lead(ctx)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.leadErr = err
	r.leaseEnd = leaseCtx.Err() != nil && r.ctx.Err() == nil
	logger.Info("Stopped leading", "leaseLost", r.leaseEnd)
}

// result waits for the term, if the Lease was acquired, to end and returns Run's answer.
func (r *term) result(acquired bool) error {
	if !acquired {
		return nil
	}
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.leaseEnd:
		if r.leadErr != nil && !errors.Is(r.leadErr, context.Canceled) {
			return fmt.Errorf("%w: %w", ErrLeaseLost, r.leadErr)
		}
		return ErrLeaseLost
	case r.leadErr != nil && r.ctx.Err() == nil:
		return r.leadErr
	case r.leadErr != nil && !errors.Is(r.leadErr, context.Canceled):
		return r.leadErr
	}
	return nil
}
