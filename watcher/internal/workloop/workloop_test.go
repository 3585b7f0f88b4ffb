package workloop

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestRetryDelay(t *testing.T) {
	l := &Loop{backoffInitial: 250 * time.Millisecond, backoffMax: 30 * time.Second}
	for attempt, want := range map[int]time.Duration{
		1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 7: 16 * time.Second, 8: 30 * time.Second, 1000: 30 * time.Second,
	} {
		if got := l.RetryDelay(attempt); got != want {
			t.Errorf("RetryDelay(%d) = %s, want %s", attempt, got, want)
		}
	}
}

// TestNew: one informer per distinct signer name, sorted names, and the refusals.
func TestNew(t *testing.T) {
	objects, object := csrObjects(fake.NewClientset())
	l, err := New(Options{Kind: "CSR", SignerNames: []string{"b.example/x", "a.example/y", "b.example/x"},
		BackoffInitial: time.Millisecond, BackoffMax: time.Second, Objects: objects, Object: object})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.SignerNames(); len(got) != 2 || got[0] != "a.example/y" || got[1] != "b.example/x" || len(l.informers) != 2 {
		t.Errorf("SignerNames() = %v after %d informers, want [a.example/y b.example/x] after 2", got, len(l.informers))
	}
	if !l.Serves("a.example/y") || l.Serves("c.example/z") {
		t.Error("Serves answers wrongly")
	}
	for _, opts := range []Options{
		{BackoffInitial: time.Millisecond, BackoffMax: time.Second, Objects: objects, Object: object},
		{SignerNames: []string{"a.example/y"}, BackoffInitial: 0, BackoffMax: time.Second, Objects: objects, Object: object},
		{SignerNames: []string{"a.example/y"}, BackoffInitial: time.Second, BackoffMax: time.Millisecond, Objects: objects, Object: object},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

// TestWantsFiltersTheQueue: with Options.Wants, only the objects it accepts are queued.
func TestWantsFiltersTheQueue(t *testing.T) {
	const signer = "a.example/y"
	csr := func(name string, want bool) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"want": strconv.FormatBool(want)}},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer},
		}
	}
	kube := fake.NewClientset(csr("wanted", true), csr("not-wanted", false))
	objects, object := csrObjects(kube)
	l, err := New(Options{Kind: "CSR", SignerNames: []string{signer},
		BackoffInitial: time.Millisecond, BackoffMax: time.Second, Objects: objects, Object: object,
		Wants: func(obj any) bool {
			return obj.(*certificatesv1.CertificateSigningRequest).Labels["want"] == "true"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); l.Shutdown() }()
	l.Start(ctx)
	if !l.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	// Synced means every initial event has been delivered to the handler.
	if depth := l.QueueDepth(); depth != 1 {
		t.Fatalf("queue depth %d, want 1 (only the wanted CSR)", depth)
	}
	if key, _ := l.Queue().Get(); key != "wanted" {
		t.Errorf("queued %q, want %q", key, "wanted")
	}
}

// TestDeleted: Options.Deleted is told of an object deleted through the informer, and of the
// last known state inside a cache.DeletedFinalStateUnknown; without it, deletions are ignored.
func TestDeleted(t *testing.T) {
	const signer = "a.example/y"
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer},
	}
	kube := fake.NewClientset(csr)
	deleted := make(chan string, 3)
	watching := make(chan struct{})
	var once sync.Once
	objects, object := csrObjects(kube)
	l, err := New(Options{Kind: "CSR", SignerNames: []string{signer},
		BackoffInitial: time.Millisecond, BackoffMax: time.Second, Objects: objects, Object: object,
		Wants: func(obj any) bool {
			if obj.(*certificatesv1.CertificateSigningRequest).Labels["touched"] == "yes" {
				once.Do(func() { close(watching) })
			}
			return true
		},
		Deleted: func(obj any) {
			name := "not a CSR"
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
				name = csr.Name
			}
			deleted <- name
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	l.onDelete(cache.DeletedFinalStateUnknown{Key: "missed", Obj: &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "missed"},
	}})
	if got := <-deleted; got != "missed" {
		t.Errorf("Deleted got %q from a tombstone, want %q", got, "missed")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); l.Shutdown() }()
	l.Start(ctx)
	if !l.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	// The fake's tracker replays to a new watch the objects changed since the list, but not
	// the deletions: wait until a change comes through, so the informer watches.
	csrs := kube.CertificatesV1().CertificateSigningRequests()
	touched := csr.DeepCopy()
	touched.Labels = map[string]string{"touched": "yes"}
	if _, err := csrs.Update(ctx, touched, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not see the update")
	}
	if err := csrs.Delete(ctx, "csr", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-deleted:
		if got != "csr" {
			t.Errorf("Deleted got %q, want %q", got, "csr")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deleted was not called for a deleted object")
	}

	(&Loop{}).onDelete(csr) // no Deleted: ignored
}

// csrObjects lists and watches kube's CSRs, for Options.Objects and Options.Object.
func csrObjects(kube *fake.Clientset) (ListWatch, runtime.Object) {
	csrs := kube.CertificatesV1().CertificateSigningRequests()
	return ListWatch{
		List:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return csrs.List(ctx, o) },
		Watch:  func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return csrs.Watch(ctx, o) },
		Client: kube,
	}, &certificatesv1.CertificateSigningRequest{}
}
