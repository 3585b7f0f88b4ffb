package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

// The node of the kubelet test.
const (
	e2eNode          = "signet-e2e-node"
	e2eNodeUser      = "system:node:" + e2eNode
	kubeletClientCAs = certificatesv1.KubeAPIServerClientKubeletSignerName
	kubeletServing   = certificatesv1.KubeletServingSignerName
	// clientLifetime is the kubelet client signer's maximum lifetime: the shortest Signet
	// allows, so that the kubelet renews inside the test. The kubelet renews at 70–90 % of a
	// certificate's life counted from its NotBefore, which is backdated 5 minutes: 5.5–8.5
	// minutes after issuance. The tests that wait for a renewal run in parallel with each
	// other (t.Parallel), after the rest of the package: each has its own control plane,
	// containerd and kubelet, and mostly waits.
	clientLifetime = 10 * time.Minute
)

// TestRealKubelet takes a real kubelet through its life with Signet as the cluster's signer
// for kubernetes.io/kube-apiserver-client-kubelet and kubernetes.io/kubelet-serving, on its
// own control plane where kube-controller-manager runs only its CSR approver (csrapproving),
// as a cluster looks after an operator moves signing to Signet:
//   - the node joins with a kubeadm bootstrap token: the approver approves its CSR and Signet
//     issues it on the bootstrap rule (ledger grounds "bootstrap");
//   - the node registers, and the apiserver authenticates the kubelet as system:node:<name>
//     (kubectl auth whoami with the kubelet's kubeconfig);
//   - its serving CSR, approved by hand, is issued, and the apiserver reaches the kubelet over
//     TLS verified against Signet's serving CA (--kubelet-certificate-authority);
//   - the kubelet renews its client certificate as itself and switches to it;
//   - every CSR has a certificate and the ledger holds an issued record for each.
func TestRealKubelet(t *testing.T) {
	requireRoot(t)
	t.Parallel() // waits minutes for the kubelet to renew, beside the other tests that do (clientLifetime)
	dir := nodeDir(t)
	ctx := context.Background()
	s, servingCA := kubeletSignet(t)
	c, apiserverClientCA := kubeletCluster(t, s, servingCA, dir)
	_, admin := c.Admin()

	tok := controlplane.BootstrapToken{ID: "s1gnet", Secret: "0123456789abcdef"}
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
	w, err := c.AddWatcher("signet-watcher", []string{kubeletClientCAs, kubeletServing})
	if err != nil {
		t.Fatal(err)
	}
	wcfg := s.watcherConfig(s.addr)
	wcfg.SignerNames = []string{kubeletClientCAs, kubeletServing}
	runWatcher(t, wcfg, w.Client())

	runtime := startContainerd(t, dir)
	port := freePort(t)
	kubelet, files := startKubelet(t, kubeletOptions{
		dir: dir, nodeName: e2eNode, runtime: runtime, bootstrap: c.BootstrapConfig(tok),
		clientCAFile: apiserverClientCA, port: port,
	})
	alive := func() error { return errors.Join(kubelet.Running(), kcm.Running()) }

	join := waitForCSR(t, admin, alive, kubeletClientCAs, tok.Username(), nil, time.Minute)
	joinCert := waitIssued(t, admin, join.Name, alive)
	if got := joinCert.Subject; got.CommonName != e2eNodeUser || !slices.Equal(got.Organization, []string{"system:nodes"}) {
		t.Errorf("join certificate subject %s, want CN=%s O=system:nodes", got, e2eNodeUser)
	}
	node := waitForNode(t, admin, alive)
	if who := kubeletWhoami(t, files); who.Username != e2eNodeUser || !slices.Contains(who.Groups, "system:nodes") {
		t.Errorf("the apiserver authenticates the kubelet as %q %q, want %s in system:nodes", who.Username, who.Groups, e2eNodeUser)
	}

	serving := waitForCSR(t, admin, alive, kubeletServing, e2eNodeUser, nil, 2*time.Minute)
	if err := c.Approve(ctx, serving.Name); err != nil { // as `kubectl certificate approve`
		t.Fatal(err)
	}
	servingCert := waitIssued(t, admin, serving.Name, alive)
	checkKubeletServes(t, admin, node, port, servingCA, servingCert)

	renewal := waitForCSR(t, admin, alive, kubeletClientCAs, e2eNodeUser, nil, renewalWait(joinCert))
	renewalCert := waitIssued(t, admin, renewal.Name, alive)
	waitCurrentClientCert(t, files, renewalCert, alive)
	if who := kubeletWhoami(t, files); who.Username != e2eNodeUser {
		t.Errorf("after renewal the apiserver authenticates the kubelet as %q, want %s", who.Username, e2eNodeUser)
	}
	checkEveryCSRRecorded(t, admin, s, map[string]string{join.Name: "bootstrap: ", serving.Name: "", renewal.Name: ""})
}

// kubeletSignet prepares a signing server for the two kubelet signers: the client signer with
// the dev PKI's signer CA and the shortest lifetime, the serving signer with a CA of its own.
// Both run the default profiles and the default lint gate.
func kubeletSignet(t *testing.T) (*signet, *testpki.Authority) {
	t.Helper()
	s := newSignet(t, kubeletClientCAs, clientLifetime)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
	servingCA := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "signet kubelet-serving CA"} })
	certFile, keyFile := writeCA(t, s.state, "serving-ca", servingCA)
	s.cfg.Signers = append(s.cfg.Signers, config.Signer{
		Name: kubeletServing, Key: keyFile, Certificate: certFile,
		MaxLifetime: &metav1.Duration{Duration: 24 * time.Hour},
		Profile:     profile.Spec{Name: profile.NameKubeletServing},
	})
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return s, servingCA
}

// kubeletCluster starts a control plane configured as kubeadm configures one, for Signet's
// CAs: bootstrap tokens, the Node authorizer and NodeRestriction, Signet's kubelet client CA
// in --client-ca-file, its serving CA as --kubelet-certificate-authority, and a client
// certificate for the apiserver's calls to kubelets, from a CA it returns the file of (the
// kubelet's x509 client CA).
func kubeletCluster(t *testing.T, s *signet, servingCA *testpki.Authority, dir string) (*controlplane.Cluster, string) {
	t.Helper()
	servingFile := filepath.Join(dir, "pki", "signet-kubelet-serving-ca.crt")
	writeFile(t, servingFile, servingCA.CertPEM())
	return kubeletClusterWith(t, mustRead(t, filepath.Join(s.state, devpki.SignerCACert)), servingFile, dir)
}

// kubeletClusterWith is kubeletCluster for the kubelet client CA clientCA (PEM, in
// --client-ca-file beside the cluster's own) and the kubelet serving CA in servingFile
// (--kubelet-certificate-authority).
func kubeletClusterWith(t *testing.T, clientCA []byte, servingFile, dir string) (*controlplane.Cluster, string) {
	t.Helper()
	front := testpki.CA(t, func(c *x509.Certificate) {
		c.Subject = pkix.Name{CommonName: "kubelet client CA (front proxy of the test)"}
	})
	frontFile := filepath.Join(dir, "pki", "kubelet-client-ca.crt")
	writeFile(t, frontFile, front.CertPEM())
	key := testpki.Key(t, testpki.P256)
	cert := front.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, key.Public())
	certFile, keyFile := filepath.Join(dir, "pki", "apiserver-kubelet-client.crt"), filepath.Join(dir, "pki", "apiserver-kubelet-client.key")
	writeFile(t, certFile, testpki.CertPEM(cert))
	writeFile(t, keyFile, testpki.KeyPEM(t, key))

	flags := controlplane.BootstrapTokenFlags()
	flags["authorization-mode"] = "Node,RBAC"
	flags["enable-admission-plugins"] = "NodeRestriction"
	// envtest turns the ServiceAccount admission plugin off; kubeadm's API server runs it, and
	// a pod gets its API credentials (the kube-api-access volume) from it.
	flags["disable-admission-plugins"] = ""
	flags["kubelet-certificate-authority"] = servingFile
	flags["kubelet-client-certificate"] = certFile
	flags["kubelet-client-key"] = keyFile
	flags["kubelet-preferred-address-types"] = "InternalIP,ExternalIP,Hostname"
	c := controlplanetest.Start(t, controlplane.Options{
		ExtraClientCAs: clientCA,
		APIServerFlags: flags,
	})
	return c, frontFile
}

// waitForCSR returns the first CSR for signerName requested by requester whose name is not in
// skip, polling until timeout; alive reports a process that died.
func waitForCSR(t *testing.T, admin kubernetes.Interface, alive func() error, signerName, requester string, skip []string, timeout time.Duration) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var found *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i, csr := range list.Items {
			if csr.Spec.SignerName == signerName && csr.Spec.Username == requester && !slices.Contains(skip, csr.Name) {
				found = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for a %s CSR from %s: %v", timeout, signerName, requester, err)
	}
	return found
}

// waitIssued waits until the CSR has a certificate (failing on a Failed or Denied condition)
// and returns its leaf.
func waitIssued(t *testing.T, admin kubernetes.Interface, name string, alive func() error) *x509.Certificate {
	t.Helper()
	var csr *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		var err error
		if csr, err = admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		for _, typ := range []certificatesv1.RequestConditionType{certificatesv1.CertificateFailed, certificatesv1.CertificateDenied} {
			if cond := condition(csr, typ); cond != nil {
				return false, fmt.Errorf("%s %s: %s", typ, cond.Reason, cond.Message)
			}
		}
		return len(csr.Status.Certificate) > 0, nil
	})
	if err != nil {
		t.Fatalf("CSR %s (%s, from %s) not issued: %v", name, csr.Spec.SignerName, csr.Spec.Username, err)
	}
	return parseChain(t, csr.Status.Certificate)[0]
}

// waitForNode waits until the kubelet has registered its Node and reported an InternalIP
// and its kubelet port.
func waitForNode(t *testing.T, admin kubernetes.Interface, alive func() error) *corev1.Node {
	t.Helper()
	return waitForNodeNamed(t, admin, e2eNode, alive)
}

// waitForNodeNamed is waitForNode for the node called name.
func waitForNodeNamed(t *testing.T, admin kubernetes.Interface, name string, alive func() error) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return internalIP(n) != "" && n.Status.DaemonEndpoints.KubeletEndpoint.Port != 0, nil
	})
	if err != nil {
		t.Fatalf("node %s not registered with an InternalIP and kubelet port: %v (last: %+v)", name, err, node)
	}
	return node
}

// internalIP returns the node's InternalIP address, "" if none.
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// checkKubeletServes checks that the kubelet presents the serving certificate Signet issued,
// verified against Signet's serving CA for the node's IP, and that the apiserver, which
// verifies it with --kubelet-certificate-authority, reaches the kubelet through the node
// proxy.
func checkKubeletServes(t *testing.T, admin kubernetes.Interface, node *corev1.Node, port int, ca *testpki.Authority, issued *x509.Certificate) {
	t.Helper()
	ip := internalIP(node)
	if got := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port); got != port {
		t.Fatalf("node reports kubelet port %d, want %d", got, port)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	var presented *x509.Certificate
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)),
			&tls.Config{RootCAs: roots, ServerName: ip, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, nil // no serving certificate yet: the handshake fails until it arrives
		}
		defer conn.Close()
		presented = conn.ConnectionState().PeerCertificates[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("the kubelet at %s:%d never presented a certificate that Signet's serving CA verifies: %v", ip, port, err)
	}
	if !bytes.Equal(presented.Raw, issued.Raw) {
		t.Errorf("the kubelet presents serial %s, not the serving certificate Signet issued (serial %s)", presented.SerialNumber, issued.SerialNumber)
	}
	body, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy", "healthz").DoRaw(context.Background())
	if err != nil || string(body) != "ok" {
		t.Errorf("apiserver → kubelet /healthz through the node proxy: %q, %v; want \"ok\" over TLS verified with Signet's serving CA", body, err)
	}
}

// kubeletWhoami returns who the apiserver says the kubelet is, with the kubeconfig the
// kubelet wrote after its client certificate was issued (kubectl auth whoami --kubeconfig).
func kubeletWhoami(t *testing.T, files kubeletFiles) authenticationv1.UserInfo {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", files.kubeconfig)
	if err != nil {
		t.Fatalf("reading the kubelet's kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("auth whoami as the kubelet: %v", err)
	}
	return r.Status.UserInfo
}

// renewalWait is how long to wait for the kubelet to renew cert: until 90 % of its life
// counted from NotBefore (the latest rotation deadline the kubelet picks), plus a minute.
func renewalWait(cert *x509.Certificate) time.Duration {
	life := cert.NotAfter.Sub(cert.NotBefore)
	deadline := cert.NotBefore.Add(life * 9 / 10)
	return time.Until(deadline) + time.Minute
}

// waitCurrentClientCert waits until the kubelet's current client certificate is want.
func waitCurrentClientCert(t *testing.T, files kubeletFiles, want *x509.Certificate, alive func() error) {
	t.Helper()
	path := filepath.Join(files.certDir, "kubelet-client-current.pem")
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		pair, err := tls.LoadX509KeyPair(path, path)
		if err != nil {
			return false, nil
		}
		return bytes.Equal(pair.Certificate[0], want.Raw), nil
	})
	if err != nil {
		t.Fatalf("the kubelet did not switch to its renewed client certificate (serial %s) in %s: %v", want.SerialNumber, path, err)
	}
}

// checkEveryCSRRecorded checks that every CSR in the cluster has a certificate, that the
// expected ones are among them, and that Signet's ledger holds an issued record for each, by
// UID and serial, whose grounds start with the expected prefix ("" for none).
func checkEveryCSRRecorded(t *testing.T, admin kubernetes.Interface, s *signet, wantGrounds map[string]string) {
	t.Helper()
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]ledger.Record{}
	if err := ledger.Replay(s.cfg.Ledger.Dir, time.Time{}, func(r ledger.Record) error {
		if r.Decision == ledger.Issued {
			records[r.ObjectUID] = r
		}
		return nil
	}); err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	seen := 0
	for _, csr := range list.Items {
		if len(csr.Status.Certificate) == 0 {
			t.Errorf("CSR %s (%s, from %s) has no certificate: %+v", csr.Name, csr.Spec.SignerName, csr.Spec.Username, csr.Status.Conditions)
			continue
		}
		leaf := parseChain(t, csr.Status.Certificate)[0]
		rec, ok := records[string(csr.UID)]
		switch {
		case !ok:
			t.Errorf("CSR %s has a certificate but the ledger has no issued record for UID %s", csr.Name, csr.UID)
		case rec.Serial != hex.EncodeToString(leaf.SerialNumber.Bytes()) || rec.Requester != csr.Spec.Username:
			t.Errorf("CSR %s: ledger record serial %s requester %q; certificate serial %x, requester %q",
				csr.Name, rec.Serial, rec.Requester, leaf.SerialNumber, csr.Spec.Username)
		}
		if prefix, want := wantGrounds[csr.Name]; want {
			seen++
			if (prefix == "") != (rec.Grounds == "") || !strings.HasPrefix(rec.Grounds, prefix) {
				t.Errorf("CSR %s: ledger grounds %q, want %q…", csr.Name, rec.Grounds, prefix)
			}
		}
	}
	if seen != len(wantGrounds) {
		t.Errorf("found %d of the %d expected CSRs among %d", seen, len(wantGrounds), len(list.Items))
	}
}
