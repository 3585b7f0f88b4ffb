package kubeclient_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/watcher/kubeclient"
)

// TestNewSharesOneRateLimiter: as a clientset, the clients share one token bucket of cfg's
// QPS and burst, so that the watcher's API writes are limited as a whole, not per API group.
func TestNewSharesOneRateLimiter(t *testing.T) {
	t.Parallel()
	kube, err := kubeclient.New(&rest.Config{Host: "https://127.0.0.1:6443", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	limiter := kube.CertificatesV1().RESTClient().GetRateLimiter()
	if limiter == nil || limiter.QPS() != 5 {
		t.Fatalf("certificates client rate limiter %v, want one of QPS 5", limiter)
	}
	for name, other := range map[string]rest.Interface{
		"certificates/v1beta1": kube.CertificatesV1beta1().RESTClient(),
		"coordination":         kube.CoordinationV1().RESTClient(),
		"core":                 kube.CoreV1().RESTClient(),
		"authorization":        kube.AuthorizationV1().RESTClient(),
	} {
		if other.GetRateLimiter() != limiter {
			t.Errorf("the %s client has its own rate limiter", name)
		}
	}
	if _, err := kubeclient.New(&rest.Config{Host: "https://127.0.0.1:6443", QPS: 5}); err == nil {
		t.Error("New accepted a QPS without a burst")
	}
}
