// Package looptest starts a workloop.Loop over a fake clientset for controller tests.
package looptest

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/signet-pki/signet/watcher/internal/workloop"
)

// NewClientset is fake.NewClientset whose watches deliver copies of the tracker's objects.
// client-go's tracker (v0.37, testing/fixture.go) hands a watch that starts after some objects
// were stored those very objects, uncopied; the informers' transform (workloop's
// dropManagedFields) changes what it is given, as client-go allows, and so raced the tracker's
// own readers (a Get deep-copying the same object) under -race. A real API server decodes a
// fresh object for every watch event.
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	kube := fake.NewClientset(objs...)
	kube.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := kube.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	})
	return kube
}

// Start starts loop's informers, stops them (and cancels ctx with cancel) when the test ends,
// and waits until their caches have synced. Give loop a clientset from NewClientset: a watch
// that registers after a test stored an object gets a copy of it. The queue is not drained: the
// test syncs keys itself.
func Start(t testing.TB, ctx context.Context, cancel context.CancelFunc, loop *workloop.Loop) {
	t.Helper()
	loop.Start(ctx)
	t.Cleanup(func() {
		cancel()
		loop.Shutdown()
	})
	if !loop.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
}

// Metrics records what a controller observes (a workloop.Metrics).
type Metrics struct {
	mu        sync.Mutex
	handled   []string // "signerName outcome"
	latencies []time.Duration
}

// ObserveHandled records "signerName outcome".
func (m *Metrics) ObserveHandled(signerName, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handled = append(m.handled, signerName+" "+outcome)
}

// ObserveIssuanceLatency records d.
func (m *Metrics) ObserveIssuanceLatency(_ string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.latencies = append(m.latencies, d)
}

// Outcomes returns the handled objects so far, as "signerName outcome", in order.
func (m *Metrics) Outcomes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.handled...)
}

// Latencies returns the issuance latencies so far, in order.
func (m *Metrics) Latencies() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Duration(nil), m.latencies...)
}

// Events drains rec and returns the Events it held, in order.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// WaitEvents returns the first n Events rec receives, in order, or fewer if timeout passes
// without a new one (for a controller running in the background).
func WaitEvents(rec *record.FakeRecorder, n int, timeout time.Duration) []string {
	var out []string
	for len(out) < n {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		case <-time.After(timeout):
			return out
		}
	}
	return out
}
