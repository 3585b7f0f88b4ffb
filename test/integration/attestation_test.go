package integration

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/nodeagent"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/internal/tpmconn"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher/tpmapprover"
)

// The TPM-attested kubelet signers of these tests.
const (
	attestedSigner        = "signet.test/kube-apiserver-client-kubelet-tpm"
	attestedServingSigner = "signet.test/kubelet-serving-tpm"
)

// attestedSignet is a signing server for attestedSigner with attestation on, trusting EK
// certificates that chain to the manufacturer roots (the manufactured swtpm's local CA), and
// a watcher that signs and approves for it; started.
func attestedSignet(t *testing.T, roots ...*x509.Certificate) (*signet, *controlplane.Cluster) {
	t.Helper()
	s := newSignet(t, attestedSigner, time.Hour)
	// A control plane of its own, whose API server trusts the signer's CA for client
	// certificates, as a cluster whose kubelet client CA is Signet's does.
	c := controlplanetest.Start(t, controlplane.Options{
		ExtraClientCAs: mustRead(t, filepath.Join(s.state, devpki.SignerCACert)),
		APIServerFlags: controlplane.BootstrapTokenFlags(),
	})
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeletClientTPM}
	var pemRoots []byte
	for _, c := range roots {
		pemRoots = append(pemRoots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	rootsFile := filepath.Join(s.state, "ek-roots.pem")
	if err := os.WriteFile(rootsFile, pemRoots, 0o600); err != nil {
		t.Fatal(err)
	}
	s.cfg.Attestation = config.Attestation{Address: freeAddress(t), EKRootsFile: rootsFile}
	s.cfg.Signers = append(s.cfg.Signers, config.Signer{Name: attestedServingSigner, Key: s.cfg.Signers[0].Key, Certificate: s.cfg.Signers[0].Certificate,
		MaxLifetime: s.cfg.Signers[0].MaxLifetime, Rotation: s.cfg.Signers[0].Rotation, Profile: profile.Spec{Name: profile.NameKubeletServingTPM}})
	for i := range s.cfg.Clients {
		if !slices.Contains(s.cfg.Clients[i].Signers, "*") {
			s.cfg.Clients[i].Signers = append(s.cfg.Clients[i].Signers, attestedServingSigner)
		}
	}
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	both := []string{attestedSigner, attestedServingSigner}
	u, err := c.AddApprovingWatcher("watcher-attested", both, both)
	if err != nil {
		t.Fatal(err)
	}
	wcfg := s.watcherConfig(s.addr)
	wcfg.SignerNames = both
	wcfg.TPMApprover.SignerNames = both
	wcfg.NodeAddresses.SignerNames = []string{attestedServingSigner}
	runWatcher(t, wcfg, u.Client())
	return s, c
}

// agentFor is a node agent for nodeName on tpm, joining with the bootstrap credentials boot.
func (s *signet) agentFor(t *testing.T, tpm *swtpmtest.Manufactured, nodeName string, boot *rest.Config, cacheDir string, at ...time.Time) *nodeagent.Agent {
	t.Helper()
	conn, err := tpmconn.OpenSocket(tpm.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(s.state, devpki.TLSCACert)))
	cfg := nodeagent.Config{
		TPM: conn, AttestURL: "https://" + s.cfg.Attestation.Address, AttestRoots: roots,
		NodeName: nodeName, ProviderID: "tpm://" + nodeName, SignerName: attestedSigner, ServingSignerName: attestedServingSigner,
		Bootstrap: boot, CacheDir: cacheDir, Lifetime: time.Hour,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	if len(at) > 0 {
		cfg.Clock = testingclock.NewFakePassiveClock(at[0])
	}
	a, err := nodeagent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAttestedNodeJoins joins a node through TPM attestation on a real API server, with a
// swtpm manufactured with an EK certificate as the node's TPM and its CA as the server's
// manufacturer root: the node agent attests to the signing server, creates its
// CertificateSigningRequest with a bootstrap token, the watcher's approver has the server
// verify the evidence and approves, the watcher signs, and the API server authenticates the
// certificate as system:node:<name>. Past its renewal point the node attests again and asks
// as itself. The same TPM asking as another node, and a bootstrap token asking without
// evidence, are denied with the server's reason.
func TestAttestedNodeJoins(t *testing.T) {
	ctx := context.Background()
	tpm := swtpmtest.StartManufactured(t)
	s, c := attestedSignet(t, tpm.Root, tpm.Intermediate)
	tok := controlplane.BootstrapToken{ID: "attest", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	grantNodesCSRs(t, c)
	boot := c.BootstrapConfig(tok)

	cacheA := t.TempDir()
	cred, err := s.agentFor(t, tpm, "attested-node-a", boot, cacheA).Credential(ctx)
	if err != nil {
		t.Fatalf("joining through attestation: %v", err)
	}
	joined := checkNodeCertificate(t, s, cred, "attested-node-a")
	if who := whoamiAs(t, boot, cred); who.Username != "system:node:attested-node-a" || !slices.Contains(who.Groups, "system:nodes") {
		t.Fatalf("the API server authenticates the node's certificate as %q %q", who.Username, who.Groups)
	}
	if again, err := s.agentFor(t, tpm, "attested-node-a", boot, cacheA).Credential(ctx); err != nil || string(again.CertPEM) != string(cred.CertPEM) {
		t.Fatalf("a second call before the renewal point: %v; the cached certificate: %v", err, err == nil && string(again.CertPEM) == string(cred.CertPEM))
	}
	_, admin := c.Admin()
	approved := csrsOf(t, admin, "system:bootstrap:"+tok.ID)
	if len(approved) != 1 || conditionReason(approved[0], certificatesv1.CertificateApproved) != tpmapprover.ReasonVerified {
		t.Fatalf("the join CSR: %+v", approved)
	}

	// Past the renewal point the node attests again and asks as itself, with its certificate.
	renewed, err := s.agentFor(t, tpm, "attested-node-a", boot, cacheA, cred.RenewAt.Add(time.Second)).Credential(ctx)
	if err != nil {
		t.Fatalf("renewing through attestation: %v", err)
	}
	if leaf := checkNodeCertificate(t, s, renewed, "attested-node-a"); leaf.SerialNumber.Cmp(joined.SerialNumber) == 0 {
		t.Fatal("the renewal returned the old certificate")
	}
	if mine := csrsOf(t, admin, "system:node:attested-node-a"); len(mine) != 1 || conditionReason(mine[0], certificatesv1.CertificateApproved) != tpmapprover.ReasonVerified {
		t.Fatalf("the renewal CSR, made as the node: %+v", mine)
	}

	// Its serving certificate, for the Node's own addresses, which the watcher forwards; a
	// foreign IP is denied by the approver, naming it.
	createNode(t, admin, "attested-node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "attested-node-a"})
	agentA := s.agentFor(t, tpm, "attested-node-a", boot, cacheA)
	srv, err := agentA.Serving(ctx, []string{"attested-node-a"}, []net.IP{net.ParseIP("10.0.0.7")})
	if err != nil {
		t.Fatalf("obtaining the serving certificate: %v", err)
	}
	if leaf, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM); err != nil || len(leaf.Leaf.IPAddresses) != 1 || !leaf.Leaf.IPAddresses[0].Equal(net.ParseIP("10.0.0.7")) {
		t.Fatalf("serving certificate: %v", err)
	}
	if _, err := agentA.Serving(ctx, []string{"attested-node-a"}, []net.IP{net.ParseIP("10.9.9.9")}); err == nil {
		t.Fatal("a serving certificate for a foreign IP was issued")
	}
	if msg := waitDeniedOf(t, admin, attestedServingSigner, "system:node:attested-node-a", "PolicyViolation"); !strings.Contains(msg, "IP address 10.9.9.9 is not one of the node's addresses") {
		t.Fatalf("serving denial %q does not name the foreign IP", msg)
	}

	// The same TPM asking as another node: the approver denies it, naming the binding.
	_, err = s.agentFor(t, tpm, "attested-node-b", boot, t.TempDir()).Credential(ctx)
	if err == nil {
		t.Fatal("the TPM of attested-node-a obtained a certificate as attested-node-b")
	}
	denied := waitDenied(t, admin, "system:bootstrap:"+tok.ID, "AttestationFailed")
	if !strings.Contains(denied, `bound to node "attested-node-a"`) {
		t.Fatalf("denial message %q does not name the binding", denied)
	}

	// A bootstrap token asking for a node with no evidence at all.
	csrPEM := plainNodeCSR(t, "attested-node-c")
	bootClient, err := kubernetes.NewForConfig(boot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bootClient.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "no-evidence-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM, SignerName: attestedSigner,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if msg := waitDenied(t, admin, "system:bootstrap:"+tok.ID, "MalformedRequest"); !strings.Contains(msg, "ATTESTATION PROVIDER block is missing") {
		t.Fatalf("denial message %q", msg)
	}

	// The ledger holds the binding of the node's EK, then its issuance.
	var bound, issued bool
	for _, r := range s.records(t) {
		bound = bound || (r.Decision == ledger.Bound && r.Node == "attested-node-a")
		issued = issued || (r.Decision == ledger.Issued && bound && strings.Contains(r.Grounds, `attested: node "attested-node-a"`))
	}
	if !bound || !issued {
		t.Fatal("the ledger lacks the binding or the attested issuance")
	}
}

// whoamiAs is who the API server says a client with cred's certificate is (kubectl auth
// whoami).
func whoamiAs(t *testing.T, base *rest.Config, cred *nodeagent.Credential) authenticationv1.UserInfo {
	t.Helper()
	cfg := rest.AnonymousClientConfig(base)
	cfg.CertData, cfg.KeyData = cred.CertPEM, cred.KeyPEM
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("auth whoami with the node's certificate: %v", err)
	}
	return r.Status.UserInfo
}

// checkNodeCertificate checks that cred is a client certificate for nodeName that chains to
// the signer's CA.
func checkNodeCertificate(t *testing.T, s *signet, cred *nodeagent.Credential, nodeName string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(cred.CertPEM)
	if block == nil {
		t.Fatal("no certificate in the credential")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(s.caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the node's certificate does not verify as a client certificate of the signer's CA: %v", err)
	}
	if leaf.Subject.CommonName != "system:node:"+nodeName || !slices.Equal(leaf.Subject.Organization, []string{"system:nodes"}) {
		t.Fatalf("the node's certificate is for %s", leaf.Subject)
	}
	return leaf
}

// createNode creates a Node with status addresses, as a kubelet registering would.
func createNode(t *testing.T, admin kubernetes.Interface, name string, addrs ...corev1.NodeAddress) {
	t.Helper()
	ctx := context.Background()
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = addrs
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grantNodesCSRs lets the group system:nodes create CSRs (system:node-bootstrapper), as a
// cluster lets its kubelets renew.
func grantNodesCSRs(t *testing.T, c *controlplane.Cluster) {
	t.Helper()
	_, admin := c.Admin()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "signet-test:nodes-create-csrs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// csrsOf lists the CSRs of attestedSigner created by username.
func csrsOf(t *testing.T, admin kubernetes.Interface, username string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	return csrsOfSigner(t, admin, attestedSigner, username)
}

// csrsOfSigner lists the CSRs of signer created by username.
func csrsOfSigner(t *testing.T, admin kubernetes.Interface, signer, username string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if c.Spec.SignerName == signer && c.Spec.Username == username {
			out = append(out, c)
		}
	}
	return out
}

// conditionReason is the reason of csr's condition of type typ, "" without one.
func conditionReason(csr certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) string {
	for _, c := range csr.Status.Conditions {
		if c.Type == typ {
			return c.Reason
		}
	}
	return ""
}

// waitDenied waits for a CSR of attestedSigner by username denied with reason, not seen
// denied before, and returns its message.
func waitDenied(t *testing.T, admin kubernetes.Interface, username, reason string) string {
	t.Helper()
	return waitDeniedOf(t, admin, attestedSigner, username, reason)
}

// waitDeniedOf is waitDenied for signer.
func waitDeniedOf(t *testing.T, admin kubernetes.Interface, signer, username, reason string) string {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range csrsOfSigner(t, admin, signer, username) {
			for _, cond := range c.Status.Conditions {
				if cond.Type == certificatesv1.CertificateDenied && cond.Reason == reason && !seenDenied[c.Name] {
					seenDenied[c.Name], msg = true, cond.Message
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no CSR of %s denied with reason %s: %v", username, reason, err)
	}
	return msg
}

// seenDenied are the denied CSRs waitDenied has returned.
var seenDenied = map[string]bool{}

// plainNodeCSR is a node client request with no attestation.
func plainNodeCSR(t *testing.T, nodeName string) []byte {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// records are the signing server's ledger records.
func (s *signet) records(t *testing.T) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	if err := ledger.Replay(s.cfg.Ledger.Dir, time.Time{}, func(r ledger.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
