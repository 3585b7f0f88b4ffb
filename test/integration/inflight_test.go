package integration

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/server/ledger"
)

// issuedPerUID counts the "issued" ledger records of the signer's server by object UID.
func (s *signet) issuedPerUID(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	err := ledger.Replay(filepath.Join(s.state, "ledger"), time.Time{}, func(r ledger.Record) error {
		if r.Decision == ledger.Issued {
			counts[r.ObjectUID]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	return counts
}

// awaitCall waits until the proxy holds the sign call of uid.
func awaitCall(t *testing.T, p *holdingProxy, uid string) {
	t.Helper()
	select {
	case got := <-p.arrived:
		if got != uid {
			t.Fatalf("held sign call for %s, want %s", got, uid)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no sign call for %s reached the server", uid)
	}
}

// TestChangesWhileSigning changes a CSR while its sign call is held in flight, then lets the
// call complete: a CSR that failed or was deleted meanwhile is not written to, and one that
// was merely updated (a write conflict) gets the certificate of its single issuance.
func TestChangesWhileSigning(t *testing.T) {
	s := newSignet(t, "it.signet.dev/in-flight", time.Hour)
	s.startServer()
	proxy := startHoldingProxy(t, s)
	s.startWatcherAt(proxy.addr, 30*time.Second)
	erin, err := cluster.AddRequester("erin", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, admin := cluster.Admin()
	csrs := admin.CertificatesV1().CertificateSigningRequests()
	ctx := context.Background()
	newApproved := func() *certificatesv1.CertificateSigningRequest {
		csr := submit(t, erin, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "erin"}}, nil)
		if err := cluster.Approve(ctx, csr.Name); err != nil {
			t.Fatal(err)
		}
		return csr
	}

	t.Run("failed meanwhile", func(t *testing.T) {
		csr := newApproved()
		awaitCall(t, proxy, string(csr.UID))
		cur, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Conditions = append(cur.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "OperatorGaveUp", Message: "set by the test",
		})
		if _, err := csrs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		proxy.release <- struct{}{}
		time.Sleep(2 * time.Second) // the watcher writes, or not, right after the call returns
		got, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if signed(got) {
			t.Error("a certificate was written to a CSR that failed while it was being signed")
		}
	})

	t.Run("deleted meanwhile", func(t *testing.T) {
		csr := newApproved()
		awaitCall(t, proxy, string(csr.UID))
		if err := csrs.Delete(ctx, csr.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		proxy.release <- struct{}{}
		time.Sleep(2 * time.Second)
		if _, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the deleted CSR is back (err %v): the watcher must not recreate or write it", err)
		}
	})

	t.Run("updated meanwhile", func(t *testing.T) {
		csr := newApproved()
		awaitCall(t, proxy, string(csr.UID))
		cur, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Labels = map[string]string{"touched": "by-the-test"}
		if _, err := csrs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Last subtest: let this and any later call through. The label update re-queues the
		// CSR, and a sync that runs before the cache shows the certificate may ask again; the
		// server answers such a call from its idempotency store, so there is still one issuance.
		close(proxy.release)
		waitFor(t, erin.Client(), csr.Name, 30*time.Second, "signed after the conflict", signed)
		time.Sleep(time.Second)
		if n := s.issuedPerUID(t)[string(csr.UID)]; n != 1 {
			t.Errorf("the ledger shows %d issuances for the conflicted CSR, want exactly 1", n)
		}
	})
}
