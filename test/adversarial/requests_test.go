package adversarial

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// Usages the bases ask for.
var (
	clientUsages  = []string{"digital signature", "client auth"}
	servingUsages = []string{"digital signature", "server auth"}
)

// corpus collects the cases; each request gets a fresh object UID.
type corpus struct {
	t     *testing.T
	cases []*corpusCase
	seq   int
	names map[string]bool
}

func newCorpus(t *testing.T) *corpus { return &corpus{t: t, names: map[string]bool{}} }

// uid returns a fresh object UID.
func (c *corpus) uid() string {
	c.seq++
	return fmt.Sprintf("adv-%04d", c.seq)
}

// add appends a case; its name must be unique.
func (c *corpus) add(family, name, client string, req request, w want) *corpusCase {
	c.t.Helper()
	name = family + "/" + name
	if c.names[name] {
		c.t.Fatalf("two cases are named %q", name)
	}
	c.names[name] = true
	cc := &corpusCase{name: name, family: family, client: client, req: req, want: w}
	c.cases = append(c.cases, cc)
	return cc
}

// sign is add for a CertificateSigningRequest call.
func (c *corpus) sign(family, name, client string, r *signetv1.SignCertificateSigningRequestRequest, w want) *corpusCase {
	c.t.Helper()
	return c.add(family, name, client, request{csr: r}, w)
}

// csrCall builds a CertificateSigningRequest call with a fresh UID.
func (c *corpus) csrCall(signer string, csrPEM []byte, usages []string, who *signetv1.Requester) *signetv1.SignCertificateSigningRequestRequest {
	uid := c.uid()
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: signer,
		Request:    csrPEM,
		Usages:     slices.Clone(usages),
		Requester:  who,
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid},
	}
}

// base is a request each CSR signer issues as it is; families change one thing in it.
type base struct {
	label  string
	signer string
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	usages []string
	user   string
	groups []string
}

// bases are the valid requests of every CertificateSigningRequest signer but the limited one.
func bases() []base {
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	return []base{
		{label: "client", signer: signerClient, cn: "alice", orgs: []string{"dev"}, usages: clientUsages,
			user: "alice", groups: []string{"system:authenticated"}},
		{label: "kubelet-client", signer: signerKubelet, cn: "system:node:n1", orgs: []string{"system:nodes"},
			usages: clientUsages, user: "system:node:n1", groups: nodeGroups},
		{label: "kubelet-serving", signer: signerServing, cn: "system:node:n1", orgs: []string{"system:nodes"},
			dns: []string{"n1.example.com"}, ips: []net.IP{net.ParseIP("10.0.0.1")}, usages: servingUsages,
			user: "system:node:n1", groups: nodeGroups},
		{label: "legacy", signer: signerLegacy, cn: "legacy.example.com", dns: []string{"legacy.example.com"},
			usages: servingUsages, user: "mallory", groups: []string{"system:authenticated"}},
		{label: "custom", signer: signerCustom, cn: "web.example.com", orgs: []string{"Example"},
			dns: []string{"web.example.com"}, usages: servingUsages, user: "mallory", groups: []string{"system:authenticated"}},
		{label: "dev", signer: signerDev, cn: "dev", dns: []string{"dev.example.com"}, usages: servingUsages,
			user: "mallory", groups: []string{"system:authenticated"}},
	}
}

// baseFor returns the base of signer.
func baseFor(signer string) base {
	for _, b := range bases() {
		if b.signer == signer {
			return b
		}
	}
	panic("no base for " + signer)
}

// without returns the bases except those of the given signers.
func without(signers ...string) []base {
	return slices.DeleteFunc(bases(), func(b base) bool { return slices.Contains(signers, b.signer) })
}

// template is the base's request template.
func (b base) template() *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: b.cn, Organization: slices.Clone(b.orgs)},
		DNSNames:    slices.Clone(b.dns),
		IPAddresses: slices.Clone(b.ips),
	}
}

// requester is the base's requester; a node's requester follows the common name.
func (b base) requester(cn string) *signetv1.Requester {
	user := b.user
	if b.user == b.cn {
		user = cn
	}
	return &signetv1.Requester{Username: user, Uid: "uid-" + b.label, Groups: slices.Clone(b.groups)}
}

// call is the base's request with mutate applied to its template, signed by a fresh P-256 key.
func (b base) call(c *corpus, mutate func(*x509.CertificateRequest)) *signetv1.SignCertificateSigningRequestRequest {
	return b.callWithKey(c, newP256(c.t), mutate)
}

// callWithKey is call with the request signed by key.
func (b base) callWithKey(c *corpus, key crypto.Signer, mutate func(*x509.CertificateRequest)) *signetv1.SignCertificateSigningRequestRequest {
	tmpl := b.template()
	if mutate != nil {
		mutate(tmpl)
	}
	return c.csrCall(b.signer, testpki.CSR(c.t, key, tmpl), b.usages, b.requester(tmpl.Subject.CommonName))
}

// callPEM is the base's call carrying csrPEM as it is.
func (b base) callPEM(c *corpus, csrPEM []byte) *signetv1.SignCertificateSigningRequestRequest {
	return c.csrCall(b.signer, csrPEM, b.usages, b.requester(b.cn))
}

// callRawSubject is the base's call with a subject encoded by hand (and the base's SANs).
func (b base) callRawSubject(c *corpus, subject []byte, requesterCN string) *signetv1.SignCertificateSigningRequestRequest {
	tmpl := b.template()
	tmpl.RawSubject = subject
	return c.csrCall(b.signer, testpki.CSR(c.t, newP256(c.t), tmpl), b.usages, b.requester(requesterCN))
}

func newP256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
