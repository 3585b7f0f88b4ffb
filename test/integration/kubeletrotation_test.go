package integration

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
)

// The node of the kubelet client CA rotation test.
const (
	rotNode     = "signet-rotation-node"
	rotNodeUser = "system:node:" + rotNode
)

// TestKubeletClientCARotation rotates the CA of kubernetes.io/kube-apiserver-client-kubelet
// under a real kubelet, as the README's "Rotating a signer's CA" describes it for a signer
// whose trust lives in kube-apiserver's --client-ca-file:
//   - the node joins with a client certificate from the old CA;
//   - the new CA is staged: the watcher publishes it in the signer's ClusterTrustBundle, and
//     activation is still refused, naming the API server's client-ca-file, which lacks it;
//   - the new CA is added to the running kube-apiserver's --client-ca-file (it reloads it); once
//     the watcher reports that the API server trusts it, activation proceeds;
//   - retiring the old CA is refused until the last leaf it signed (the join certificate)
//     expires: its gate names that time;
//   - the kubelet renews from the new CA, switches to it and the API server accepts it;
//   - once the join certificate has expired the old CA retires without force, is taken out of
//     --client-ca-file, and the kubelet is still accepted.
func TestKubeletClientCARotation(t *testing.T) {
	requireRoot(t)
	t.Parallel() // waits minutes for the kubelet to renew, beside the other tests that do (clientLifetime)
	dir := nodeDir(t)
	ctx := context.Background()
	s := newSignet(t, kubeletClientCAs, clientLifetime)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
	s.cfg.Signers[0].Rotation = config.Rotation{Clusters: []string{"east"}, MinPropagationDelay: &metav1.Duration{Duration: time.Second}}
	s.cfg.Clients[0].Admin = true
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	old := s.caCert
	next := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "next kubelet client CA"} })
	servingCA := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "unused kubelet-serving CA"} })
	servingFile := filepath.Join(dir, "pki", "kubelet-serving-ca.crt")
	writeFile(t, servingFile, servingCA.CertPEM())
	c, kubeletClientCA := kubeletClusterWith(t, testpki.CertPEM(old), servingFile, dir)
	_, kube := c.Admin()
	tok := controlplane.BootstrapToken{ID: "r0tate", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	kcm, err := c.StartControllerManager(dir, []string{"csrapproving"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	s.startServer()
	admin := adminClient(t, s)
	s.startClientCAWatcher(t, c)
	runtime := startContainerd(t, dir)
	kubelet, files := startKubelet(t, kubeletOptions{dir: dir, nodeName: rotNode, runtime: runtime,
		bootstrap: c.BootstrapConfig(tok), clientCAFile: kubeletClientCA, port: freePort(t)})
	alive := func() error { return errors.Join(kubelet.Running(), kcm.Running()) }

	join := waitForCSR(t, kube, alive, kubeletClientCAs, tok.Username(), nil, time.Minute)
	joinCert := waitIssued(t, kube, join.Name, alive)
	checkChainsTo(t, joinCert, old, "the join certificate")
	waitForNodeNamed(t, kube, rotNode, alive)

	// Stage: published in the ClusterTrustBundle, not yet trusted by the API server.
	keyPath := filepath.Join(t.TempDir(), "next.key")
	if err := os.WriteFile(keyPath, testpki.KeyPEM(t, next.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StageCA(rpcContext(t), &signetv1.StageCARequest{SignerName: kubeletClientCAs, KeyUri: keyPath, CertificatePem: string(next.CertPEM())}); err != nil {
		t.Fatalf("StageCA: %v", err)
	}
	fp := sourceFingerprint(next.Cert)
	waitReport(t, admin, "", fp, true)
	waitReport(t, admin, signetv1.TrustSourceAPIServerClientCA, fp, false)
	wantRefused(t, activate(t, admin, kubeletClientCAs), "client-ca-file")

	// Trust first: the new CA goes into the running kube-apiserver's --client-ca-file.
	if err := c.SetExtraClientCAs(append(testpki.CertPEM(old), next.CertPEM()...)); err != nil {
		t.Fatal(err)
	}
	waitReport(t, admin, signetv1.TrustSourceAPIServerClientCA, fp, true)
	waitActivation(t, admin, kubeletClientCAs)
	if err := activate(t, admin, kubeletClientCAs); err != nil {
		t.Fatalf("ActivateCA once the API server trusts the staged CA: %v", err)
	}

	// The old CA's last leaf is the join certificate: retirement waits for it.
	oldFP := sourceFingerprint(old)
	_, err = admin.RetireCA(rpcContext(t), &signetv1.RetireCARequest{SignerName: kubeletClientCAs, Fingerprint: oldFP})
	wantRefused(t, err, "a leaf it signed is valid until")
	gate := oldCAOf(t, admin, oldFP).GetRetirement()
	if got := gate.GetNotBefore().AsTime(); gate.GetReady() || !got.Equal(joinCert.NotAfter) {
		t.Errorf("the old CA's retirement gate: ready %v, not before %s; want closed until the join certificate's expiry %s",
			gate.GetReady(), got, joinCert.NotAfter)
	}

	// The kubelet renews from the new CA and is accepted.
	renewal := waitForCSR(t, kube, alive, kubeletClientCAs, rotNodeUser, nil, renewalWait(joinCert))
	renewalCert := waitIssued(t, kube, renewal.Name, alive)
	checkChainsTo(t, renewalCert, next.Cert, "the renewed client certificate")
	waitCurrentClientCert(t, files, renewalCert, alive)
	if who := kubeletWhoami(t, files); who.Username != rotNodeUser || !slices.Contains(who.Groups, "system:nodes") {
		t.Errorf("after the renewal from the new CA the API server authenticates the kubelet as %q %q, want %s", who.Username, who.Groups, rotNodeUser)
	}
	checkRecordedBySignet(t, kube, s, renewal.Name)

	// After the old CA's last leaf: retired without force, then out of --client-ca-file.
	time.Sleep(time.Until(joinCert.NotAfter) + time.Second)
	if _, err := admin.RetireCA(rpcContext(t), &signetv1.RetireCARequest{SignerName: kubeletClientCAs, Fingerprint: oldFP}); err != nil {
		t.Fatalf("RetireCA after the old CA's last leaf expired: %v", err)
	}
	oldClient := clientOf(t, c, s.signerCA(t))
	if !oldClient(ctx) {
		t.Fatal("kube-apiserver refuses a client certificate from the old CA while its --client-ca-file holds it")
	}
	if err := c.SetExtraClientCAs(next.CertPEM()); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		return !oldClient(ctx), nil
	}); err != nil {
		t.Fatalf("kube-apiserver still accepts client certificates from the old CA after it left --client-ca-file: %v", err)
	}
	if err := alive(); err != nil {
		t.Fatal(err)
	}
	if who := kubeletWhoami(t, files); who.Username != rotNodeUser {
		t.Errorf("with the old CA gone the API server authenticates the kubelet as %q, want %s", who.Username, rotNodeUser)
	}
}

// oldCAOf returns the server's view of the kubelet client signer's CA of fingerprint fp.
func oldCAOf(t *testing.T, admin signetv1.AuthorityServiceClient, fp string) *signetv1.AuthorityCA {
	t.Helper()
	for _, ca := range authorityOf(t, admin, kubeletClientCAs).GetCas() {
		if ca.GetAnchor().GetFingerprint() == fp {
			return ca
		}
	}
	t.Fatalf("the server lists no CA of fingerprint %s for %s", fp, kubeletClientCAs)
	return nil
}

// signerCA returns the signer CA the dev PKI made for s, with its key.
func (s *signet) signerCA(t *testing.T) *testpki.Authority {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(s.state, devpki.SignerCACert), filepath.Join(s.state, devpki.SignerCAKey))
	if err != nil {
		t.Fatal(err)
	}
	return &testpki.Authority{Cert: pair.Leaf, Key: pair.PrivateKey.(crypto.Signer)}
}

// clientOf returns whether c's kube-apiserver accepts, now, a client certificate from ca.
func clientOf(t *testing.T, c *controlplane.Cluster, ca *testpki.Authority) func(context.Context) bool {
	t.Helper()
	base, _ := c.Admin()
	probe := rest.AnonymousClientConfig(base)
	key := testpki.Key(t, testpki.P256)
	probe.CertData = testpki.CertPEM(ca.Sign(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "signet-probe"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, key.Public()))
	probe.KeyData = testpki.KeyPEM(t, key)
	client, err := kubernetes.NewForConfig(probe)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) bool {
		_, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return err == nil
	}
}
