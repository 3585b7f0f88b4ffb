package pcrsigner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/signet-pki/signet/watcher/internal/looptest"
)

// served lists the given group versions as serving the named resources in the fake's
// discovery.
func served(kube *fake.Clientset, resources map[string][]string) {
	for gv, names := range resources {
		list := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: n, Namespaced: true})
		}
		kube.Resources = append(kube.Resources, list)
	}
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name      string
		resources map[string][]string
		want      APIVersion
	}{
		{"1.37: v1", map[string][]string{"certificates.k8s.io/v1": {"certificatesigningrequests", "podcertificaterequests", "podcertificaterequests/status"}}, V1},
		{"1.37 with v1beta1 on: v1 preferred", map[string][]string{
			"certificates.k8s.io/v1": {"podcertificaterequests"}, "certificates.k8s.io/v1beta1": {"podcertificaterequests"},
		}, V1},
		{"1.36: v1beta1", map[string][]string{
			"certificates.k8s.io/v1": {"certificatesigningrequests"}, "certificates.k8s.io/v1beta1": {"clustertrustbundles", "podcertificaterequests"},
		}, V1beta1},
		{"1.36 without the feature gate", map[string][]string{
			"certificates.k8s.io/v1": {"certificatesigningrequests"}, "certificates.k8s.io/v1beta1": {"clustertrustbundles"},
		}, NotServed},
		{"1.34: no v1beta1 group version", map[string][]string{"certificates.k8s.io/v1": {"certificatesigningrequests"}}, NotServed},
		{"nothing", nil, NotServed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			served(kube, tt.resources)
			got, err := Discover(context.Background(), kube.Discovery())
			if err != nil || got != tt.want {
				t.Errorf("Discover() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestDiscoverError(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if got, err := Discover(context.Background(), kube.Discovery()); err == nil {
		t.Errorf("Discover() = %q, nil; want the discovery error", got)
	}
}

// allowReviews answers SelfSubjectAccessReviews: allowed unless "verb resource[/sub]" is in
// denied; it records the attributes asked.
func allowReviews(kube *fake.Clientset, denied ...string) *[]authorizationv1.ResourceAttributes {
	var asked []authorizationv1.ResourceAttributes
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		review := action.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		a := review.Spec.ResourceAttributes
		asked = append(asked, *a)
		name := a.Verb + " " + a.Resource
		if a.Subresource != "" {
			name += "/" + a.Subresource
		}
		review.Status.Allowed = !slices.Contains(denied, name)
		return true, review, nil
	})
	return &asked
}

func TestMissingPermissions(t *testing.T) {
	kube := fake.NewClientset()
	asked := allowReviews(kube)
	missing, err := MissingPermissions(context.Background(), kube, V1beta1)
	if err != nil || len(missing) != 0 {
		t.Errorf("all allowed: MissingPermissions() = %v, %v; want none", missing, err)
	}
	for _, a := range *asked {
		if a.Group != "certificates.k8s.io" || a.Version != "v1beta1" || a.Resource != "podcertificaterequests" || a.Namespace != "" {
			t.Errorf("asked %+v, want v1beta1 podcertificaterequests in every namespace", a)
		}
	}

	kube = fake.NewClientset()
	allowReviews(kube, "get podcertificaterequests", "watch podcertificaterequests", "update podcertificaterequests/status")
	missing, err = MissingPermissions(context.Background(), kube, V1)
	if want := []string{"get podcertificaterequests", "watch podcertificaterequests", "update podcertificaterequests/status"}; err != nil || !slices.Equal(missing, want) {
		t.Errorf("MissingPermissions() = %v, %v; want %v", missing, err, want)
	}

	kube = fake.NewClientset()
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	if _, err := MissingPermissions(context.Background(), kube, V1); err == nil {
		t.Error("MissingPermissions() succeeded although the review failed")
	}
}

// TestSyncV1beta1 runs the ladder on certificates.k8s.io/v1beta1 (Kubernetes 1.35–1.36): a
// request naming its key by PKIX key and proof of possession is forwarded as such, and
// Issued and Denied are written through the v1beta1 status subresource.
func TestSyncV1beta1(t *testing.T) {
	t.Run("issued", func(t *testing.T) {
		signer := &fakeSigner{}
		c, kube, ctx := newTestController(t, signer, V1beta1, nil, newBetaPCR("pcr"))
		if err := c.sync(ctx, testKey); err != nil {
			t.Fatalf("sync() = %v", err)
		}
		call := signer.calls[0]
		if string(call.PKIXPublicKey) != "spki" || string(call.ProofOfPossession) != "pop" || call.StubPKCS10Request != nil ||
			call.PodUID != "pod-uid" || call.UID != "uid-pcr" {
			t.Errorf("signer got %+v, want the PKIX key, proof of possession and identity", call)
		}
		stored, err := kube.CertificatesV1beta1().PodCertificateRequests(testNS).Get(ctx, "pcr", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := certificatesv1.PodCertificateRequestStatus(stored.Status); !equality.Semantic.DeepEqual(got, issuedStatus(issuedMessage)) {
			t.Errorf("stored status =\n%+v\nwant\n%+v", got, issuedStatus(issuedMessage))
		}
		for _, a := range kube.Actions() {
			if a.GetVerb() == "update" && a.GetResource().Version != "v1beta1" {
				t.Errorf("write through %s, want v1beta1", a.GetResource())
			}
		}
	})
	t.Run("denied, and skipped once terminal", func(t *testing.T) {
		signer := &fakeSigner{errs: []error{grpcError(t, codes.InvalidArgument, "UNSUPPORTED_KEY", "RSA-4096 is not accepted")}}
		rec := record.NewFakeRecorder(10)
		c, kube, ctx := newTestController(t, signer, V1beta1, func(o *Options) { o.Recorder = rec }, newBetaPCR("pcr"))
		if err := c.sync(ctx, testKey); err != nil {
			t.Fatalf("sync() = %v", err)
		}
		updates := statusUpdates(t, kube)
		if len(updates) != 1 || !equality.Semantic.DeepEqual(updates[0], deniedStatus("UnsupportedKeyType", "RSA-4096 is not accepted")) {
			t.Errorf("status writes = %+v, want one Denied UnsupportedKeyType", updates)
		}
		if got := looptest.Events(rec); !slices.Equal(got, []string{"Warning UnsupportedKeyType RSA-4096 is not accepted"}) {
			t.Errorf("events = %q", got)
		}
		// The write reaches the cache through the watch; then the object is skipped.
		waitCached(t, c, func(r *request) bool { return hasCondition(r, "Denied") })
		if err := c.sync(ctx, testKey); err != nil || signer.callCount() != 1 {
			t.Errorf("sync of a Denied object: %v, %d calls; want skipped", err, signer.callCount())
		}
	})
}

// waitCached waits until the cached test object satisfies done.
func waitCached(t *testing.T, c *Controller, done func(*request) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := c.get(testNS, "pcr"); err == nil && r != nil && done(r) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the cache never showed the change")
}

// TestReadOuts checks QueueDepth, HasSynced and OldestPending (the gauges) on both versions.
func TestReadOuts(t *testing.T) {
	for _, version := range []APIVersion{V1, V1beta1} {
		t.Run(string(version), func(t *testing.T) {
			objs := []runtime.Object{
				newPCR("old", createdAt(testNow.Add(-7*time.Minute))),
				newPCR("new", createdAt(testNow.Add(-time.Minute))),
				newPCR("older-issued", createdAt(testNow.Add(-9*time.Minute)), withCondition("Issued"), withChain),
				newPCR("oldest-other", createdAt(testNow.Add(-14*time.Minute)), withSigner(otherSigner)),
			}
			if version == V1beta1 {
				objs = []runtime.Object{betaCreatedAt("old", testNow.Add(-7*time.Minute)), betaCreatedAt("new", testNow.Add(-time.Minute))}
			}
			c, _, _ := newTestController(t, &fakeSigner{}, version, nil, objs...)
			if !c.HasSynced() {
				t.Error("HasSynced() = false after the caches synced")
			}
			if got := c.OldestPending(); len(got) != 1 || got[servedSigner] != 7*time.Minute {
				t.Errorf("OldestPending() = %v, want %s: 7m", got, servedSigner)
			}
			c.loop.Queue().Add("a/b")
			if got := c.QueueDepth(); got < 1 {
				t.Errorf("QueueDepth() = %d, want at least 1", got)
			}
		})
	}
}

func betaCreatedAt(name string, created time.Time) *certificatesv1beta1.PodCertificateRequest {
	p := newBetaPCR(name)
	p.CreationTimestamp = metav1.NewTime(created)
	return p
}
