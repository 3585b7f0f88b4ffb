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
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/pcrsigner"
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

// v1beta1KubeVersion is the Kubernetes version on which the PodCertificateRequest tests also
// run, as certificates.k8s.io/v1beta1 (controlplane.Start turns on its gates and API).
const v1beta1KubeVersion = "v1.36.3"

// pcrShape is how a PodCertificateRequest carries its key.
type pcrShape string

const (
	// shapeStub: an empty stub PKCS#10 request, as the kubelet makes (v1, and v1beta1 from 1.36).
	shapeStub pcrShape = "stubPKCS10Request"
	// shapePKIX: pkixPublicKey with proofOfPossession over the pod UID (v1beta1 only, deprecated).
	shapePKIX pcrShape = "pkixPublicKey"
)

// pcrCase is a control plane, the certificates.k8s.io version it serves PodCertificateRequests
// in, and the key shape a test's requests use there.
type pcrCase struct {
	cluster *controlplane.Cluster
	api     pcrsigner.APIVersion
	shape   pcrShape
}

// defaultPCRCase is the shared cluster (controlplane.DefaultVersion, v1) with stub requests.
func defaultPCRCase() pcrCase { return pcrCase{cluster: cluster, api: pcrsigner.V1, shape: shapeStub} }

// forEachPCRCase runs test as one subtest per case: stubPKCS10Request on the shared
// DefaultVersion cluster (v1); stubPKCS10Request, then pkixPublicKey with proofOfPossession, on
// a v1beta1KubeVersion control plane (v1beta1) started for the test and stopped after it. The
// subtest name is "<version>/<shape>", and suffix(c) gives per-case names (signers, users).
// A control plane that cannot start (a binary not built) fails the test, never skips it.
func forEachPCRCase(t *testing.T, test func(t *testing.T, c pcrCase)) {
	t.Helper()
	t.Run(controlplane.DefaultVersion+"/"+string(shapeStub), func(t *testing.T) {
		c := defaultPCRCase()
		c.checkServed(t)
		test(t, c)
	})
	beta := startV1beta1Cluster(t)
	for _, shape := range []pcrShape{shapeStub, shapePKIX} {
		t.Run(v1beta1KubeVersion+"/"+string(shape), func(t *testing.T) {
			c := pcrCase{cluster: beta, api: pcrsigner.V1beta1, shape: shape}
			c.checkServed(t)
			test(t, c)
		})
	}
}

// startV1beta1Cluster starts a v1beta1KubeVersion control plane until the test ends.
func startV1beta1Cluster(t *testing.T) *controlplane.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := controlplane.Start(ctx, controlplane.Options{Version: v1beta1KubeVersion})
	if err != nil {
		t.Fatalf("PodCertificateRequest v1beta1 tests need a %s control plane: %v", v1beta1KubeVersion, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the %s control plane: %v", v1beta1KubeVersion, err)
		}
	})
	return c
}

// checkServed fails the test unless the cluster serves PodCertificateRequests in c.api (as
// the watcher discovers it), so that a case never runs on the other version.
func (c pcrCase) checkServed(t *testing.T) {
	t.Helper()
	_, admin := c.cluster.Admin()
	got, err := pcrsigner.Discover(context.Background(), admin.Discovery())
	if err != nil || got != c.api {
		t.Fatalf("%s serves PodCertificateRequests as %q (%v), want %q", c.cluster.Version(), got, err, c.api)
	}
}

// suffix distinguishes names (signers, users) of the case's cluster and shape: empty for the
// default case, so that its names are as before.
func (c pcrCase) suffix() string {
	if c.api == pcrsigner.V1 && c.shape == shapeStub {
		return ""
	}
	return "-" + string(c.api) + "-" + strings.ToLower(string(c.shape))
}

// createNamespace creates namespace in the case's cluster if it does not exist.
func (c pcrCase) createNamespace(t *testing.T, name string) {
	t.Helper()
	_, admin := c.cluster.Admin()
	_, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startWatcher runs a watcher for s's signer on the case's cluster, as a user with the
// watcher's least-privilege RBAC (CSRs and PodCertificateRequests).
func (c pcrCase) startWatcher(s *signet) {
	t := s.t
	u, err := c.cluster.AddWatcher("watcher-"+strings.ReplaceAll(s.signerName, "/", "-"), []string{s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	runWatcher(t, s.watcherConfig(s.addr), u.Client())
}

// createPCR creates, as cluster-admin, a PodCertificateRequest in namespace for the service
// account sa, keyed by key in the case's shape, with the given unverified user annotations,
// and returns it as v1 (a v1beta1 object's common spec fields and its status, which has the
// same fields). Pod, service account and node need not exist: no admission plugin checks a
// non-node creator.
func (c pcrCase) createPCR(t *testing.T, namespace, signerName, sa string, key crypto.Signer, annotations map[string]string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	objMeta := metav1.ObjectMeta{GenerateName: "req-", Namespace: namespace}
	podUID, saUID, nodeUID := uuid.NewUUID(), uuid.NewUUID(), uuid.NewUUID()
	var stub []byte
	if c.shape == shapeStub {
		var err error
		if stub, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key); err != nil {
			t.Fatal(err)
		}
	}
	_, admin := c.cluster.Admin()
	ctx := context.Background()
	if c.api == pcrsigner.V1 {
		pcr, err := admin.CertificatesV1().PodCertificateRequests(namespace).Create(ctx, &certificatesv1.PodCertificateRequest{
			ObjectMeta: objMeta,
			Spec: certificatesv1.PodCertificateRequestSpec{
				SignerName: signerName, PodName: sa + "-0", PodUID: podUID,
				ServiceAccountName: sa, ServiceAccountUID: saUID,
				NodeName: types.NodeName("node-1"), NodeUID: nodeUID,
				StubPKCS10Request: stub, UnverifiedUserAnnotations: annotations,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating PodCertificateRequest: %v", err)
		}
		return pcr
	}
	spec := certificatesv1beta1.PodCertificateRequestSpec{
		SignerName: signerName, PodName: sa + "-0", PodUID: podUID,
		ServiceAccountName: sa, ServiceAccountUID: saUID,
		NodeName: types.NodeName("node-1"), NodeUID: nodeUID,
		StubPKCS10Request: stub, UnverifiedUserAnnotations: annotations,
	}
	if c.shape == shapePKIX {
		spki, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		spec.PKIXPublicKey, spec.ProofOfPossession = spki, testpki.ProofOfPossession(t, key, string(podUID))
	}
	pcr, err := admin.CertificatesV1beta1().PodCertificateRequests(namespace).Create(ctx,
		&certificatesv1beta1.PodCertificateRequest{ObjectMeta: objMeta, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating v1beta1 PodCertificateRequest (%s): %v", c.shape, err)
	}
	return asV1(pcr)
}

// asV1 returns the v1 view of a v1beta1 PodCertificateRequest: metadata, the spec fields v1
// has, and the status (the same fields).
func asV1(o *certificatesv1beta1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	s := o.Spec
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: o.ObjectMeta,
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: s.SignerName, PodName: s.PodName, PodUID: s.PodUID,
			ServiceAccountName: s.ServiceAccountName, ServiceAccountUID: s.ServiceAccountUID,
			NodeName: s.NodeName, NodeUID: s.NodeUID, MaxExpirationSeconds: s.MaxExpirationSeconds,
			StubPKCS10Request: s.StubPKCS10Request, UnverifiedUserAnnotations: s.UnverifiedUserAnnotations,
		},
		Status: certificatesv1.PodCertificateRequestStatus(o.Status),
	}
}

// getPCR reads namespace/name from the case's cluster, as v1.
func (c pcrCase) getPCR(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	_, admin := c.cluster.Admin()
	if c.api == pcrsigner.V1 {
		return admin.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	o, err := admin.CertificatesV1beta1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return asV1(o), nil
}

// waitPCR polls the PodCertificateRequest until done returns true, failing the test after
// timeout.
func (c pcrCase) waitPCR(t *testing.T, pcr *certificatesv1.PodCertificateRequest, timeout time.Duration, what string, done func(*certificatesv1.PodCertificateRequest) bool) *certificatesv1.PodCertificateRequest {
	t.Helper()
	last := pcr
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := c.getPCR(ctx, pcr.Namespace, pcr.Name)
		if err != nil {
			return false, err
		}
		last = got
		return done(got), nil
	})
	if err != nil {
		t.Fatalf("PodCertificateRequest %s/%s (%s, %s): waiting until %s: %v; last status: %+v", pcr.Namespace, pcr.Name, c.api, c.shape, what, err, last.Status)
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

// TestPodCertificateRequestIsIssued: a pending PodCertificateRequest of the served signer is
// Issued in one status write; one with an unknown unverified user annotation, created
// alongside, is Denied with InvalidUnverifiedUserAnnotations naming the key (and an Event in
// its namespace) and costs the good one nothing; one for another signer name is left
// untouched. On Kubernetes 1.37 (certificates.k8s.io/v1, stubPKCS10Request) and on 1.36
// (v1beta1, found by the watcher's discovery) with both key shapes: stubPKCS10Request, and
// pkixPublicKey with proofOfPossession.
func TestPodCertificateRequestIsIssued(t *testing.T) {
	forEachPCRCase(t, func(t *testing.T, c pcrCase) {
		namespace := "signet-pcr" + c.suffix()
		c.createNamespace(t, namespace)
		s := newPodSignet(t, "it.signet.dev/pods"+c.suffix())
		s.startServer()
		c.startWatcher(s) // least-privilege RBAC for CSRs and PodCertificateRequests

		goodKey, badKey, otherKey := p256(t), p256(t), p256(t)
		_, edKey, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		bad := c.createPCR(t, namespace, s.signerName, "frontend", badKey, map[string]string{"example.com/unknown-key": "x"})
		good := c.createPCR(t, namespace, s.signerName, "backend", goodKey, nil)
		ed := c.createPCR(t, namespace, s.signerName, "ed", edKey, nil)
		other := c.createPCR(t, namespace, s.signerName+"-other", "other", otherKey, nil)

		got := c.waitPCR(t, good, 30*time.Second, "Issued", terminal)
		s.checkIssued(t, got, goodKey)
		s.checkIssued(t, c.waitPCR(t, ed, 30*time.Second, "Issued", terminal), edKey)

		got = c.waitPCR(t, bad, 30*time.Second, "Denied", terminal)
		denied := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
		if denied == nil || denied.Reason != certificatesv1.PodCertificateRequestConditionInvalidUserConfig ||
			!strings.Contains(denied.Message, "example.com/unknown-key") || len(got.Status.Conditions) != 1 {
			t.Errorf("conditions = %+v, want only Denied InvalidUnverifiedUserAnnotations naming example.com/unknown-key", got.Status.Conditions)
		}
		if got.Status.CertificateChain != "" || got.Status.NotBefore != nil {
			t.Errorf("a denied request carries a chain or times: %+v", got.Status)
		}
		c.waitPCREvent(t, got, certificatesv1.PodCertificateRequestConditionInvalidUserConfig)

		// The watcher has handled three requests of its signer by now; give it a moment more
		// and check the other signer's request was never written.
		time.Sleep(time.Second)
		got, err = c.getPCR(context.Background(), namespace, other.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) != 0 || got.Status.CertificateChain != "" || got.ResourceVersion != other.ResourceVersion {
			t.Errorf("another signer's request was changed: %+v", got.Status)
		}
	})
}

// waitPCREvent waits for an Event with reason on pcr from the watcher, in pcr's namespace.
func (c pcrCase) waitPCREvent(t *testing.T, pcr *certificatesv1.PodCertificateRequest, reason string) {
	t.Helper()
	_, admin := c.cluster.Admin()
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

	c := defaultPCRCase()
	key := p256(t)
	pcr := c.createPCR(t, podNamespace, s.signerName, "web", key, nil)
	s.checkIssued(t, c.waitPCR(t, pcr, 30*time.Second, "Issued", terminal), key)
	c.waitPCREvent(t, pcr, "Signed") // runWatcher sets signedEvents: all
}
