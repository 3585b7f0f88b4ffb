package integration

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	csrutil "k8s.io/client-go/util/certificate/csr"

	"github.com/signet-pki/signet/internal/testcluster"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/devpki"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher/signerclient"
)

// Timeouts of the differential test's asynchronous steps.
const (
	diffAuthTimeout   = 30 * time.Second // the token authenticator learning the bootstrap token
	diffKCMTimeout    = 60 * time.Second // kube-controller-manager deciding an approved CSR
	diffSignetTimeout = 30 * time.Second // Signet answering (transient errors retried)
)

// bootstrapToken is the token the joining kubelet of the differential test uses.
var bootstrapToken = testcluster.BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef"}

// differential is a control plane with bootstrap token authentication and
// kube-controller-manager's CSR signer (its own CA) beside a Signet server serving the kubelet
// signers (another CA), asked as the watcher asks, but without a watcher.
type differential struct {
	cluster  *testcluster.Cluster
	kcm      *testcluster.Process
	kcmCA    *x509.Certificate
	signet   *signerclient.Client
	signetCA *x509.Certificate
	as       map[string]identity
}

// identity is a requester of the differential test: its client and what the apiserver should
// record in spec.username and spec.groups.
type identity struct {
	client   kubernetes.Interface
	username string
	group    string // one of spec.groups
}

// TestDifferentialKubeletRequesters compares Signet's kubernetes.io kubelet profiles (default
// settings, default lint gate) with kube-controller-manager's signer on the same approved
// CSRs, created by real identities (a bootstrap token, nodes, a plain user) through the
// kubelet's own client code: where both issue, the certificates must agree field by field
// (see certDiffs; only the serial's form differs, by design: see checkSerials); where Signet
// refuses, the refusal is a deliberate, listed difference (the requester rules:
// kube-controller-manager never looks at the requester) and must be a PolicyViolation naming
// the rule.
func TestDifferentialKubeletRequesters(t *testing.T) {
	d := startDifferential(t)
	for _, tc := range kubeletRequesterCases() {
		t.Run(tc.name, func(t *testing.T) { d.run(t, tc) })
	}
}

// startDifferential starts the control plane, kube-controller-manager and Signet.
func startDifferential(t *testing.T) *differential {
	t.Helper()
	d := &differential{}
	d.cluster, d.as = startDifferentialCluster(t)
	d.kcm, d.kcmCA = startKCMSigner(t, d.cluster)
	d.signet, d.signetCA = startKubeletSignet(t)
	return d
}

// startDifferentialCluster starts a control plane that authenticates bootstrap tokens, with
// kubeadm's node bootstrap bindings, bootstrapToken, and the identities of the cases.
func startDifferentialCluster(t *testing.T) (*testcluster.Cluster, map[string]identity) {
	t.Helper()
	c := testcluster.StartT(t, testcluster.Options{APIServerFlags: testcluster.BootstrapTokenFlags()})
	ctx := t.Context()
	if err := c.AddBootstrapToken(ctx, bootstrapToken, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	joiner, err := kubernetes.NewForConfig(c.BootstrapConfig(bootstrapToken))
	if err != nil {
		t.Fatal(err)
	}
	// The token authenticator learns Secrets through an informer: wait until it knows the token.
	var who authenticationv1.UserInfo
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, diffAuthTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := joiner.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return false, nil // not known yet
		}
		who = r.Status.UserInfo
		return true, nil
	})
	if err != nil || who.Username != bootstrapToken.Username() {
		t.Fatalf("bootstrap token %s: authenticated as %q (%v), want %s", bootstrapToken.ID, who.Username, err, bootstrapToken.Username())
	}
	as := map[string]identity{asBootstrapToken: {client: joiner, username: bootstrapToken.Username(), group: "system:bootstrappers"}}
	for key, u := range map[string]struct{ name, group string }{
		asNodeA: {"system:node:worker-a", "system:nodes"},
		asNodeB: {"system:node:worker-b", "system:nodes"},
		asAlice: {"alice", "developers"},
	} {
		user, err := c.AddRequester(u.name, []string{u.group})
		if err != nil {
			t.Fatal(err)
		}
		as[key] = identity{client: user.Client(), username: u.name, group: u.group}
	}
	return c, as
}

// startKCMSigner starts kube-controller-manager's csrsigning controller with a CA of its own
// (PKCS#8 key) and a 24h signing duration, stopped when the test ends.
func startKCMSigner(t *testing.T, c *testcluster.Cluster) (*testcluster.Process, *x509.Certificate) {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.CA(t)
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "kcm-ca.crt"), filepath.Join(dir, "kcm-ca.key")
	if err := os.WriteFile(certFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	kcm, err := c.StartControllerManager(dir, []string{"csrsigning"},
		"--cluster-signing-cert-file="+certFile, "--cluster-signing-key-file="+keyFile, "--cluster-signing-duration=24h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kcm.Stop(); err != nil {
			t.Errorf("stopping kube-controller-manager: %v (log %s)", err, kcm.LogPath())
		}
	})
	return kcm, ca.Cert
}

// startKubeletSignet starts a Signet server for kubernetes.io/kube-apiserver-client-kubelet
// and kubernetes.io/kubelet-serving (one CA, default profiles, default lint gate, 24h
// maximum) and returns the watcher's client of it.
func startKubeletSignet(t *testing.T) (*signerclient.Client, *x509.Certificate) {
	t.Helper()
	s := newSignet(t, certificatesv1.KubeAPIServerClientKubeletSignerName, 24*time.Hour)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
	serving := s.cfg.Signers[0]
	serving.Name = certificatesv1.KubeletServingSignerName
	serving.Profile = profile.Spec{Name: profile.NameKubeletServing}
	s.cfg.Signers = append(s.cfg.Signers, serving)
	if s.cfg.Lint.Disabled || s.cfg.Signers[0].Lint != nil {
		t.Fatal("the differential test needs the default lint gate")
	}
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	client, err := signerclient.New(signerclient.Config{
		Address:    s.addr,
		CAFile:     filepath.Join(s.state, devpki.TLSCACert),
		CertFile:   filepath.Join(s.state, devpki.ClientCert),
		KeyFile:    filepath.Join(s.state, devpki.ClientKey),
		RPCTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, s.caCert
}

// run creates the case's CSR as its identity, approves it, waits for kube-controller-manager's
// outcome, then asks Signet with the same object and checks both against the case.
func (d *differential) run(t *testing.T, tc kubeletCase) {
	key := testpki.Key(t, tc.key)
	obj, approvedAt := d.request(t, tc, key)
	obj, seenAt := d.waitKCM(t, obj.Name)
	kcmCert := d.checkKCM(t, tc, obj)

	start := time.Now()
	issued, err := d.askSignet(t, obj)
	end := time.Now()
	var signetCert *x509.Certificate
	switch tc.signet {
	case issues:
		if err != nil {
			reason, msg, _ := signerclient.Classify(err)
			t.Fatalf("Signet refused (%s: %s), want a certificate (KCM issued: %v)", reason, msg, kcmCert != nil)
		}
		signetCert = checkChain(t, "Signet", issued.Chain, d.signetCA, key.Public(), tc.lifetime)
		checkBackdate(t, "Signet", signetCert, start, end)
	case refuses:
		checkRefusal(t, tc, issued, err)
	}
	if kcmCert != nil {
		checkBackdate(t, "KCM", kcmCert, approvedAt, seenAt)
	}
	if kcmCert != nil && signetCert != nil {
		for _, diff := range certDiffs(kcmCert, signetCert) {
			t.Errorf("certificates differ: %s", diff)
		}
		checkSerials(t, kcmCert, signetCert)
		t.Logf("both issue; KCM: %s", describeCert(kcmCert))
		t.Logf("both issue; Signet: %s", describeCert(signetCert))
	}
}

// request creates the case's CSR as its identity with the kubelet's own client code
// (csr.RequestCertificateWithContext), checks the requester the apiserver recorded, and
// approves it as admin. It returns the CSR and the time just before approval.
func (d *differential) request(t *testing.T, tc kubeletCase, key crypto.Signer) (*certificatesv1.CertificateSigningRequest, time.Time) {
	t.Helper()
	ctx := t.Context()
	id := d.as[tc.as]
	tmpl := tc.csr
	name, _, err := csrutil.RequestCertificateWithContext(ctx, id.client, testpki.CSR(t, key, &tmpl), "", tc.signer, tc.duration, tc.usages, key)
	if err != nil {
		t.Fatalf("creating the CSR as %s: %v", tc.as, err)
	}
	_, admin := d.cluster.Admin()
	obj, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Spec.Username != id.username || !slices.Contains(obj.Spec.Groups, id.group) {
		t.Fatalf("CSR %s: requester %q in %q, want %q in %q", name, obj.Spec.Username, obj.Spec.Groups, id.username, id.group)
	}
	approvedAt := time.Now()
	if err := d.cluster.Approve(ctx, name); err != nil {
		t.Fatal(err)
	}
	return obj, approvedAt
}

// waitKCM polls the CSR until kube-controller-manager has decided it (a certificate or a
// Failed condition) and returns it with the time it was seen decided.
func (d *differential) waitKCM(t *testing.T, name string) (*certificatesv1.CertificateSigningRequest, time.Time) {
	t.Helper()
	_, admin := d.cluster.Admin()
	var last *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, diffKCMTimeout, true, func(ctx context.Context) (bool, error) {
		if err := d.kcm.Running(); err != nil {
			return false, err
		}
		obj, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = obj
		return signed(obj) || condition(obj, certificatesv1.CertificateFailed) != nil, nil
	})
	if err != nil {
		t.Fatalf("CSR %s: kube-controller-manager did not decide within %s: %v; last status %+v; log %s%s",
			name, diffKCMTimeout, err, last.Status, d.kcm.LogPath(), d.kcm.Explain())
	}
	return last, time.Now()
}

// checkKCM checks kube-controller-manager's outcome against the case and returns its
// certificate (nil if it refused).
func (d *differential) checkKCM(t *testing.T, tc kubeletCase, obj *certificatesv1.CertificateSigningRequest) *x509.Certificate {
	t.Helper()
	failed := condition(obj, certificatesv1.CertificateFailed)
	switch {
	case tc.kcm == issues && failed != nil:
		t.Fatalf("KCM refused (%s: %s), want a certificate; log %s%s", failed.Reason, failed.Message, d.kcm.LogPath(), d.kcm.Explain())
	case tc.kcm == refuses && failed == nil:
		t.Fatalf("KCM issued a certificate, want a refusal; log %s%s", d.kcm.LogPath(), d.kcm.Explain())
	case tc.kcm == refuses:
		if failed.Reason != "SignerValidationFailure" {
			t.Errorf("KCM refused with reason %s (%s), want SignerValidationFailure", failed.Reason, failed.Message)
		}
		return nil
	}
	pub, err := publicKeyOf(obj.Spec.Request)
	if err != nil {
		t.Fatal(err)
	}
	return checkChain(t, "KCM", obj.Status.Certificate, d.kcmCA, pub, tc.lifetime)
}

// askSignet asks Signet to sign obj as the watcher would (signerclient.SignCSR), retrying
// transient errors; it returns the answer or the terminal error.
func (d *differential) askSignet(t *testing.T, obj *certificatesv1.CertificateSigningRequest) (signerclient.Issued, error) {
	t.Helper()
	var (
		issued  signerclient.Issued
		lastErr error
	)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, diffSignetTimeout, true, func(ctx context.Context) (bool, error) {
		issued, lastErr = d.signet.SignCSR(ctx, obj)
		_, _, terminal := signerclient.Classify(lastErr)
		return lastErr == nil || terminal, nil
	})
	if err != nil {
		t.Fatalf("Signet gave no answer within %s: %v (last error: %v)", diffSignetTimeout, err, lastErr)
	}
	return issued, lastErr
}

// checkRefusal checks that Signet refused as the case says: a terminal PolicyViolation whose
// message names the case's rule.
func checkRefusal(t *testing.T, tc kubeletCase, issued signerclient.Issued, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("Signet issued a certificate (%d bytes of chain), want a refusal naming %q: %s", len(issued.Chain), tc.rule, tc.why)
	}
	reason, msg, terminal := signerclient.Classify(err)
	if !terminal || reason != "PolicyViolation" || !strings.Contains(msg, tc.rule) {
		t.Errorf("Signet refused with %s %q (terminal %v), want a terminal PolicyViolation naming %q", reason, msg, terminal, tc.rule)
	}
	t.Logf("deliberate difference: KCM issues, Signet refuses (%s: %s); why: %s", reason, msg, tc.why)
}

// publicKeyOf returns the public key of a PEM PKCS#10 request.
func publicKeyOf(csrPEM []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		return nil, fmt.Errorf("spec.request: no PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	return req.PublicKey, nil
}

// Tolerances of the comparison: certificates are signed at different moments, and X.509
// times have whole seconds.
const (
	lifetimeSlack = 3 * time.Second
	kcmBackdate   = 5 * time.Minute // kube-controller-manager's NotBefore = signing time − 5 min
)

// checkChain parses the chain who issued: one leaf (no intermediates on either side), for the
// request's key pub, chaining to ca, with a positive serial of at most 20 octets and the
// case's lifetime. It returns the leaf.
func checkChain(t *testing.T, who string, chainPEM []byte, ca *x509.Certificate, pub crypto.PublicKey, lifetime time.Duration) *x509.Certificate {
	t.Helper()
	chain := parseChain(t, chainPEM)
	leaf := chain[0]
	if len(chain) != 1 {
		t.Errorf("%s: chain of %d certificates, want the leaf only", who, len(chain))
	}
	if k, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(leaf.PublicKey) {
		t.Errorf("%s: the certificate is not for the request's key", who)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("%s: the certificate does not chain to its CA: %v", who, err)
	}
	if s := leaf.SerialNumber; s.Sign() <= 0 || s.BitLen() > 159 {
		t.Errorf("%s: serial %x, want positive and at most 20 octets (RFC 5280)", who, s)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); absDuration(got-lifetime) > lifetimeSlack {
		t.Errorf("%s: lifetime (NotAfter-NotBefore) %s, want %s", who, got, lifetime)
	}
	return leaf
}

// checkBackdate checks that cert's NotBefore is kcmBackdate before a signing time between
// from and to (X.509 times are truncated to the second).
func checkBackdate(t *testing.T, who string, cert *x509.Certificate, from, to time.Time) {
	t.Helper()
	earliest, latest := from.Add(-kcmBackdate-lifetimeSlack), to.Add(-kcmBackdate+lifetimeSlack)
	if cert.NotBefore.Before(earliest) || cert.NotBefore.After(latest) {
		t.Errorf("%s: NotBefore %s is not %s before signing (signed between %s and %s)",
			who, cert.NotBefore.Format(time.RFC3339), kcmBackdate, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
