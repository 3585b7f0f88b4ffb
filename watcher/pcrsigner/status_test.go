package pcrsigner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/signet-pki/signet/watcher/internal/looptest"
)

var pcrGR = schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}

// failStatusOnce makes the first status write fail with err, after calling meanwhile (if
// not nil), which changes the stored object as another writer would have.
func failStatusOnce(t *testing.T, kube *fake.Clientset, err error, meanwhile func(clienttesting.ObjectTracker)) {
	t.Helper()
	var once sync.Once
	kube.PrependReactor("update", "podcertificaterequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		handled := false
		once.Do(func() {
			handled = true
			if meanwhile != nil {
				meanwhile(kube.Tracker())
			}
		})
		if !handled {
			return false, nil, nil
		}
		return true, nil, err
	})
}

// change returns a meanwhile that applies mutate to the stored object.
func change(t *testing.T, mutate func(*certificatesv1.PodCertificateRequest)) func(clienttesting.ObjectTracker) {
	return func(tracker clienttesting.ObjectTracker) {
		obj, err := tracker.Get(pcrGVR, testNS, "pcr")
		if err != nil {
			t.Errorf("tracker get: %v", err)
			return
		}
		p := obj.(*certificatesv1.PodCertificateRequest).DeepCopy()
		mutate(p)
		if err := tracker.Update(pcrGVR, p, testNS); err != nil {
			t.Errorf("tracker update: %v", err)
		}
	}
}

// TestStatusConflict: after a Conflict the object is read again and the write decided again,
// without asking the signer twice.
func TestStatusConflict(t *testing.T) {
	tests := []struct {
		name        string
		meanwhile   func(t *testing.T) func(clienttesting.ObjectTracker)
		wantWrites  int // after the conflicting one
		wantOutcome string
		wantChain   string
	}{
		{name: "unrelated change: written on the fresh object",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(p *certificatesv1.PodCertificateRequest) { p.Labels = map[string]string{"touched": "yes"} })
			},
			wantWrites: 1, wantOutcome: OutcomeSigned, wantChain: testChain},
		{name: "issued meanwhile: not overwritten",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(p *certificatesv1.PodCertificateRequest) { withCondition("Issued")(p); withChain(p) })
			},
			wantOutcome: OutcomeConflict, wantChain: "existing"},
		{name: "denied meanwhile: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, withCondition("Denied"))
			},
			wantOutcome: OutcomeConflict},
		{name: "spec changed: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(p *certificatesv1.PodCertificateRequest) { p.Spec.StubPKCS10Request = []byte("another key") })
			},
			wantOutcome: OutcomeConflict},
		{name: "replaced: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return func(tracker clienttesting.ObjectTracker) {
					if err := tracker.Delete(pcrGVR, testNS, "pcr"); err != nil {
						t.Errorf("tracker delete: %v", err)
					}
					replacement := newPCR("pcr")
					replacement.UID = types.UID("uid-replacement")
					if err := tracker.Add(replacement); err != nil {
						t.Errorf("tracker add: %v", err)
					}
				}
			},
			wantOutcome: OutcomeGone},
		{name: "deleted: dropped",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return func(tracker clienttesting.ObjectTracker) {
					if err := tracker.Delete(pcrGVR, testNS, "pcr"); err != nil {
						t.Errorf("tracker delete: %v", err)
					}
				}
			},
			wantOutcome: OutcomeGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signer := &fakeSigner{}
			metrics := &looptest.Metrics{}
			c, kube, ctx := newTestController(t, signer, V1, func(o *Options) { o.Metrics = metrics }, newPCR("pcr"))
			failStatusOnce(t, kube, apierrors.NewConflict(pcrGR, "pcr", errors.New("modified")), tt.meanwhile(t))

			if err := c.sync(ctx, testKey); err != nil {
				t.Fatalf("sync() = %v, want nil", err)
			}
			if got := signer.callCount(); got != 1 {
				t.Errorf("signer called %d times, want 1", got)
			}
			if got := len(statusUpdates(t, kube)) - 1; got != tt.wantWrites {
				t.Errorf("%d status writes after the conflict, want %d", got, tt.wantWrites)
			}
			if got := metrics.Outcomes(); !slices.Equal(got, []string{servedSigner + " " + tt.wantOutcome}) {
				t.Errorf("outcomes = %v, want [%s %s]", got, servedSigner, tt.wantOutcome)
			}
			stored, err := kube.CertificatesV1().PodCertificateRequests(testNS).Get(ctx, "pcr", metav1.GetOptions{})
			if err == nil && stored.UID == "uid-pcr" && stored.Status.CertificateChain != tt.wantChain {
				t.Errorf("stored chain %q, want %q", stored.Status.CertificateChain, tt.wantChain)
			}
		})
	}
}

// invalidStatus is the 422 the API server answers for a notBefore too far from its clock.
func invalidStatus() error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"}, "pcr",
		field.ErrorList{field.Invalid(field.NewPath("status", "notBefore"), "2026-05-04T11:50:00Z", "must be within 5 minutes of now")})
}

// TestStatusRejected: a 422 is logged with the API server's reason and retried once (a fresh
// answer from the signer); a second 422 in a row drops the object, never writing Failed.
func TestStatusRejected(t *testing.T) {
	signer := &fakeSigner{}
	metrics := &looptest.Metrics{}
	rec := record.NewFakeRecorder(10)
	c, kube, ctx := newTestController(t, signer, V1, func(o *Options) { o.Metrics, o.Recorder = metrics, rec }, newPCR("pcr"))
	kube.PrependReactor("update", "podcertificaterequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return action.GetSubresource() == "status", nil, invalidStatus()
	})

	err := c.sync(ctx, testKey)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("first sync() = %v, want the Invalid error (re-queued)", err)
	}
	reason := "status.notBefore: Invalid value: \"2026-05-04T11:50:00Z\": must be within 5 minutes of now"
	if got := looptest.Events(rec); len(got) != 1 || !strings.Contains(got[0], "Warning StatusRejected") || !strings.Contains(got[0], reason) ||
		!strings.HasSuffix(got[0], "retrying once") {
		t.Errorf("events = %q, want one StatusRejected naming %q", got, reason)
	}
	if err := c.sync(ctx, testKey); err != nil {
		t.Fatalf("second sync() = %v, want nil (dropped)", err)
	}
	if got := looptest.Events(rec); len(got) != 1 || !strings.HasSuffix(got[0], "no longer retried") {
		t.Errorf("events = %q, want one StatusRejected, no longer retried", got)
	}
	if got := signer.callCount(); got != 2 {
		t.Errorf("signer called %d times, want 2 (a fresh answer for the retry)", got)
	}
	if got, want := metrics.Outcomes(), []string{servedSigner + " retried", servedSigner + " rejected"}; !slices.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	for _, st := range statusUpdates(t, kube) {
		for _, cond := range st.Conditions {
			if cond.Type == "Failed" {
				t.Errorf("Failed written: %+v", cond)
			}
		}
	}
	// A third sync (a later update of the object) starts over: one more try.
	if err := c.sync(ctx, testKey); !apierrors.IsInvalid(err) {
		t.Errorf("third sync() = %v, want a fresh first rejection", err)
	}
}

// TestStatusRejectedThenIssued: after one 422 the retry's write succeeds.
func TestStatusRejectedThenIssued(t *testing.T) {
	metrics := &looptest.Metrics{}
	c, kube, ctx := newTestController(t, &fakeSigner{}, V1, func(o *Options) { o.Metrics = metrics }, newPCR("pcr"))
	failStatusOnce(t, kube, invalidStatus(), nil)
	if err := c.sync(ctx, testKey); !apierrors.IsInvalid(err) {
		t.Fatalf("first sync() = %v, want Invalid", err)
	}
	if err := c.sync(ctx, testKey); err != nil {
		t.Fatalf("second sync() = %v, want nil", err)
	}
	if got, want := metrics.Outcomes(), []string{servedSigner + " retried", servedSigner + " signed"}; !slices.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	if len(c.rejected) != 0 {
		t.Errorf("rejections remembered after success: %v", c.rejected)
	}
}

func TestStatusWriteErrors(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantErr     bool
		wantOutcome string
	}{
		{"repeated conflict is re-queued", apierrors.NewConflict(pcrGR, "pcr", errors.New("modified")), true, OutcomeRetried},
		{"not found is dropped", apierrors.NewNotFound(pcrGR, "pcr"), false, OutcomeGone},
		{"forbidden is re-queued", apierrors.NewForbidden(pcrGR, "pcr", errors.New("no update on podcertificaterequests/status")), true, OutcomeRetried},
		{"server error is re-queued", apierrors.NewInternalError(errors.New("etcd")), true, OutcomeRetried},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			metrics := &looptest.Metrics{}
			c, kube, ctx := newTestController(t, &fakeSigner{}, V1, func(o *Options) { o.Metrics = metrics }, newPCR("pcr"))
			kube.PrependReactor("update", "podcertificaterequests", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			if err := c.sync(ctx, testKey); (err != nil) != tt.wantErr {
				t.Errorf("sync() = %v, want error %v", err, tt.wantErr)
			}
			if got := metrics.Outcomes(); !slices.Equal(got, []string{servedSigner + " " + tt.wantOutcome}) {
				t.Errorf("outcomes = %v, want %s", got, tt.wantOutcome)
			}
		})
	}
}

// TestWantsAfterRejection: the queue filter turns down objects that sync would skip (signed
// elsewhere, another signer), except one whose status write was refused once: its next
// event is queued so that sync forgets the rejection, and after that it is turned down again.
func TestWantsAfterRejection(t *testing.T) {
	c, kube, ctx := newTestController(t, &fakeSigner{}, V1, nil, newPCR("pcr"))
	issued := newPCR("pcr", withCondition("Issued"), withChain)
	if !c.wants(newPCR("pcr")) {
		t.Error("wants(pending) = false, want true")
	}
	if c.wants(issued) || c.wants(newPCR("other", withSigner("example.com/other"))) {
		t.Error("wants() = true for an issued object or another signer's, want false")
	}

	kube.PrependReactor("update", "podcertificaterequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return action.GetSubresource() == "status", nil, invalidStatus()
	})
	if err := c.sync(ctx, testKey); !apierrors.IsInvalid(err) {
		t.Fatalf("sync() = %v, want the Invalid error", err)
	}
	if !c.wants(issued) {
		t.Error("wants(issued after a rejection) = false, want true (sync must forget the rejection)")
	}
	if err := kube.Tracker().Update(certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests"), issued, testNS); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, err := c.get(testNS, "pcr")
		return r != nil && hasCondition(r, "Issued"), err
	})
	if err != nil {
		t.Fatalf("the cache did not see the issued object: %v", err)
	}
	if err := c.sync(ctx, testKey); err != nil {
		t.Fatalf("sync(issued) = %v, want nil", err)
	}
	if c.wants(issued) {
		t.Error("wants(issued) = true after sync skipped it, want false")
	}
}
