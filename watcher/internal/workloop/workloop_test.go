package workloop

import (
	"testing"
	"time"

	"k8s.io/client-go/informers"
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
	calls := 0
	informer := func(_ string, f informers.SharedInformerFactory) cache.SharedIndexInformer {
		calls++
		return f.Certificates().V1().CertificateSigningRequests().Informer()
	}
	l, err := New(fake.NewClientset(), Options{Kind: "CSR", SignerNames: []string{"b.example/x", "a.example/y", "b.example/x"},
		BackoffInitial: time.Millisecond, BackoffMax: time.Second, Informer: informer})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.SignerNames(); len(got) != 2 || got[0] != "a.example/y" || got[1] != "b.example/x" || calls != 2 {
		t.Errorf("SignerNames() = %v after %d informers, want [a.example/y b.example/x] after 2", got, calls)
	}
	if !l.Serves("a.example/y") || l.Serves("c.example/z") {
		t.Error("Serves answers wrongly")
	}
	for _, opts := range []Options{
		{BackoffInitial: time.Millisecond, BackoffMax: time.Second, Informer: informer},
		{SignerNames: []string{"a.example/y"}, BackoffInitial: 0, BackoffMax: time.Second, Informer: informer},
		{SignerNames: []string{"a.example/y"}, BackoffInitial: time.Second, BackoffMax: time.Millisecond, Informer: informer},
	} {
		if _, err := New(fake.NewClientset(), opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}
