package integration

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher"
)

// podTrustDomain is the SPIFFE trust domain of the pod-identity signers in these tests.
const podTrustDomain = "cluster.local"

// newPodSignet prepares a signing server whose signer has the pod-identity profile.
func newPodSignet(t *testing.T, signerName string) *signet {
	t.Helper()
	s := newSignet(t, signerName, 24*time.Hour)
	s.cfg.Signers[0].Profile = profile.Spec{
		Name:        profile.NamePodIdentity,
		PodIdentity: &profile.PodIdentitySpec{TrustDomain: podTrustDomain},
	}
	return s
}

// createPCR creates, as cluster-admin, a PodCertificateRequest in namespace for the service
// account sa, keyed by key (an empty stub PKCS#10 request, as the kubelet makes), with the
// given unverified user annotations. Pod, service account and node need not exist: no
// admission plugin checks a non-node creator.
func createPCR(t *testing.T, namespace, signerName, sa string, key crypto.Signer, annotations map[string]string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	_, admin := cluster.Admin()
	pcr, err := admin.CertificatesV1().PodCertificateRequests(namespace).Create(context.Background(), &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "req-", Namespace: namespace},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                signerName,
			PodName:                   sa + "-0",
			PodUID:                    uuid.NewUUID(),
			ServiceAccountName:        sa,
			ServiceAccountUID:         uuid.NewUUID(),
			NodeName:                  types.NodeName("node-1"),
			NodeUID:                   uuid.NewUUID(),
			StubPKCS10Request:         stub,
			UnverifiedUserAnnotations: annotations,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodCertificateRequest: %v", err)
	}
	return pcr
}

// waitPCR polls the PodCertificateRequest until done returns true, failing the test after
// timeout.
func waitPCR(t *testing.T, pcr *certificatesv1.PodCertificateRequest, timeout time.Duration, what string, done func(*certificatesv1.PodCertificateRequest) bool) *certificatesv1.PodCertificateRequest {
	t.Helper()
	_, admin := cluster.Admin()
	last := pcr
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := admin.CertificatesV1().PodCertificateRequests(pcr.Namespace).Get(ctx, pcr.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = got
		return done(got), nil
	})
	if err != nil {
		t.Fatalf("PodCertificateRequest %s/%s: waiting until %s: %v; last status: %+v", pcr.Namespace, pcr.Name, what, err, last.Status)
	}
	return last
}

func terminal(pcr *certificatesv1.PodCertificateRequest) bool { return len(pcr.Status.Conditions) > 0 }

// checkIssued checks an Issued PodCertificateRequest: the condition; a chain that verifies
// to the signer's CA; the leaf's key is the stub request's; its only URI SAN is the pod's
// SPIFFE ID; the status times are the leaf's; beginRefreshAt lies in the last third of the
// lifetime and inside the API's window [notBefore+10m, notAfter−10m].
func (s *signet) checkIssued(t *testing.T, pcr *certificatesv1.PodCertificateRequest, key crypto.Signer) {
	t.Helper()
	cond := meta.FindStatusCondition(pcr.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeIssued)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "Issued" || len(pcr.Status.Conditions) != 1 {
		t.Fatalf("conditions = %+v, want only Issued (True, reason Issued)", pcr.Status.Conditions)
	}
	chain := parseChain(t, []byte(pcr.Status.CertificateChain))
	leaf := chain[0]
	if !strings.Contains(cond.Message, "serial") || !strings.Contains(cond.Message, s.signerName) {
		t.Errorf("Issued message %q, want the signer and the serial", cond.Message)
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(s.caCert)
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("chain does not verify to the signer CA: %v", err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		t.Error("leaf key is not the stub request's key")
	}
	wantURI := "spiffe://" + podTrustDomain + "/ns/" + pcr.Namespace + "/sa/" + pcr.Spec.ServiceAccountName
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantURI {
		t.Errorf("URI SANs = %v, want [%s]", leaf.URIs, wantURI)
	}
	st := pcr.Status
	if st.NotBefore == nil || st.NotAfter == nil || st.BeginRefreshAt == nil {
		t.Fatalf("status times missing: %+v", st)
	}
	if !st.NotBefore.Time.Equal(leaf.NotBefore) || !st.NotAfter.Time.Equal(leaf.NotAfter) {
		t.Errorf("status notBefore/notAfter = %s/%s, leaf's %s/%s", st.NotBefore, st.NotAfter, leaf.NotBefore, leaf.NotAfter)
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if maxSeconds := pcr.Spec.MaxExpirationSeconds; lifetime < time.Hour || maxSeconds == nil || lifetime > time.Duration(*maxSeconds)*time.Second {
		t.Errorf("lifetime %s, want within [1h, maxExpirationSeconds]", lifetime)
	}
	refresh := st.BeginRefreshAt.Time
	if refresh.Before(leaf.NotBefore.Add(10*time.Minute)) || refresh.After(leaf.NotAfter.Add(-10*time.Minute)) {
		t.Errorf("beginRefreshAt %s outside [notBefore+10m, notAfter-10m] = [%s, %s]", refresh, leaf.NotBefore.Add(10*time.Minute), leaf.NotAfter.Add(-10*time.Minute))
	}
	if lastThird := leaf.NotBefore.Add(lifetime * 2 / 3); refresh.Before(lastThird) {
		t.Errorf("beginRefreshAt %s before the last third of the lifetime (from %s)", refresh, lastThird)
	}
	if since := time.Since(leaf.NotBefore); since < 0 || since > 5*time.Minute {
		t.Errorf("notBefore %s is %s before now, want within the API's 5 minutes", leaf.NotBefore, since)
	}
}

// TestPodCertificateRequestIsIssued: on Kubernetes 1.37 (certificates.k8s.io/v1) a pending
// PodCertificateRequest of the served signer is Issued in one status write; one with an
// unknown unverified user annotation, created alongside, is Denied with
// InvalidUnverifiedUserAnnotations naming the key (and an Event in its namespace) and costs
// the good one nothing; one for another signer name is left untouched.
func TestPodCertificateRequestIsIssued(t *testing.T) {
	const namespace = "signet-pcr"
	createNamespace(t, namespace)
	s := newPodSignet(t, "it.signet.dev/pods")
	s.startServer()
	s.startWatcher() // least-privilege RBAC for CSRs and PodCertificateRequests

	goodKey, badKey, otherKey := p256(t), p256(t), p256(t)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	bad := createPCR(t, namespace, s.signerName, "frontend", badKey, map[string]string{"example.com/unknown-key": "x"})
	good := createPCR(t, namespace, s.signerName, "backend", goodKey, nil)
	ed := createPCR(t, namespace, s.signerName, "ed", edKey, nil)
	other := createPCR(t, namespace, "it.signet.dev/pods-other", "other", otherKey, nil)

	got := waitPCR(t, good, 30*time.Second, "Issued", terminal)
	s.checkIssued(t, got, goodKey)
	s.checkIssued(t, waitPCR(t, ed, 30*time.Second, "Issued", terminal), edKey)

	got = waitPCR(t, bad, 30*time.Second, "Denied", terminal)
	denied := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
	if denied == nil || denied.Reason != certificatesv1.PodCertificateRequestConditionInvalidUserConfig ||
		!strings.Contains(denied.Message, "example.com/unknown-key") || len(got.Status.Conditions) != 1 {
		t.Errorf("conditions = %+v, want only Denied InvalidUnverifiedUserAnnotations naming example.com/unknown-key", got.Status.Conditions)
	}
	if got.Status.CertificateChain != "" || got.Status.NotBefore != nil {
		t.Errorf("a denied request carries a chain or times: %+v", got.Status)
	}
	waitPCREvent(t, got, certificatesv1.PodCertificateRequestConditionInvalidUserConfig)

	// The watcher has handled three requests of its signer by now; give it a moment more
	// and check the other signer's request was never written.
	time.Sleep(time.Second)
	_, admin := cluster.Admin()
	got, err = admin.CertificatesV1().PodCertificateRequests(namespace).Get(context.Background(), other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || got.Status.CertificateChain != "" || got.ResourceVersion != other.ResourceVersion {
		t.Errorf("another signer's request was changed: %+v", got.Status)
	}
}

// waitPCREvent waits for an Event with reason on pcr from the watcher, in pcr's namespace.
func waitPCREvent(t *testing.T, pcr *certificatesv1.PodCertificateRequest, reason string) {
	t.Helper()
	_, admin := cluster.Admin()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(pcr.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == pcr.UID && e.Reason == reason && e.Source.Component == watcher.Component {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Event from %s on PodCertificateRequest %s/%s: %v", reason, watcher.Component, pcr.Namespace, pcr.Name, err)
	}
}

// TestPodCertificateRequestsWithDeployedRBAC runs the watcher, with leader election, as a
// user holding exactly deploy/watcher/rbac.yaml's grants: they suffice for the watcher to
// find PodCertificateRequests signable (its own permission check) and to issue one, with
// the Signed Event in the request's namespace.
func TestPodCertificateRequestsWithDeployedRBAC(t *testing.T) {
	const namespace, podNamespace = "signet-rbac-pcr", "signet-pcr-rbac-pods"
	createNamespace(t, namespace)
	createNamespace(t, podNamespace)
	s := newPodSignet(t, "it.signet.dev/pods-rbac")
	s.startServer()
	u, err := cluster.AddUser("signet-watcher-rbac-pcr", nil)
	if err != nil {
		t.Fatal(err)
	}
	applyDeployedRBAC(t, u, s.signerName, namespace)
	s.runWatcher(u.Client(), namespace, "rbac-pcr-a")
	waitLeaseHolder(t, namespace, "rbac-pcr-a", 10*time.Second)

	key := p256(t)
	pcr := createPCR(t, podNamespace, s.signerName, "web", key, nil)
	s.checkIssued(t, waitPCR(t, pcr, 30*time.Second, "Issued", terminal), key)
	waitPCREvent(t, pcr, "Signed") // runWatcher sets signedEvents: all
}
