package integration

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher/tpmapprover"
)

// The node of the attested kubelet test.
const (
	attestedNode     = "signet-attested-node"
	attestedNodeUser = "system:node:" + attestedNode
)

// TestRealKubeletAttested takes a real kubelet through its life with its client certificate
// from TPM attestation, with a manufactured swtpm as the node's TPM:
//   - the kubelet's kubeconfig calls signet-node as its exec credential plugin; signet-node
//     attests, asks with the bootstrap token, the watcher's approver has the server verify
//     the evidence and approves, Signet issues (ledger: the EK bound to the node, then the
//     issuance with grounds "attested: ...");
//   - the node registers, and the API server authenticates the kubelet as
//     system:node:<name>;
//   - the kubelet's own serving CSR (kubernetes.io/kubelet-serving, bindSANsToNode), approved
//     by hand, is issued for the node's own addresses, which the watcher forwards; one the
//     node asks for a foreign IP is refused, naming it;
//   - past the renewal point client-go runs the plugin again: the node attests again, asks as
//     itself, and the kubelet carries on with the new certificate.
func TestRealKubeletAttested(t *testing.T) {
	requireRoot(t)
	dir := nodeDir(t)
	ctx := context.Background()
	tpm := swtpmtest.StartManufactured(t)
	s, servingCA := attestedKubeletSignet(t, tpm)
	c, apiserverClientCA := kubeletCluster(t, s, servingCA, dir)
	_, admin := c.Admin()
	tok := controlplane.BootstrapToken{ID: "a77e57", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	signers := []string{attestedSigner, kubeletServing}
	w, err := c.AddApprovingWatcher("signet-watcher", signers, []string{attestedSigner})
	if err != nil {
		t.Fatal(err)
	}
	wcfg := s.watcherConfig(s.addr)
	wcfg.SignerNames = signers
	wcfg.TPMApprover.SignerNames = []string{attestedSigner}
	wcfg.NodeAddresses.SignerNames = []string{kubeletServing}
	runWatcher(t, wcfg, w.Client())

	cacheDir := filepath.Join(dir, "signet-node-cache")
	kubeconfig := execKubeconfig(t, dir, c, tok, tpm, s, cacheDir)
	runtime := startContainerd(t, dir)
	port := freePort(t)
	kubelet, files := startKubelet(t, kubeletOptions{
		dir: dir, nodeName: attestedNode, runtime: runtime, clientCAFile: apiserverClientCA, port: port, kubeconfig: kubeconfig,
	})
	alive := kubelet.Running

	join := waitForCSR(t, admin, alive, attestedSigner, tok.Username(), nil, time.Minute)
	joinCert := waitIssued(t, admin, join.Name, alive)
	if got := joinCert.Subject; got.CommonName != attestedNodeUser || !slices.Equal(got.Organization, []string{"system:nodes"}) {
		t.Errorf("join certificate subject %s, want CN=%s O=system:nodes", got, attestedNodeUser)
	}
	if reason := approvalReason(t, admin, join.Name); reason != tpmapprover.ReasonVerified {
		t.Errorf("the join CSR was approved with reason %q, want %s", reason, tpmapprover.ReasonVerified)
	}
	node := waitForNodeNamed(t, admin, attestedNode, alive)
	if who := kubeletWhoami(t, files); who.Username != attestedNodeUser || !slices.Contains(who.Groups, "system:nodes") {
		t.Errorf("the apiserver authenticates the kubelet as %q %q, want %s in system:nodes", who.Username, who.Groups, attestedNodeUser)
	}

	serving := waitForCSR(t, admin, alive, kubeletServing, attestedNodeUser, nil, 2*time.Minute)
	if err := c.Approve(ctx, serving.Name); err != nil {
		t.Fatal(err)
	}
	servingCert := waitIssued(t, admin, serving.Name, alive)
	checkKubeletServes(t, admin, node, port, servingCA, servingCert)
	foreign := foreignServingCSR(t, c, cacheDir)
	if err := c.Approve(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if msg := waitFailed(t, admin, foreign); !strings.Contains(msg, "IP address 203.0.113.9 is not one of the node's addresses") {
		t.Errorf("the foreign-IP serving CSR failed with %q, which does not name the IP", msg)
	}

	renewal := waitForCSR(t, admin, alive, attestedSigner, attestedNodeUser, nil, renewalWait(joinCert))
	renewalCert := waitIssued(t, admin, renewal.Name, alive)
	waitPluginCert(t, cacheDir, renewalCert, alive)
	if who := kubeletWhoami(t, files); who.Username != attestedNodeUser {
		t.Errorf("after renewal the apiserver authenticates the kubelet as %q, want %s", who.Username, attestedNodeUser)
	}
	var bound int
	var attested []string
	for _, r := range s.records(t) {
		switch {
		case r.Decision == ledger.Bound && r.Node == attestedNode:
			bound++
		case r.Decision == ledger.Issued && r.Signer == attestedSigner:
			attested = append(attested, r.Grounds)
		}
	}
	if bound != 1 || len(attested) < 2 || !strings.Contains(attested[0], `attested: node "`+attestedNode+`"`) || !strings.Contains(attested[1], "attested: ") {
		t.Errorf("ledger: %d bound records for the node, attested issuances %q", bound, attested)
	}
}

// attestedKubeletSignet is kubeletSignet with the client signer attested (kubelet-client-tpm,
// the swtpm's local CA as manufacturer root) and the serving signer bound to the node's
// addresses; it returns the server and the serving CA.
func attestedKubeletSignet(t *testing.T, tpm *swtpmtest.Manufactured) (*signet, *testpki.Authority) {
	t.Helper()
	s := newSignet(t, attestedSigner, clientLifetime)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeletClientTPM}
	servingCA := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "signet kubelet-serving CA"} })
	certFile, keyFile := writeCA(t, s.state, "serving-ca", servingCA)
	s.cfg.Signers = append(s.cfg.Signers, config.Signer{
		Name: kubeletServing, Key: keyFile, Certificate: certFile,
		MaxLifetime: &metav1.Duration{Duration: 24 * time.Hour},
		Profile:     profile.Spec{Name: profile.NameKubeletServing, BindSANsToNode: true},
	})
	roots := filepath.Join(s.state, "ek-roots.pem")
	writeFile(t, roots, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tpm.Root.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tpm.Intermediate.Raw})...))
	s.cfg.Attestation = config.Attestation{Address: freeAddress(t), EKRootsFile: roots}
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return s, servingCA
}

// execKubeconfig builds signet-node and writes the kubelet's kubeconfig: the cluster, and a
// user whose credential is `signet-node credential` against the swtpm and the server, with
// the bootstrap token for the first certificate and a renewal at 40 % of its life.
func execKubeconfig(t *testing.T, dir string, c *controlplane.Cluster, tok controlplane.BootstrapToken, tpm *swtpmtest.Manufactured, s *signet, cacheDir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "signet-node")
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/signet-pki/signet/cmd/signet-node").CombinedOutput(); err != nil {
		t.Fatalf("building signet-node: %v\n%s", err, out)
	}
	boot := filepath.Join(dir, "bootstrap-kubeconfig")
	writeKubeconfig(t, boot, c.BootstrapConfig(tok))
	admin, _ := c.Admin()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1",
		Command:    bin,
		Args: []string{"credential", "--tpm", tpm.Socket, "--attest-url", "https://" + s.cfg.Attestation.Address,
			"--attest-ca", filepath.Join(s.state, devpki.TLSCACert), "--node-name", attestedNode, "--signer-name", attestedSigner,
			"--bootstrap-kubeconfig", boot, "--cache-dir", cacheDir, "--renew-fraction", "0.4", "--timeout", "2m"},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "kubelet"}
	kc.CurrentContext = "default"
	path := filepath.Join(dir, "kubelet-exec.conf")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// foreignServingCSR creates, as the node (with the client certificate signet-node keeps), a
// kubernetes.io/kubelet-serving CSR for the node's name and an IP that is not the node's,
// and returns its name.
func foreignServingCSR(t *testing.T, c *controlplane.Cluster, cacheDir string) string {
	t.Helper()
	admin, _ := c.Admin()
	cfg := rest.AnonymousClientConfig(admin)
	var err error
	if cfg.CertData, err = os.ReadFile(filepath.Join(cacheDir, "client.crt")); err != nil {
		t.Fatal(err)
	}
	if cfg.KeyData, err = os.ReadFile(filepath.Join(cacheDir, "client.key")); err != nil {
		t.Fatal(err)
	}
	asNode, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := testpki.Key(t, testpki.P256)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: attestedNodeUser, Organization: []string{"system:nodes"}},
		DNSNames: []string{attestedNode}, IPAddresses: []net.IP{net.ParseIP("203.0.113.9")},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := asNode.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "foreign-ip-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: kubeletServing,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the foreign-IP serving CSR as the node: %v", err)
	}
	return csr.Name
}

// waitFailed waits until the CSR has a Failed condition and returns its message.
func waitFailed(t *testing.T, admin kubernetes.Interface, name string) string {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(csr.Status.Certificate) > 0 {
			return false, errors.New("it was issued")
		}
		if cond := condition(csr, certificatesv1.CertificateFailed); cond != nil {
			msg = cond.Message
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CSR %s did not fail: %v", name, err)
	}
	return msg
}

// approvalReason is the reason of the CSR's Approved condition.
func approvalReason(t *testing.T, admin kubernetes.Interface, name string) string {
	t.Helper()
	csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := condition(csr, certificatesv1.CertificateApproved); cond != nil {
		return cond.Reason
	}
	return ""
}

// waitPluginCert waits until signet-node's cache, what it hands the kubelet's client-go,
// holds want: the plugin run that asked for the renewal has handed it out.
func waitPluginCert(t *testing.T, cacheDir string, want *x509.Certificate, alive func() error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(cacheDir, "client.crt"), filepath.Join(cacheDir, "client.key"))
		if err != nil {
			return false, nil
		}
		return string(pair.Certificate[0]) == string(want.Raw), nil
	})
	if err != nil {
		t.Fatalf("signet-node does not hand out the renewed certificate (serial %s): %v", want.SerialNumber, err)
	}
}
