package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	csrutil "k8s.io/client-go/util/certificate/csr"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

// TestKubeletServingProfile takes over kubernetes.io/kubelet-serving: a node's own serving
// CSR is signed; a CSR whose subject names another node, submitted by this node, ends Failed
// with the requester rule in the message; so does one without DNS or IP SAN. The requester
// identity is the real one the apiserver authenticated (spec.username, spec.groups).
func TestKubeletServingProfile(t *testing.T) {
	s := newSignet(t, "kubernetes.io/kubelet-serving", 24*time.Hour)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeletServing}
	s.startServer()
	s.startWatcher()
	node, err := cluster.AddRequester("system:node:worker-1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	nodeSubject := pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}}

	good := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{
		Subject: nodeSubject, DNSNames: []string{"worker-1"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.10")},
	}, nil, usages...)
	impersonating := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:worker-2", Organization: []string{"system:nodes"}}, DNSNames: []string{"worker-2"},
	}, nil, usages...)
	noSAN := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{Subject: nodeSubject}, nil, usages...)
	for _, name := range []string{good.Name, impersonating.Name, noSAN.Name} {
		if err := cluster.Approve(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	got := waitFor(t, node.Client(), good.Name, 30*time.Second, "signed", signed)
	leaf := parseChain(t, got.Status.Certificate)[0]
	if leaf.Subject.CommonName != "system:node:worker-1" || leaf.DNSNames[0] != "worker-1" || !leaf.IPAddresses[0].Equal(net.ParseIP("192.0.2.10")) {
		t.Errorf("kubelet serving certificate: subject %s, SANs %v %v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d != 24*time.Hour {
		t.Errorf("lifetime %s, want 24h (a lifetime of 8 h or more is not extended by the backdate)", d)
	}
	for _, tc := range []struct{ name, want string }{
		{impersonating.Name, `requester: username equals the common name`},
		{noSAN.Name, `sans: at least one DNS name or IP address`},
	} {
		got := waitFor(t, node.Client(), tc.name, 30*time.Second, "Failed", func(c *certificatesv1.CertificateSigningRequest) bool {
			return condition(c, certificatesv1.CertificateFailed) != nil
		})
		cond := condition(got, certificatesv1.CertificateFailed)
		if cond.Reason != "PolicyViolation" || !strings.Contains(cond.Message, tc.want) {
			t.Errorf("CSR %s: Failed %s %q, want PolicyViolation naming %q", tc.name, cond.Reason, cond.Message, tc.want)
		}
	}
}

// TestKubeletClientBootstrap takes over a kube-apiserver-client-kubelet signer (under its
// own name, the shared control plane's kube-controller-manager-less cluster approving by hand)
// and checks its requester rule with real identities: a node's join, requested as the kubelet
// requests it (client-go's csr.RequestCertificate) with a real bootstrap token, is signed and
// recorded on bootstrap grounds; a plain user's CSR for a node ends Failed with the rule in
// the message and nothing issued; on a signer with bootstrap.disabled the same join ends
// Failed with a message naming the option.
func TestKubeletClientBootstrap(t *testing.T) {
	ctx := context.Background()
	open := newSignet(t, "example.com/kubelet-client", 24*time.Hour)
	open.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
	closed := newSignet(t, "example.com/kubelet-client-closed", 24*time.Hour)
	closed.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: &profile.BootstrapSpec{Disabled: true}}
	for _, s := range []*signet{open, closed} {
		s.startServer()
		s.startWatcher()
	}
	tok := controlplane.BootstrapToken{ID: "join01", Secret: "0123456789abcdef"}
	if err := cluster.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	joiner := bootstrapClient(t, tok)
	mallory, err := cluster.AddRequester("mallory", []string{"dev"})
	if err != nil {
		t.Fatal(err)
	}

	join := requestNodeCertificate(t, joiner, open.signerName, "worker-7", testpki.P256)
	rsaJoin := requestNodeCertificate(t, joiner, open.signerName, "worker-8", testpki.RSA2048)
	refusedJoin := requestNodeCertificate(t, joiner, closed.signerName, "worker-7", testpki.P256)
	plain := submit(t, mallory, open.signerName, p256(t), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:worker-7", Organization: []string{"system:nodes"}},
	}, nil, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	for _, name := range []string{join, rsaJoin, refusedJoin, plain.Name} {
		if err := cluster.Approve(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	_, admin := cluster.Admin()
	got := waitFor(t, admin, join, 30*time.Second, "signed", signed)
	if leaf := parseChain(t, got.Status.Certificate)[0]; leaf.Subject.CommonName != "system:node:worker-7" {
		t.Errorf("join certificate for %q, want system:node:worker-7", leaf.Subject.CommonName)
	}
	// An RSA kubelet asks for key encipherment with client auth; the default lint gate accepts
	// it, as kube-controller-manager signs it.
	got = waitFor(t, admin, rsaJoin, 30*time.Second, "signed", signed)
	wantUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	if leaf := parseChain(t, got.Status.Certificate)[0]; !slices.Equal(got.Spec.Usages, wantUsages) ||
		leaf.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("RSA join: usages %q, certificate key usage %b, extended %v; want key encipherment with client auth", got.Spec.Usages, leaf.KeyUsage, leaf.ExtKeyUsage)
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{plain.Name, []string{`username is "mallory"`, "neither the node nor in a bootstrap group"}},
		{refusedJoin, []string{tok.Username(), "bootstrap.disabled: true"}},
	} {
		got := waitFor(t, admin, tc.name, 30*time.Second, "Failed", func(c *certificatesv1.CertificateSigningRequest) bool {
			return condition(c, certificatesv1.CertificateFailed) != nil
		})
		cond := condition(got, certificatesv1.CertificateFailed)
		for _, want := range tc.want {
			if cond.Reason != "PolicyViolation" || !strings.Contains(cond.Message, want) {
				t.Errorf("CSR %s: Failed %s %q, want PolicyViolation containing %q", tc.name, cond.Reason, cond.Message, want)
			}
		}
		if len(got.Status.Certificate) != 0 {
			t.Errorf("CSR %s: refused, yet it has a certificate", tc.name)
		}
	}
	checkLedger(t, open, join, ledger.Issued, `bootstrap: requester in group "system:bootstrappers"`)
	checkLedger(t, open, plain.Name, ledger.Refused, "")
	checkLedger(t, closed, refusedJoin, ledger.Refused, "")
}

// bootstrapClient returns a client authenticating with tok, once the apiserver's token
// authenticator knows it (it reads bootstrap token Secrets through an informer).
func bootstrapClient(t *testing.T, tok controlplane.BootstrapToken) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(cluster.BootstrapConfig(tok))
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return err == nil && r.Status.UserInfo.Username == tok.Username(), nil
	})
	if err != nil {
		t.Fatalf("bootstrap token %s never authenticated: %v", tok.ID, err)
	}
	return client
}

// requestNodeCertificate asks for node's client certificate with a key of type kt as a
// joining kubelet does: client-go's csr.RequestCertificate with the usages of client-go's
// certificate manager for that key (DefaultKubeletClientGetUsages: key encipherment added for
// RSA). It returns the CSR's name.
func requestNodeCertificate(t *testing.T, client kubernetes.Interface, signerName, node string, kt testpki.KeyType) string {
	t.Helper()
	key := testpki.Key(t, kt)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := csrutil.RequestCertificate(client, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "",
		signerName, nil, certificate.DefaultKubeletClientGetUsages(key), key)
	if err != nil {
		t.Fatalf("requesting %s's certificate: %v", node, err)
	}
	return name
}

// checkLedger checks that s's ledger holds one record of decision for the CSR name, with
// grounds.
func checkLedger(t *testing.T, s *signet, name string, decision ledger.Decision, grounds string) {
	t.Helper()
	_, admin := cluster.Admin()
	csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found []ledger.Record
	if err := ledger.Replay(s.cfg.Ledger.Dir, time.Time{}, func(r ledger.Record) error {
		if r.ObjectUID == string(csr.UID) {
			found = append(found, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Decision != decision || found[0].Grounds != grounds || found[0].Requester != csr.Spec.Username {
		t.Errorf("ledger records of CSR %s (requester %s): %+v; want one %s record with grounds %q", name, csr.Spec.Username, found, decision, grounds)
	}
}
