package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// cluster is the one control plane shared by the tests of this package.
var cluster *Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	start := time.Now()
	c, err := Start(ctx, Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "controlplane: %s started in %v\n", c.Version(), time.Since(start).Round(time.Millisecond))
	cluster = c
	code := m.Run()
	stop := time.Now()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "controlplane: stopped in %v\n", time.Since(stop).Round(time.Millisecond))
	os.Exit(code)
}

func TestRequesterCSRCarriesRealIdentity(t *testing.T) {
	ctx := t.Context()
	req, err := cluster.AddRequester("alice", []string{"signet:requesters"})
	if err != nil {
		t.Fatal(err)
	}
	csr := createCSR(ctx, t, req.Client(), "example.com/signet")
	if csr.Spec.Username != "alice" {
		t.Errorf("spec.username = %q, want %q", csr.Spec.Username, "alice")
	}
	for _, g := range []string{"signet:requesters", "system:authenticated"} {
		if !slices.Contains(csr.Spec.Groups, g) {
			t.Errorf("spec.groups = %q, want it to contain %q", csr.Spec.Groups, g)
		}
	}
	resources, err := req.Client().Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil {
		t.Fatalf("discovering certificates.k8s.io/v1: %v", err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "certificatesigningrequests" }) {
		t.Errorf("certificates.k8s.io/v1 does not serve certificatesigningrequests: %+v", resources.APIResources)
	}
	// The requester has no rights beyond CSRs.
	_, err = req.Client().CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("requester listing secrets: err = %v, want Forbidden", err)
	}
}

func TestSignerMayOnlySignItsSigner(t *testing.T) {
	ctx := t.Context()
	req, err := cluster.AddRequester("bob", []string{"signet:requesters"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cluster.AddSigner("signet-watcher", []string{"example.com/signet"})
	if err != nil {
		t.Fatal(err)
	}
	csrs := signer.Client().CertificatesV1().CertificateSigningRequests()
	certPEM := selfSignedPEM(t)

	mine := createCSR(ctx, t, req.Client(), "example.com/signet")
	if err := cluster.Approve(ctx, mine.Name); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Approve(ctx, mine.Name); err != nil {
		t.Fatalf("approving twice: %v", err)
	}
	got, err := csrs.Get(ctx, mine.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("signer getting CSR: %v", err)
	}
	if !hasCondition(got, certificatesv1.CertificateApproved) {
		t.Fatalf("conditions after Approve = %+v, want Approved", got.Status.Conditions)
	}
	got.Status.Certificate = certPEM
	if _, err := csrs.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("signer writing certificate for its own signer: %v", err)
	}

	other := createCSR(ctx, t, req.Client(), "other.example.com/x")
	if err := cluster.Approve(ctx, other.Name); err != nil {
		t.Fatal(err)
	}
	got, err = csrs.Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("signer getting other CSR: %v", err)
	}
	got.Status.Certificate = certPEM
	_, err = csrs.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("signer writing certificate for another signer: err = %v, want Forbidden", err)
	} else {
		t.Logf("other signer: %v", err)
	}

	pending := createCSR(ctx, t, req.Client(), "example.com/signet")
	pending.Status.Conditions = append(pending.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: "True", Reason: "SelfApproved",
	})
	_, err = csrs.UpdateApproval(ctx, pending.Name, pending, metav1.UpdateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("signer approving: err = %v, want Forbidden", err)
	} else {
		t.Logf("approve: %v", err)
	}
}

// TestWatcherRules: AddWatcher's user may read PodCertificateRequests in every namespace and
// not create them; AddSigner's (a CSR-only signer) may not read them.
func TestWatcherRules(t *testing.T) {
	ctx := t.Context()
	watcher, err := cluster.AddWatcher("pcr-watcher", []string{"example.com/pods"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cluster.AddSigner("csr-only-signer", []string{"example.com/pods"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Client().CertificatesV1().PodCertificateRequests("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("watcher listing PodCertificateRequests in every namespace: %v", err)
	}
	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if _, err := watcher.Client().CertificatesV1().PodCertificateRequests("default").Create(ctx, pcr, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("watcher creating a PodCertificateRequest: err = %v, want Forbidden", err)
	}
	if _, err := signer.Client().CertificatesV1().PodCertificateRequests("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("CSR-only signer listing PodCertificateRequests: err = %v, want Forbidden", err)
	}
}

func TestDeny(t *testing.T) {
	ctx := t.Context()
	_, admin := cluster.Admin()
	csr := createCSR(ctx, t, admin, "example.com/signet")
	if err := cluster.Deny(ctx, csr.Name); err != nil {
		t.Fatal(err)
	}
	got, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(got, certificatesv1.CertificateDenied) {
		t.Errorf("conditions after Deny = %+v, want Denied", got.Status.Conditions)
	}
}

func TestWriteKubeconfig(t *testing.T) {
	u, err := cluster.AddUser("carol", []string{"signet:tools"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(u, path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading written kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review: %v", err)
	}
	if got := review.Status.UserInfo.Username; got != "carol" {
		t.Errorf("kubeconfig authenticates as %q, want carol", got)
	}
}

func TestMissingAssetsMentionsMakeKubeBins(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(t.Context(), Options{AssetsDir: dir})
	if err == nil {
		t.Fatal("Start with an empty assets dir succeeded")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{"make kube-bins", filepath.Join(dir, "etcd")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartFailureCarriesReason(t *testing.T) {
	_, err := Start(t.Context(), Options{APIServerFlags: map[string]string{"runtime-config": "no.such.group/v9=true"}})
	if err == nil {
		t.Fatal("Start with a bad --runtime-config succeeded")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "no.such.group") {
		t.Errorf("error does not carry the apiserver's reason: %v", err)
	}
}

func TestConfigureAPIServerFlags(t *testing.T) {
	args := envtest.EmptyArguments()
	configureAPIServer(args, Options{
		FeatureGates:   map[string]bool{"PodCertificateRequest": true, "ClusterTrustBundle": true, "Other": false},
		RuntimeConfig:  map[string]string{"certificates.k8s.io/v1beta1": "true"},
		APIServerFlags: map[string]string{"--v": "4"},
	})
	got := args.AsStrings(nil)
	for _, want := range []string{
		"--advertise-address=127.0.0.1",
		"--feature-gates=ClusterTrustBundle=true,Other=false,PodCertificateRequest=true",
		"--runtime-config=certificates.k8s.io/v1beta1=true",
		"--v=4",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("apiserver flags %q lack %q", got, want)
		}
	}
}

// createCSR creates, as client, a CSR for a fresh ECDSA P-256 key and signerName.
func createCSR(ctx context.Context, t *testing.T, client kubernetes.Interface, signerName string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "signet-test"},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "signet-test-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature},
		},
	}
	created, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR for %s: %v", signerName, err)
	}
	return created
}

// selfSignedPEM returns a throwaway self-signed certificate.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "signet-test"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// hasCondition reports whether csr has condition typ set to True.
func hasCondition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == typ && c.Status == "True" {
			return true
		}
	}
	return false
}
