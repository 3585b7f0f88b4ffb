package integration

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"

	"github.com/signet-pki/signet/internal/testpki"
)

// signerLegacyUnknown is kubernetes.io/legacy-unknown, which certificates.k8s.io/v1 refuses to
// create (see differential_etcd_test.go).
const signerLegacyUnknown = certificatesv1beta1.LegacyUnknownSignerName

// diffMaxLifetime is the longest lifetime on both sides, neither of which is configured one:
// kube-controller-manager's --cluster-signing-duration default and the default maxLifetime of
// Signet's kubernetes.io profiles (config.DefaultKubernetesMaxLifetime), which the
// differential run shows to be the same.
const diffMaxLifetime = 8760 * time.Hour

// outcome is what a signer does with an approved CSR.
type outcome string

const (
	issues  outcome = "issues"
	refuses outcome = "refuses"
)

// Reasons of Signet's terminal refusals (the watcher's Failed condition reasons).
const (
	reasonPolicyViolation  = "PolicyViolation"
	reasonUnsupportedKey   = "UnsupportedKey"
	reasonMalformedRequest = "MalformedRequest"
)

// store is how a case's CSR reaches the cluster.
type store int

const (
	// storeDefault: storeEtcd for kubernetes.io/legacy-unknown, storeAPI otherwise.
	storeDefault store = iota
	// storeAPI: created through certificates.k8s.io/v1 by the case's identity.
	storeAPI
	// storeEtcd: written to etcd directly, past the apiserver's validation and admission (see
	// differential_etcd_test.go).
	storeEtcd
)

// diffCase is one CSR that kube-controller-manager and Signet both decide, and what each
// should do with it.
type diffCase struct {
	name   string
	signer string
	as     string          // the identity that creates the CSR; default per signer
	key    testpki.KeyType // default P-256; see diffKey for the extra types
	// csr is the request's template; nil is the signer's usual subject and SANs. exts are
	// added to its extensions.
	csr    *x509.CertificateRequest
	exts   []pkix.Extension
	usages []certificatesv1.KeyUsage // nil: the signer's usual usages
	// expirationSeconds becomes spec.expirationSeconds; lifetime is the NotAfter-NotBefore of
	// the certificates issued (default diffMaxLifetime).
	expirationSeconds *int32
	lifetime          time.Duration
	store             store
	brokenSignature   bool // the request's signature does not verify
	want              expect
}

// expect is the expected outcome of a case.
type expect struct {
	// apiserver, if set, is part of the message with which the apiserver refuses to create
	// the CSR: no signer ever sees it.
	apiserver string
	kcm       outcome
	// kcmFailed is part of kube-controller-manager's Failed message when it refuses.
	kcmFailed string
	signet    outcome
	// reason and rule: Signet's refusal reason, and text its message must contain.
	reason, rule string
	// deliberate is the listed difference that makes Signet refuse where KCM issues.
	deliberate *difference
	// lint names a lint that flags the certificate both issue although the profile accepts
	// the request: the lint gate must let it pass (on the kubernetes.io profiles, an accepted
	// finding), and the case fails while the gate refuses it.
	lint string
}

// same: both issue, and the certificates agree.
func same() expect { return expect{kcm: issues, signet: issues} }

// sameThoughLinted: both issue the same certificate, which lint flags.
func sameThoughLinted(lint string) expect {
	return expect{kcm: issues, signet: issues, lint: lint}
}

// bothRefuse: KCM fails the CSR with a message containing kcmFailed, Signet refuses with a
// PolicyViolation naming rule.
func bothRefuse(kcmFailed, rule string) expect {
	return expect{kcm: refuses, kcmFailed: kcmFailed, signet: refuses, reason: reasonPolicyViolation, rule: rule}
}

// deliberately: KCM issues, Signet refuses as d says.
func deliberately(d *difference) expect {
	return expect{kcm: issues, signet: refuses, reason: d.reason, rule: d.rule, deliberate: d}
}

// apiserverRefuses: the apiserver refuses to create the CSR with a message containing msg.
func apiserverRefuses(msg string) expect { return expect{apiserver: msg} }

// difference is a deliberate difference: kube-controller-manager issues, Signet refuses.
// docs/kubernetes-differences.md has a row for each, naming its cases (see
// TestDifferencesDocumented).
type difference struct {
	id     string // the row's first column in docs/kubernetes-differences.md
	reason string // Signet's refusal reason
	rule   string // text Signet's refusal message contains: the rule, or the key check
	why    string
}

// The deliberate differences. The refusal rules are in server/profile (rules.go, names.go),
// the key checks in server/issuance (CheckPublicKey).
var (
	diffCARequest = &difference{id: "CA certificate requested", reason: reasonPolicyViolation,
		rule: "ca: no CA certificate requested (leaf-only signer)",
		why:  "KCM drops the request's basic constraints and issues CA:FALSE; Signet tells the requester it cannot have a CA"}
	diffCAUnparsable = &difference{id: "basic constraints that do not parse", reason: reasonMalformedRequest,
		rule: "ca: no CA certificate requested (leaf-only signer)",
		why:  "Signet cannot tell whether a CA is asked for, and refuses rather than guess"}
	diffCertSign = &difference{id: "cert sign or crl sign usage", reason: reasonPolicyViolation,
		rule: "usages: no cert sign or crl sign (leaf-only signer)",
		why:  "KCM puts the bit in a CA:FALSE certificate, which no verifier honours; Signet issues leaves only and says so"}
	diffSmallRSA = &difference{id: "RSA key under 2048 bits", reason: reasonUnsupportedKey,
		rule: "RSA key has 1024 bits, fewer than 2048", why: "weak key"}
	diffRSABytes = &difference{id: "RSA modulus not a whole number of bytes", reason: reasonUnsupportedKey,
		rule: "RSA key has 2052 bits, not a whole number of bytes",
		why:  "no key generator makes one; zlint (e_mp_modulus_must_be_divisible_by_8) and the Mozilla policy refuse it"}
	diffRSAExponent = &difference{id: "RSA exponent other than 65537", reason: reasonUnsupportedKey,
		rule: "RSA public exponent 3, want 65537", why: "small exponents invite padding attacks"}
	diffCurve = &difference{id: "elliptic curve other than P-256, P-384, P-521", reason: reasonUnsupportedKey,
		rule: "ECDSA curve P-224", why: "weak curve"}
	diffPrivileged = &difference{id: "O=system:masters on a certificate that can authenticate clients", reason: reasonPolicyViolation,
		rule: "privileged: no organization in [system:masters]",
		why:  "a client certificate in system:masters is cluster-admin that RBAC cannot revoke; the apiserver's admission refuses it for kube-apiserver-client only"}
	diffNodeClientRequester = &difference{id: "kubelet client certificate for someone else", reason: reasonPolicyViolation,
		rule: ruleNodeClientRequester,
		why:  "KCM never looks at the requester; Signet issues a node's client certificate only to the node itself or a bootstrap requester"}
	diffServingRequester = &difference{id: "kubelet serving certificate for another name", reason: reasonPolicyViolation,
		rule: "requester: username equals the common name",
		why:  "KCM never looks at the requester; Signet issues a serving certificate only to the node it names"}
	diffNodeIdentity = &difference{id: "node identity on kube-apiserver-client", reason: reasonPolicyViolation,
		rule: "privileged: no node identity (common name system:node:<name> or organization system:nodes)",
		why:  "a node identity carries the Node authorizer's rights; nodes get client certificates from kube-apiserver-client-kubelet, which checks the requester"}
	diffNames = &difference{id: "malformed names", reason: reasonPolicyViolation, rule: ruleNames,
		why: "KCM copies any name into the certificate; Signet refuses names no certificate should carry (its names rule) rather than issue what verifiers reject or misread"}
	diffLimits = &difference{id: "requests over Signet's limits", reason: reasonMalformedRequest, rule: "Signet accepts",
		why: "KCM signs any request the apiserver stores; Signet bounds the request to 64 KiB and 256 subject alternative names, so a certificate stays small enough for every party that reads it"}
	diffServingGroup = &difference{id: "kubelet serving certificate requester outside system:nodes", reason: reasonPolicyViolation,
		rule: "requester: groups include system:nodes",
		why:  "KCM never looks at the requester; a node's serving certificate goes to a node"}
)

// deliberateDifferences lists every difference, for TestDifferencesDocumented.
var deliberateDifferences = []*difference{
	diffCARequest, diffCAUnparsable, diffCertSign, diffSmallRSA, diffRSABytes, diffRSAExponent, diffCurve,
	diffPrivileged, diffNodeIdentity, diffNames, diffNodeClientRequester, diffServingRequester, diffServingGroup,
	diffLimits,
}

// The rules of both refusals and deliberate differences (server/profile/rules.go).
const (
	ruleNodeClientRequester = "requester: the node itself (username equals the common name, groups include system:nodes) " +
		"or in a bootstrap group [system:bootstrappers]"
	ruleOrgNodes       = "subject: organization exactly [system:nodes]"
	ruleCNNodePrefix   = "subject: common name starts with system:node:"
	ruleNoSANs         = "sans: none (no DNS name, IP address, email address or URI)"
	ruleServingSANs    = "sans: at least one DNS name or IP address"
	ruleServingNoOther = "sans: no email address or URI"
	ruleClientUsages   = "usages: exactly digital signature and client auth, optionally with key encipherment"
	ruleServingUsages  = "usages: exactly digital signature and server auth, optionally with key encipherment"
	ruleAPIClientAuth  = "usages: include client auth"
	ruleAPIAtMost      = "usages: at most digital signature, key encipherment, client auth"
	ruleLeafUsages     = "usages: no cert sign or crl sign (leaf-only signer)"
	ruleNames          = "names: well formed (no control characters in the subject; DNS, email and URI SANs that are valid names)"
)

// Usage shorthands.
const (
	uDS = certificatesv1.UsageDigitalSignature
	uKE = certificatesv1.UsageKeyEncipherment
	uKA = certificatesv1.UsageKeyAgreement
	uCA = certificatesv1.UsageClientAuth
	uSA = certificatesv1.UsageServerAuth
)

func use(u ...certificatesv1.KeyUsage) []certificatesv1.KeyUsage { return u }

func seconds(s int32) *int32 { return &s }

// req returns a request template for subject cn and orgs, changed by opts.
func req(cn string, orgs []string, opts ...func(*x509.CertificateRequest)) *x509.CertificateRequest {
	r := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	for _, o := range opts {
		o(r)
	}
	return r
}

func dnsNames(n ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) { r.DNSNames = n }
}

func ipAddrs(a ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) {
		for _, s := range a {
			r.IPAddresses = append(r.IPAddresses, net.ParseIP(s))
		}
	}
}

func emailAddrs(e ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) { r.EmailAddresses = e }
}

func uriNames(u ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) {
		for _, s := range u {
			parsed, err := url.Parse(s)
			if err != nil {
				panic(err)
			}
			r.URIs = append(r.URIs, parsed)
		}
	}
}

// Extension OIDs the corpus requests.
var (
	oidKeyUsage     = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage  = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidSubjectKeyID = asn1.ObjectIdentifier{2, 5, 29, 14}
	oidCustom       = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1, 1}
	oidServerAuth   = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
)

// basicConstraints is a requested basic constraints extension.
func basicConstraints(isCA bool, pathLen int, critical bool) pkix.Extension {
	v := struct {
		IsCA       bool `asn1:"optional"`
		MaxPathLen int  `asn1:"optional,default:-1"`
	}{isCA, pathLen}
	return pkix.Extension{Id: testpki.OIDBasicConstraints, Critical: critical, Value: mustMarshal(v)}
}

// keyUsageExt is a requested key usage extension with keyCertSign and digitalSignature.
func keyUsageExt() pkix.Extension {
	bits := asn1.BitString{Bytes: []byte{0x84}, BitLength: 6} // digitalSignature, keyCertSign
	return pkix.Extension{Id: oidKeyUsage, Critical: true, Value: mustMarshal(bits)}
}

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Extra key types of the corpus, beside testpki's.
const (
	rsaExponent3 testpki.KeyType = "RSA-2048 e=3"
	rsa2052      testpki.KeyType = "RSA-2052"
)

// extraKeys generates each extra key type once per process.
var extraKeys = map[testpki.KeyType]func() (crypto.Signer, error){
	rsaExponent3: sync.OnceValues(func() (crypto.Signer, error) { return rsaSmallExponent(2048, 3) }),
	rsa2052: sync.OnceValues(func() (crypto.Signer, error) {
		k, err := rsa.GenerateKey(rand.Reader, 2052)
		return k, err
	}),
}

// diffKey returns a key of type kt: testpki's, or one of the extra types.
func diffKey(t *testing.T, kt testpki.KeyType) crypto.Signer {
	t.Helper()
	if gen, ok := extraKeys[kt]; ok {
		k, err := gen()
		if err != nil {
			t.Fatalf("generating %s key: %v", kt, err)
		}
		return k
	}
	return testpki.Key(t, kt)
}

// rsaSmallExponent builds an RSA key of bits with public exponent e, which crypto/rsa's
// GenerateKey never does (it always uses 65537).
func rsaSmallExponent(bits int, e int64) (*rsa.PrivateKey, error) {
	one, bigE := big.NewInt(1), big.NewInt(e)
	for range 100 {
		p, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			return nil, err
		}
		q, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			return nil, err
		}
		pm, qm := new(big.Int).Sub(p, one), new(big.Int).Sub(q, one)
		phi := new(big.Int).Mul(pm, qm)
		d := new(big.Int).ModInverse(bigE, phi)
		n := new(big.Int).Mul(p, q)
		if p.Cmp(q) == 0 || d == nil || n.BitLen() != bits {
			continue
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: int(e)}, D: d, Primes: []*big.Int{p, q}}
		k.Precompute()
		return k, k.Validate()
	}
	return nil, errors.New("no suitable primes found")
}
