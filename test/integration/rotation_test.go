package integration

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// The signers, namespace and timing of TestCARotation.
const (
	rotSigner    = "it.signet.dev/rotate"     // a CSR signer
	rotPodSigner = "it.signet.dev/rotate-pod" // a pod-identity signer
	rotNamespace = "signet-rotate"
	// rotDelay is signers[].rotation.minPropagationDelay.
	rotDelay = 3 * time.Second
)

// TestCARotation rotates the CAs of a CSR signer and a pod-identity signer served to two
// clusters (the shared 1.37.1 control plane, "one", with certificates.k8s.io/v1 bundles, and
// a 1.36.3 one, "two", with v1beta1 bundles) while CSRs and PodCertificateRequests are issued
// continuously in cluster one:
//   - stage: the new CA appears in both clusters' bundles (the time from stage to visible is
//     logged); issuance stays with the old CA;
//   - activate is refused while cluster two's watcher has not published the staged CA, then
//     while the propagation delay runs, each with its reason; then the new CA issues;
//   - retire is refused while the old CA's leaves are valid; forced with a reason, the old CA
//     leaves both bundles;
//   - every leaf verifies against the bundle the watch saw published when the leaf was seen,
//     and no request failed.
func TestCARotation(t *testing.T) {
	signers := []string{rotSigner, rotPodSigner}
	deleteBundlesAtEnd(t, trustbundle.Name(rotSigner), trustbundle.Name(rotPodSigner))
	two := startV1beta1Cluster(t)
	s := newTrustSignet(t, rotSigner, rotPodSigner)
	s.cfg.Clients[0].Admin = true
	for i := range s.cfg.Signers {
		s.cfg.Signers[i].Rotation = config.Rotation{Clusters: []string{"one", "two"}, MinPropagationDelay: &metav1.Duration{Duration: rotDelay}}
	}
	s.startServer()
	old := map[string]*x509.Certificate{rotSigner: s.caCert, rotPodSigner: readCert(t, filepath.Join(s.state, devpki.PodIdentityCACert))}
	historyOne := watchBundles(t, cluster, true, signers...)
	historyTwo := watchBundles(t, two, false, signers...)

	startRotationWatcher(t, s, cluster.AddWatcher, "one")
	for _, sg := range signers {
		historyOne.waitFor(t, sg, 20*time.Second, old[sg])
	}
	createNamespace(t, rotNamespace)
	load := startLoad(t, rotSigner, rotPodSigner, rotNamespace)
	for _, sg := range signers {
		load.waitSignedBy(t, sg, old[sg], 30*time.Second)
	}

	// Stage a new CA for each signer: both bundles in cluster one gain it.
	admin := adminClient(t, s)
	next := map[string]*x509.Certificate{}
	for _, sg := range signers {
		ca := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "next CA of " + sg} })
		next[sg] = ca.Cert
		keyPath := filepath.Join(t.TempDir(), "next.key")
		if err := os.WriteFile(keyPath, testpki.KeyPEM(t, ca.Key), 0o600); err != nil {
			t.Fatal(err)
		}
		stagedAt := time.Now()
		if _, err := admin.StageCA(rpcContext(t), &signetv1.StageCARequest{SignerName: sg, KeyUri: keyPath, CertificatePem: string(ca.CertPEM())}); err != nil {
			t.Fatalf("StageCA %s: %v", sg, err)
		}
		visible := historyOne.waitFor(t, sg, 20*time.Second, old[sg], next[sg])
		t.Logf("%s: staged CA visible in cluster one's bundle %s after stage", sg, visible.Sub(stagedAt).Round(time.Millisecond))
	}
	// Cluster two runs no watcher yet: activation waits for it.
	for _, sg := range signers {
		wantRefused(t, activate(t, admin, sg), `cluster "two" has not reported its trust bundle`)
	}
	startRotationWatcher(t, s, two.AddWatcher, "two")
	for _, sg := range signers {
		historyTwo.waitFor(t, sg, 30*time.Second, old[sg], next[sg])
		waitPublishedToAll(t, admin, sg, 20*time.Second)
		wantRefused(t, activate(t, admin, sg), "minimum propagation delay")
	}
	for _, sg := range signers {
		waitActivation(t, admin, sg)
		if err := activate(t, admin, sg); err != nil {
			t.Fatalf("ActivateCA %s after the delay: %v", sg, err)
		}
	}
	for _, sg := range signers {
		load.waitSignedBy(t, sg, next[sg], 30*time.Second)
	}

	// The old CAs signed leaves that are still valid: retirement is refused; forced, the old
	// CA leaves both clusters' bundles.
	for _, sg := range signers {
		fp := sha256.Sum256(old[sg].Raw)
		_, err := admin.RetireCA(rpcContext(t), &signetv1.RetireCARequest{SignerName: sg, Fingerprint: hex.EncodeToString(fp[:])})
		wantRefused(t, err, "a leaf it signed is valid until")
		if _, err := admin.RetireCA(rpcContext(t), &signetv1.RetireCARequest{SignerName: sg, Fingerprint: hex.EncodeToString(fp[:]),
			Force: true, Reason: "integration test: leaves of the old CA are short-lived"}); err != nil {
			t.Fatalf("forced RetireCA %s: %v", sg, err)
		}
	}
	for _, sg := range signers {
		historyOne.waitFor(t, sg, 20*time.Second, next[sg])
		historyTwo.waitFor(t, sg, 20*time.Second, next[sg])
	}
	for _, sg := range signers {
		waitUpToDate(t, admin, sg, 20*time.Second)
	}
	load.halt()
	checkLoad(t, load, historyOne, old, next)
	for _, sg := range signers {
		// Cluster two's watcher started after the CA was staged.
		checkBundleSequence(t, historyOne, sg, []*x509.Certificate{old[sg]}, []*x509.Certificate{old[sg], next[sg]}, []*x509.Certificate{next[sg]})
		checkBundleSequence(t, historyTwo, sg, []*x509.Certificate{old[sg], next[sg]}, []*x509.Certificate{next[sg]})
	}
}

// startRotationWatcher runs a watcher for both rotation signers in the cluster that add
// belongs to, as a user with the watcher's RBAC there, reporting as clusterName.
func startRotationWatcher(t *testing.T, s *signet, add func(string, []string) (*controlplane.User, error), clusterName string) {
	t.Helper()
	u, err := add("watcher-rotate-"+clusterName, []string{rotSigner, rotPodSigner})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.trustWatcherConfig([]string{rotSigner, rotPodSigner}, freeAddress(t))
	cfg.ClusterName = clusterName
	runWatcher(t, cfg, u.Client())
}

func rpcContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func activate(t *testing.T, admin signetv1.AuthorityServiceClient, signer string) error {
	t.Helper()
	_, err := admin.ActivateCA(rpcContext(t), &signetv1.ActivateCARequest{SignerName: signer})
	return err
}

// wantRefused fails t unless err is a ROTATION_REFUSED FailedPrecondition whose message holds
// substr.
func wantRefused(t *testing.T, err error, substr string) {
	t.Helper()
	if st, ok := status.FromError(err); !ok || st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), substr) {
		t.Fatalf("error %v; want FailedPrecondition (ROTATION_REFUSED) saying %q", err, substr)
	}
}

// authorityOf returns the server's view of signer's CAs.
func authorityOf(t *testing.T, admin signetv1.AuthorityServiceClient, signer string) *signetv1.SignerAuthority {
	t.Helper()
	resp, err := admin.GetAuthority(rpcContext(t), &signetv1.GetAuthorityRequest{SignerNames: []string{signer}})
	if err != nil {
		t.Fatalf("GetAuthority %s: %v", signer, err)
	}
	return resp.GetSigners()[0]
}

// waitPublishedToAll waits until both clusters reported publishing signer's staged CA.
func waitPublishedToAll(t *testing.T, admin signetv1.AuthorityServiceClient, signer string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n := 0
		for _, c := range authorityOf(t, admin, signer).GetClusters() {
			if c.GetRegistered() && c.GetStagedPublishedAt() != nil {
				n++
			}
		}
		if n == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of 2 clusters reported the staged CA within %s: %v", signer, n, timeout, authorityOf(t, admin, signer).GetClusters())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitUpToDate waits until both clusters reported the bundle the server publishes now: the
// hash a watcher reports of its ClusterTrustBundle is the server's own bundle hash.
func waitUpToDate(t *testing.T, admin signetv1.AuthorityServiceClient, signer string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		a := authorityOf(t, admin, signer)
		n := 0
		for _, c := range a.GetClusters() {
			if c.GetBundleHash() == a.GetBundleHash() {
				n++
			}
		}
		if n == 2 && a.GetBundleHash() != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of 2 clusters report the server's bundle %s within %s: %v", signer, n, a.GetBundleHash(), timeout, a.GetClusters())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitActivation waits until the activation gate of signer opens (its not-before time).
func waitActivation(t *testing.T, admin signetv1.AuthorityServiceClient, signer string) {
	t.Helper()
	gate := authorityOf(t, admin, signer).GetActivation()
	if gate.GetReady() {
		return
	}
	if gate.GetNotBefore() == nil {
		t.Fatalf("%s: the activation gate is closed by more than time: %v", signer, gate.GetBlocking())
	}
	time.Sleep(time.Until(gate.GetNotBefore().AsTime()) + 50*time.Millisecond)
}

// checkLoad: no request failed, both CAs of each signer issued, and every leaf verifies
// against its signer's bundle as cluster one published it when the leaf was seen.
func checkLoad(t *testing.T, l *issuanceLoad, h *bundleHistory, old, next map[string]*x509.Certificate) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failures {
		t.Errorf("a request failed during the rotation: %s", f)
	}
	for _, leaf := range l.leaves {
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		for _, c := range h.at(leaf.signer, leaf.at) {
			roots.AddCert(c)
		}
		for _, c := range leaf.chain[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
			CurrentTime: leaf.chain[0].NotBefore.Add(time.Minute * 6)}); err != nil {
			t.Errorf("a leaf of %s seen at %s (serial %x) does not verify against the bundle published then: %v",
				leaf.signer, leaf.at.Format(time.RFC3339Nano), leaf.chain[0].SerialNumber, err)
		}
	}
	t.Logf("%d leaves issued during the rotation, none failed", len(l.leaves))
}

// checkBundleSequence: the bundle went through the contents of want, in order, with nothing
// else in between.
func checkBundleSequence(t *testing.T, h *bundleHistory, signer string, want ...[]*x509.Certificate) {
	t.Helper()
	got := h.contents(signer)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = sameCerts(got[i], want[i])
	}
	if !ok {
		t.Errorf("the bundle of %s went through %d contents; want %d (old, old+new, new from when the watcher started)", signer, len(got), len(want))
	}
}
