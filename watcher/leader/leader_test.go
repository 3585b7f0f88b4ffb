package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const testNamespace = "signet-system"

// testConfig is a fast election for identity on kube.
func testConfig(kube *fake.Clientset, identity string) Config {
	return Config{
		Namespace: testNamespace, Name: "signet-watcher", Identity: identity,
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Leases: kube.CoordinationV1(),
	}
}

// leading records OnLeading calls.
type leading struct {
	mu    sync.Mutex
	calls []bool
}

func (l *leading) record(v bool) { l.mu.Lock(); defer l.mu.Unlock(); l.calls = append(l.calls, v) }

func (l *leading) get() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.calls...)
}

func holder(t *testing.T, kube *fake.Clientset) string {
	t.Helper()
	lease, err := kube.CoordinationV1().Leases(testNamespace).Get(context.Background(), "signet-watcher", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Lease: %v", err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// runAsync starts Run and returns its result channel.
func runAsync(ctx context.Context, cfg Config, lead func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, lead) }()
	return done
}

func waitResult(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

// TestRunLeadsThenReleasesOnCancel: the only candidate leads; on cancel lead stops first,
// then the Lease is released, and Run returns nil.
func TestRunLeadsThenReleasesOnCancel(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := fake.NewClientset()
	cfg := testConfig(kube, "a")
	var rec leading
	cfg.OnLeading = rec.record

	started := make(chan struct{})
	var heldWhileStopping string
	done := runAsync(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		heldWhileStopping = holder(t, kube)
		return ctx.Err()
	})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the only candidate did not lead")
	}
	if got := holder(t, kube); got != "a" {
		t.Errorf("Lease holder = %q, want a", got)
	}
	cancel()
	if err := waitResult(t, done, 5*time.Second); err != nil {
		t.Errorf("Run() = %v, want nil after cancel", err)
	}
	if heldWhileStopping != "a" {
		t.Errorf("Lease holder while lead was stopping = %q, want a (released only after lead returned)", heldWhileStopping)
	}
	if got := holder(t, kube); got != "" {
		t.Errorf("Lease holder after Run = %q, want released", got)
	}
	if got := rec.get(); len(got) != 2 || !got[0] || got[1] {
		t.Errorf("OnLeading calls = %v, want [true false]", got)
	}
}

// TestRunReturnsLeadError: lead failing on its own ends the term with its error.
func TestRunReturnsLeadError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	boom := errors.New("caches did not sync")
	err := waitResult(t, runAsync(ctx, testConfig(kube, "a"), func(context.Context) error { return boom }), 5*time.Second)
	if !errors.Is(err, boom) || errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run() = %v, want %v", err, boom)
	}
	if got := holder(t, kube); got != "" {
		t.Errorf("Lease holder after a failed term = %q, want released", got)
	}
}

// TestRunLosesLease: a leader that cannot renew stops lead and returns ErrLeaseLost within
// the renew deadline.
func TestRunLosesLease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	var unreachable atomic.Bool
	kube.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if unreachable.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	cfg := testConfig(kube, "a")
	started := make(chan struct{})
	var leadCtxErr error
	done := runAsync(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		leadCtxErr = ctx.Err()
		return nil
	})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the only candidate did not lead")
	}
	// The apiserver becomes unreachable for this client.
	unreachable.Store(true)
	lost := time.Now()
	err := waitResult(t, done, 5*time.Second)
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run() = %v, want ErrLeaseLost", err)
	}
	if leadCtxErr == nil {
		t.Error("lead returned before its context ended")
	}
	if d := time.Since(lost); d > cfg.RenewDeadline+cfg.RetryPeriod+time.Second {
		t.Errorf("Run returned %s after renewals began failing, want about the renew deadline %s", d, cfg.RenewDeadline)
	}
}

// TestStandbyTakesOverAfterLeaseExpires: with the Lease held by a dead leader, a standby
// never leads before the lease duration has passed, and leads soon after.
func TestStandbyTakesOverAfterLeaseExpires(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	kube := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "signet-watcher"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("dead"), LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime: &now, RenewTime: &now,
		},
	})
	cfg := testConfig(kube, "b")
	begin := time.Now()
	tookOver := make(chan time.Time, 1)
	done := runAsync(ctx, cfg, func(ctx context.Context) error {
		tookOver <- time.Now()
		<-ctx.Done()
		return nil
	})
	select {
	case at := <-tookOver:
		if d := at.Sub(begin); d < cfg.LeaseDuration-cfg.RetryPeriod || d > cfg.LeaseDuration+3*cfg.RetryPeriod+500*time.Millisecond {
			t.Errorf("standby took over after %s, want about one lease duration (%s)", d, cfg.LeaseDuration)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("standby did not take over an expired Lease")
	}
	if got := holder(t, kube); got != "b" {
		t.Errorf("Lease holder = %q, want b", got)
	}
	cancel()
	if err := waitResult(t, done, 5*time.Second); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// TestStandbyReturnsOnCancel: a candidate that never leads returns nil when ctx ends,
// without calling lead.
func TestStandbyReturnsOnCancel(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := metav1.NewMicroTime(time.Now())
	kube := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "signet-watcher"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	})
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := waitResult(t, runAsync(ctx, testConfig(kube, "b"), func(context.Context) error {
		t.Error("a standby led")
		return nil
	}), 5*time.Second)
	if err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if got := holder(t, kube); got != "other" {
		t.Errorf("Lease holder = %q, want other (untouched)", got)
	}
}

func TestRunRejectsIncompleteConfig(t *testing.T) {
	kube := fake.NewClientset()
	for name, mutate := range map[string]func(*Config){
		"no namespace":     func(c *Config) { c.Namespace = "" },
		"no identity":      func(c *Config) { c.Identity = "" },
		"no client":        func(c *Config) { c.Leases = nil },
		"renew over lease": func(c *Config) { c.RenewDeadline = 2 * c.LeaseDuration },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(kube, "a")
			mutate(&cfg)
			if err := Run(context.Background(), cfg, func(context.Context) error { return nil }); err == nil {
				t.Error("Run() = nil, want an error")
			}
		})
	}
}
