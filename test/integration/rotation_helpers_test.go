package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// bundleVersion is one content of a bundle as a watch saw it.
type bundleVersion struct {
	at    time.Time
	certs []*x509.Certificate
}

// bundleHistory records, from a watch, every content of the signer-linked bundles of some
// signers in one cluster.
type bundleHistory struct {
	mu       sync.Mutex
	versions map[string][]bundleVersion // by signer name
}

// watchBundles records the history of signers' bundles in c (v1 or v1beta1 as it serves
// them) until the test ends.
func watchBundles(t *testing.T, c *controlplane.Cluster, v1 bool, signers ...string) *bundleHistory {
	t.Helper()
	h := &bundleHistory{versions: map[string][]bundleVersion{}}
	bySigner := map[string]string{}
	for _, s := range signers {
		bySigner[trustbundle.Name(s)] = s
	}
	_, admin := c.Admin()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := openBundleWatch(ctx, admin, v1)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				name, content := bundleOf(ev.Object)
				signer, ok := bySigner[name]
				if !ok {
					continue
				}
				if ev.Type == watch.Deleted {
					content = ""
				}
				certs, _ := parseBundle(content)
				h.add(signer, certs)
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func openBundleWatch(ctx context.Context, admin kubernetes.Interface, v1 bool) (watch.Interface, error) {
	if v1 {
		return admin.CertificatesV1().ClusterTrustBundles().Watch(ctx, metav1.ListOptions{})
	}
	return admin.CertificatesV1beta1().ClusterTrustBundles().Watch(ctx, metav1.ListOptions{})
}

// bundleOf returns the name and trustBundle of a watched v1 or v1beta1 bundle.
func bundleOf(obj any) (string, string) {
	switch b := obj.(type) {
	case *certificatesv1.ClusterTrustBundle:
		return b.Name, b.Spec.TrustBundle
	case *certificatesv1beta1.ClusterTrustBundle:
		return b.Name, b.Spec.TrustBundle
	}
	return "", ""
}

// add records a content of signer's bundle, unless it is the current one.
func (h *bundleHistory) add(signer string, certs []*x509.Certificate) {
	h.mu.Lock()
	defer h.mu.Unlock()
	vs := h.versions[signer]
	if len(vs) > 0 && sameCerts(vs[len(vs)-1].certs, certs) {
		return
	}
	h.versions[signer] = append(vs, bundleVersion{at: time.Now(), certs: certs})
}

// at returns the content of signer's bundle at time when (nil before the first).
func (h *bundleHistory) at(signer string, when time.Time) []*x509.Certificate {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*x509.Certificate
	for _, v := range h.versions[signer] {
		if v.at.After(when) {
			break
		}
		out = v.certs
	}
	return out
}

// contents returns the successive contents of signer's bundle.
func (h *bundleHistory) contents(signer string) [][]*x509.Certificate {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out [][]*x509.Certificate
	for _, v := range h.versions[signer] {
		out = append(out, v.certs)
	}
	return out
}

// waitFor waits until signer's bundle holds exactly want and returns when the watch saw it.
func (h *bundleHistory) waitFor(t *testing.T, signer string, timeout time.Duration, want ...*x509.Certificate) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		vs := h.versions[signer]
		var last bundleVersion
		if len(vs) > 0 {
			last = vs[len(vs)-1]
		}
		h.mu.Unlock()
		if sameCerts(last.certs, want) {
			return last.at
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the bundle of %s did not hold exactly the %d expected CAs within %s; history: %d versions", signer, len(want), timeout, len(h.contents(signer)))
	return time.Time{}
}

// sameCerts reports whether a and b hold the same certificates, in any order.
func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		if !slices.ContainsFunc(b, c.Equal) {
			return false
		}
	}
	return true
}

// issuedLeaf is a certificate the load got, and when it saw it.
type issuedLeaf struct {
	signer string
	at     time.Time
	chain  []*x509.Certificate
}

// issuanceLoad keeps CSRs (approved by cluster-admin) and PodCertificateRequests coming, one
// at a time each, until stop, and records every leaf and every failure.
type issuanceLoad struct {
	mu       sync.Mutex
	leaves   []issuedLeaf
	failures []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, csrSigner, podSigner, namespace string) *issuanceLoad {
	t.Helper()
	requester, err := cluster.AddRequester("rotate-requester", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &issuanceLoad{stop: make(chan struct{})}
	l.wg.Go(func() { l.run(func(n int) (issuedLeaf, error) { return csrOnce(requester, csrSigner, n) }) })
	l.wg.Go(func() { l.run(func(n int) (issuedLeaf, error) { return pcrOnce(namespace, podSigner) }) })
	t.Cleanup(l.halt)
	return l
}

func (l *issuanceLoad) run(once func(int) (issuedLeaf, error)) {
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		leaf, err := once(n)
		l.mu.Lock()
		if err != nil {
			l.failures = append(l.failures, err.Error())
		} else {
			l.leaves = append(l.leaves, leaf)
		}
		l.mu.Unlock()
	}
}

// halt stops the load and waits for the requests in flight.
func (l *issuanceLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// signedBy counts the leaves of signer signed by ca.
func (l *issuanceLoad) signedBy(signer string, ca *x509.Certificate) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, leaf := range l.leaves {
		if leaf.signer == signer && leaf.chain[0].CheckSignatureFrom(ca) == nil {
			n++
		}
	}
	return n
}

// waitSignedBy waits until the load got a leaf of signer signed by ca.
func (l *issuanceLoad) waitSignedBy(t *testing.T, signer string, ca *x509.Certificate, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for l.signedBy(signer, ca) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no leaf of %s signed by %s within %s", signer, ca.Subject, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// csrOnce submits a CSR as requester, approves it and waits for its certificate.
func csrOnce(requester *controlplane.User, signer string, n int) (issuedLeaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issuedLeaf{}, err
	}
	csr, err := trySubmit(requester, signer, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: fmt.Sprintf("rotate-%d", n)}}, nil)
	if err != nil {
		return issuedLeaf{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cluster.Approve(ctx, csr.Name); err != nil {
		return issuedLeaf{}, fmt.Errorf("approving %s: %w", csr.Name, err)
	}
	for ctx.Err() == nil {
		got, err := requester.Client().CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err == nil && len(got.Status.Certificate) > 0 {
			chain, err := parseBundle(string(got.Status.Certificate))
			if err != nil || len(chain) == 0 {
				return issuedLeaf{}, fmt.Errorf("CSR %s: unparsable certificate: %v", csr.Name, err)
			}
			return issuedLeaf{signer: signer, at: time.Now(), chain: chain}, nil
		}
		if err == nil {
			if c := condition(got, certificatesv1.CertificateFailed); c != nil {
				return issuedLeaf{}, fmt.Errorf("CSR %s failed: %s: %s", csr.Name, c.Reason, c.Message)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return issuedLeaf{}, fmt.Errorf("CSR %s: not signed within 30s", csr.Name)
}

// pcrOnce creates a v1 PodCertificateRequest as cluster-admin and waits until it is issued.
func pcrOnce(namespace, signer string) (issuedLeaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issuedLeaf{}, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return issuedLeaf{}, err
	}
	_, admin := cluster.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcrs := admin.CertificatesV1().PodCertificateRequests(namespace)
	pcr, err := pcrs.Create(ctx, &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "rotate-"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: signer, PodName: "web-0", PodUID: uuid.NewUUID(),
			ServiceAccountName: "web", ServiceAccountUID: uuid.NewUUID(),
			NodeName: types.NodeName("node-1"), NodeUID: uuid.NewUUID(), StubPKCS10Request: stub,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return issuedLeaf{}, fmt.Errorf("creating PodCertificateRequest: %w", err)
	}
	for ctx.Err() == nil {
		got, err := pcrs.Get(ctx, pcr.Name, metav1.GetOptions{})
		if err == nil && got.Status.CertificateChain != "" {
			chain, err := parseBundle(got.Status.CertificateChain)
			if err != nil || len(chain) == 0 {
				return issuedLeaf{}, fmt.Errorf("PCR %s: unparsable chain: %v", pcr.Name, err)
			}
			return issuedLeaf{signer: signer, at: time.Now(), chain: chain}, nil
		}
		if err == nil {
			for _, typ := range []string{certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed} {
				if c := apimeta.FindStatusCondition(got.Status.Conditions, typ); c != nil {
					return issuedLeaf{}, fmt.Errorf("PCR %s %s: %s: %s", pcr.Name, typ, c.Reason, c.Message)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return issuedLeaf{}, fmt.Errorf("PCR %s: not issued within 30s", pcr.Name)
}

// adminClient dials s's server as its dev client (given the admin role) for the
// AuthorityService.
func adminClient(t *testing.T, s *signet) signetv1.AuthorityServiceClient {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(s.state, devpki.ClientCert), filepath.Join(s.state, devpki.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(mustRead(t, filepath.Join(s.state, devpki.TLSCACert))) {
		t.Fatal("no TLS CA")
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return signetv1.NewAuthorityServiceClient(conn)
}
