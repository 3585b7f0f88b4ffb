package controlplane_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/testpki"
)

// TestNodeBootstrapParts starts a control plane as the kubelet end-to-end test does: a client
// certificate from an extra client CA authenticates as its subject; a bootstrap token
// authenticates as system:bootstrap:<id> in the bootstrap groups; and with kubeadm's bindings
// and kube-controller-manager's csrapproving controller, the token's kubelet client CSR
// (made by client-go's csr.RequestCertificate, the kubelet's own code) is approved.
func TestNodeBootstrapParts(t *testing.T) {
	ca := testpki.CA(t)
	opts := controlplane.Options{ExtraClientCAs: ca.CertPEM(), APIServerFlags: controlplane.BootstrapTokenFlags()}
	c := controlplanetest.Start(t, opts)
	ctx := t.Context()
	cfg, _ := c.Admin()

	// A certificate from the extra CA authenticates.
	extra := rest.AnonymousClientConfig(cfg)
	key := testpki.Key(t, testpki.P256)
	extra.CertData = testpki.CertPEM(ca.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:probe", Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, key.Public()))
	extra.KeyData = testpki.KeyPEM(t, key)
	if got := whoami(ctx, t, extra); got.Username != "system:node:probe" || !slices.Contains(got.Groups, "system:nodes") {
		t.Errorf("extra-CA client authenticated as %q %q, want system:node:probe in system:nodes", got.Username, got.Groups)
	}

	tok := controlplane.BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	// The token authenticator reads Secrets through an informer: wait until it knows the token.
	var got authenticationv1.UserInfo
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = whoamiErr(ctx, c.BootstrapConfig(tok))
		return got.Username != "", nil
	})
	if err != nil || got.Username != tok.Username() || !slices.Contains(got.Groups, "system:bootstrappers") || !slices.Contains(got.Groups, controlplane.BootstrapGroup) {
		t.Fatalf("bootstrap token authenticated as %q %q (%v), want %s in system:bootstrappers and %s", got.Username, got.Groups, err, tok.Username(), controlplane.BootstrapGroup)
	}

	kcm, err := c.StartControllerManager(t.TempDir(), []string{"csrapproving"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	joiner, err := kubernetes.NewForConfig(c.BootstrapConfig(tok))
	if err != nil {
		t.Fatal(err)
	}
	key = testpki.Key(t, testpki.P256)
	csrPEM := testpki.CSR(t, key, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:probe", Organization: []string{"system:nodes"}}})
	name, _, err := csr.RequestCertificate(joiner, csrPEM, "",
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		t.Fatal(err)
	}
	_, admin := c.Admin()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := kcm.Running(); err != nil {
			return false, err
		}
		obj, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(obj.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
			return c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue
		}), nil
	})
	if err != nil {
		t.Fatalf("kube-controller-manager did not approve the bootstrap CSR %s: %v%s", name, err, kcm.Explain())
	}
	if err := kcm.Stop(); err != nil {
		t.Error(err)
	}
}

// whoami returns who the apiserver says cfg authenticates as (kubectl auth whoami).
func whoami(ctx context.Context, t *testing.T, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	u := whoamiErr(ctx, cfg)
	if u.Username == "" {
		t.Fatalf("SelfSubjectReview as %s failed", cfg.Host)
	}
	return u
}

// whoamiErr is whoami returning the zero UserInfo on error.
func whoamiErr(ctx context.Context, cfg *rest.Config) authenticationv1.UserInfo {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}
	}
	return r.Status.UserInfo
}
