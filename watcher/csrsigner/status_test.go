package csrsigner

import (
	"errors"
	"sync"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/signet-pki/signet/watcher/internal/looptest"
)

var csrGVR = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

// conflictOnce makes the first status update of the CSR fail with Conflict after calling
// meanwhile, which changes the stored object as another writer would have.
func conflictOnce(t *testing.T, kube *fake.Clientset, meanwhile func(tracker clienttesting.ObjectTracker)) {
	t.Helper()
	var once sync.Once
	kube.PrependReactor("update", "certificatesigningrequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		handled := false
		once.Do(func() {
			handled = true
			meanwhile(kube.Tracker())
		})
		if !handled {
			return false, nil, nil
		}
		gr := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
		return true, nil, apierrors.NewConflict(gr, "csr", errors.New("the object has been modified"))
	})
}

// change replaces the stored CSR "csr" with its copy changed by mutate.
func change(t *testing.T, mutate func(*certificatesv1.CertificateSigningRequest)) func(clienttesting.ObjectTracker) {
	return func(tracker clienttesting.ObjectTracker) {
		obj, err := tracker.Get(csrGVR, "", "csr")
		if err != nil {
			t.Errorf("tracker get: %v", err)
			return
		}
		csr := obj.(*certificatesv1.CertificateSigningRequest).DeepCopy()
		mutate(csr)
		if err := tracker.Update(csrGVR, csr, ""); err != nil {
			t.Errorf("tracker update: %v", err)
		}
	}
}

// TestStatusConflict injects a Conflict on the first status write, after changing the stored
// object, and checks that the controller reads it again and decides: write once more on the
// fresh object without asking the signer again, or drop without writing.
func TestStatusConflict(t *testing.T) {
	tests := []struct {
		name        string
		signErrs    []error
		meanwhile   func(t *testing.T) func(clienttesting.ObjectTracker)
		wantWrites  int // status updates after the conflicting one
		wantOutcome string
		check       func(t *testing.T, stored *certificatesv1.CertificateSigningRequest)
	}{
		{name: "unrelated change: chain written on the fresh object",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(csr *certificatesv1.CertificateSigningRequest) { csr.Labels = map[string]string{"touched": "yes"} })
			},
			wantWrites: 1, wantOutcome: OutcomeSigned,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if string(stored.Status.Certificate) != testChain || stored.Labels["touched"] != "yes" {
					t.Errorf("stored certificate %q, labels %v; want the chain on the fresh object", stored.Status.Certificate, stored.Labels)
				}
			}},
		{name: "terminal refusal: Failed written on the fresh object",
			signErrs: []error{terminalError(t, "UNSUPPORTED_KEY", "RSA-2048 is below the minimum")},
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(csr *certificatesv1.CertificateSigningRequest) { csr.Labels = map[string]string{"touched": "yes"} })
			},
			wantWrites: 1, wantOutcome: OutcomeFailed,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if !hasCondition(stored, certificatesv1.CertificateFailed) || stored.Labels["touched"] != "yes" {
					t.Errorf("stored conditions %v, labels %v; want Failed on the fresh object", stored.Status.Conditions, stored.Labels)
				}
			}},
		{name: "denied meanwhile: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, withCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue))
			},
			wantOutcome: OutcomeConflict,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if len(stored.Status.Certificate) != 0 {
					t.Errorf("certificate written on a denied CSR")
				}
			}},
		{name: "signed meanwhile: certificate not overwritten",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, withCertificate)
			},
			wantOutcome: OutcomeConflict,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if string(stored.Status.Certificate) != "existing" {
					t.Errorf("certificate = %q, want the existing one kept", stored.Status.Certificate)
				}
			}},
		{name: "request changed: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return change(t, func(csr *certificatesv1.CertificateSigningRequest) { csr.Spec.Request = []byte("another request") })
			},
			wantOutcome: OutcomeConflict,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if len(stored.Status.Certificate) != 0 {
					t.Errorf("certificate written for another request")
				}
			}},
		{name: "UID changed: no write",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return func(tracker clienttesting.ObjectTracker) {
					if err := tracker.Delete(csrGVR, "", "csr"); err != nil {
						t.Errorf("tracker delete: %v", err)
					}
					replacement := newCSR("csr", approved)
					replacement.UID = types.UID("uid-replacement")
					if err := tracker.Add(replacement); err != nil {
						t.Errorf("tracker add: %v", err)
					}
				}
			},
			wantOutcome: OutcomeGone,
			check: func(t *testing.T, stored *certificatesv1.CertificateSigningRequest) {
				if stored.UID != "uid-replacement" || len(stored.Status.Certificate) != 0 {
					t.Errorf("stored %s with certificate %q, want the replacement untouched", stored.UID, stored.Status.Certificate)
				}
			}},
		{name: "deleted meanwhile: dropped",
			meanwhile: func(t *testing.T) func(clienttesting.ObjectTracker) {
				return func(tracker clienttesting.ObjectTracker) {
					if err := tracker.Delete(csrGVR, "", "csr"); err != nil {
						t.Errorf("tracker delete: %v", err)
					}
				}
			},
			wantOutcome: OutcomeGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signer := &fakeSigner{errs: tt.signErrs}
			metrics := &looptest.Metrics{}
			rec := record.NewFakeRecorder(10)
			c, kube, ctx := newTestControllerWith(t, signer, func(o *Options) {
				o.Metrics, o.Recorder = metrics, rec
			}, newCSR("csr", approved))
			conflictOnce(t, kube, tt.meanwhile(t))

			if err := c.sync(ctx, "csr"); err != nil {
				t.Fatalf("sync() = %v, want nil", err)
			}
			if got := signer.callCount(); got != 1 {
				t.Errorf("signer called %d times, want exactly 1", got)
			}
			if got := len(statusUpdates(t, kube)) - 1; got != tt.wantWrites {
				t.Errorf("%d status updates after the conflict, want %d", got, tt.wantWrites)
			}
			gets := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "get" {
					gets++
				}
			}
			if gets != 1 {
				t.Errorf("%d GETs from the API, want 1 (the re-read after the conflict)", gets)
			}
			if got := metrics.Outcomes(); len(got) != 1 || got[0] != servedSigner+" "+tt.wantOutcome {
				t.Errorf("outcomes = %v, want [%s %s]", got, servedSigner, tt.wantOutcome)
			}
			// A Failed condition written gets its Warning Event; a certificate signed at the
			// first attempt gets none by default.
			if got, want := looptest.Events(rec), tt.wantWrites == 1 && tt.wantOutcome == OutcomeFailed; (len(got) == 1) != want || len(got) > 1 {
				t.Errorf("events = %v, want one only for a Failed condition written", got)
			}
			if tt.check != nil {
				stored, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get: %v", err)
				}
				tt.check(t, stored)
			}
		})
	}
}

// TestStatusConflictTwice: a second conflict is not resolved in the same sync; the CSR is
// re-queued, counted as retried.
func TestStatusConflictTwice(t *testing.T) {
	metrics := &looptest.Metrics{}
	c, kube, ctx := newTestControllerWith(t, &fakeSigner{}, func(o *Options) { o.Metrics = metrics }, newCSR("csr", approved))
	gr := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	kube.PrependReactor("update", "certificatesigningrequests", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(gr, "csr", errors.New("modified"))
	})
	if err := c.sync(ctx, "csr"); !apierrors.IsConflict(err) {
		t.Errorf("sync() = %v, want the conflict", err)
	}
	if got := len(statusUpdates(t, kube)); got != 2 {
		t.Errorf("%d status updates, want 2 (the first and one on the fresh object)", got)
	}
	if got := metrics.Outcomes(); len(got) != 1 || got[0] != servedSigner+" "+OutcomeRetried {
		t.Errorf("outcomes = %v, want retried", got)
	}
}
