package integration

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// The node of the cut-over test, and the lifetime kube-controller-manager signs for there: the
// shortest that lets the kubelet renew within the test.
const (
	cutoverNode     = "signet-cutover-node"
	cutoverNodeUser = "system:node:" + cutoverNode
	cutoverLifetime = 10 * time.Minute
)

// TestCutOverKeepsTheCA takes a cluster over from kube-controller-manager as docs/operations.md
// describes it for a kubeadm cluster, keeping its CA: kube-controller-manager signs the
// kubelet's certificates with the cluster's ca.key and a real kubelet joins; the key is
// imported into an HSM (SoftHSM2; TestCutOverKeepsTheCAInATPM: a TPM, swtpm) and the file removed; Signet serves the two
// kubelet signers with the imported key and the unchanged ca.crt; kube-controller-manager is
// restarted without its signer (approval only). Then the node keeps working with no trust
// change anywhere: its serving certificate and its next client certificate come from Signet
// (its ledger records them), chain to the unchanged CA, and the API server accepts both (it
// reaches the kubelet over TLS verified with that CA; it authenticates the renewed kubelet).
func TestCutOverKeepsTheCA(t *testing.T) {
	requireRoot(t)
	// Not parallel: softhsmtest points SOFTHSM2_CONF, process-wide, at the test's token.
	cutOver(t, func(t *testing.T) string { return softhsmtest.New(t).URI("kube-ca") })
}

// TestCutOverKeepsTheCAInATPM is TestCutOverKeepsTheCA with the key imported into a TPM
// (swtpm) instead of an HSM.
func TestCutOverKeepsTheCAInATPM(t *testing.T) {
	requireRoot(t)
	t.Parallel() // waits minutes for the kubelet to renew, beside the other tests that do (clientLifetime)
	cutOver(t, func(t *testing.T) string {
		return swtpmtest.Start(t).URI("blob=" + filepath.Join(t.TempDir(), "kube-ca.tpmkey"))
	})
}

func cutOver(t *testing.T, target func(t *testing.T) string) {
	dir := nodeDir(t)
	ctx := context.Background()
	ca := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "kubernetes"} })
	caFile, keyFile := writeCA(t, filepath.Join(dir, "pki"), "ca", ca)
	c, kubeletClientCA := kubeletClusterWith(t, ca.CertPEM(), caFile, dir)
	_, admin := c.Admin()
	tok := controlplane.BootstrapToken{ID: "cut0vr", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}

	// Before: kube-controller-manager approves and signs with ca.key.
	kcm, err := c.StartControllerManager(dir, []string{"csrapproving", "csrsigning"},
		"--cluster-signing-cert-file="+caFile, "--cluster-signing-key-file="+keyFile, "--cluster-signing-duration="+cutoverLifetime.String())
	if err != nil {
		t.Fatal(err)
	}
	signing := kcm
	t.Cleanup(func() { _ = signing.Stop() })
	runtime := startContainerd(t, dir)
	port := freePort(t)
	kubelet, files := startKubelet(t, kubeletOptions{dir: dir, nodeName: cutoverNode, runtime: runtime,
		bootstrap: c.BootstrapConfig(tok), clientCAFile: kubeletClientCA, port: port})
	alive := func() error { return errors.Join(kubelet.Running(), kcm.Running()) }
	join := waitForCSR(t, admin, alive, kubeletClientCAs, tok.Username(), nil, time.Minute)
	joinCert := waitIssued(t, admin, join.Name, alive)
	checkChainsTo(t, joinCert, ca.Cert, "the join certificate kube-controller-manager signed")
	node := waitForNodeNamed(t, admin, cutoverNode, alive)
	serving := waitForCSR(t, admin, alive, kubeletServing, cutoverNodeUser, nil, 2*time.Minute) // left unapproved until Signet serves

	// The cut-over: the key moves into hardware, the file goes, Signet takes the names over.
	uri := target(t)
	imported, _, err := keystore.Import(ctx, uri, ca.Key, ca.Cert, keystore.Options{})
	if err != nil {
		t.Fatalf("importing ca.key: %v", err)
	}
	if err := imported.Close(); err != nil { // as signetctl keys import does: the server opens its own
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	s := newSignet(t, kubeletClientCAs, cutoverLifetime)
	s.cfg.Signers = []config.Signer{
		{Name: kubeletClientCAs, Key: uri, Certificate: caFile, MaxLifetime: &metav1.Duration{Duration: cutoverLifetime},
			Profile: profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}},
		{Name: kubeletServing, Key: uri, Certificate: caFile, MaxLifetime: &metav1.Duration{Duration: 24 * time.Hour},
			Profile: profile.Spec{Name: profile.NameKubeletServing}},
	}
	s.cfg.Default()
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := signing.Stop(); err != nil {
		t.Fatal(err)
	}
	if kcm, err = c.StartControllerManager(dir, []string{"csrapproving"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	s.startServer()
	w, err := c.AddWatcher("signet-watcher", []string{kubeletClientCAs, kubeletServing})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Grant(ctx, "signet-test:client-ca-reader", w, []rbacv1.PolicyRule{{ // as the installs' client-ca-reader
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"},
		ResourceNames: []string{trustbundle.AuthenticationConfigMap},
	}}); err != nil {
		t.Fatal(err)
	}
	wcfg := s.watcherConfig(s.addr)
	wcfg.SignerNames = []string{kubeletClientCAs, kubeletServing}
	runWatcher(t, wcfg, w.Client())

	// After: a new serving certificate and the next client certificate come from Signet.
	if err := c.Approve(ctx, serving.Name); err != nil {
		t.Fatal(err)
	}
	servingCert := waitIssued(t, admin, serving.Name, alive)
	checkChainsTo(t, servingCert, ca.Cert, "the serving certificate Signet signed")
	checkKubeletServes(t, admin, node, port, ca, servingCert)
	renewal := waitForCSR(t, admin, alive, kubeletClientCAs, cutoverNodeUser, nil, renewalWait(joinCert))
	renewalCert := waitIssued(t, admin, renewal.Name, alive)
	checkChainsTo(t, renewalCert, ca.Cert, "the renewed client certificate Signet signed")
	waitCurrentClientCert(t, files, renewalCert, alive)
	if who := kubeletWhoami(t, files); who.Username != cutoverNodeUser || !slices.Contains(who.Groups, "system:nodes") {
		t.Errorf("after the cut-over the API server authenticates the kubelet as %q %q, want %s", who.Username, who.Groups, cutoverNodeUser)
	}
	for _, name := range []string{serving.Name, renewal.Name} {
		checkRecordedBySignet(t, admin, s, name)
	}
}

// checkRecordedBySignet fails t unless Signet's ledger holds the issuance of the CSR called
// name, with its certificate's serial.
func checkRecordedBySignet(t *testing.T, admin kubernetes.Interface, s *signet, name string) {
	t.Helper()
	csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseChain(t, csr.Status.Certificate)[0]
	for _, r := range s.records(t) {
		if r.Decision == ledger.Issued && r.ObjectUID == string(csr.UID) && r.Serial == hex.EncodeToString(leaf.SerialNumber.Bytes()) {
			return
		}
	}
	t.Errorf("Signet's ledger has no issuance of CSR %s (serial %x): it was not Signet that signed it", name, leaf.SerialNumber)
}

// checkChainsTo fails t unless leaf was signed by ca.
func checkChainsTo(t *testing.T, leaf, ca *x509.Certificate, what string) {
	t.Helper()
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Errorf("%s does not chain to the cluster's CA %s: %v", what, ca.Subject, err)
	}
}
