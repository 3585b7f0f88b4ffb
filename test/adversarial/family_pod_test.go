package adversarial

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// podCall is a valid PodCertificateRequest for pod shop/web-1 (service account web) with a
// P-256 stub request, changed by edit.
func (c *corpus) podCall(edit func(*signetv1.SignPodCertificateRequestRequest)) *signetv1.SignPodCertificateRequestRequest {
	uid := c.uid()
	r := &signetv1.SignPodCertificateRequestRequest{
		SignerName: signerPod,
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "pcr-" + uid, Namespace: "shop"},
		Pod: &signetv1.PodIdentity{Namespace: "shop", PodName: "web-1", PodUid: "pod-" + uid,
			ServiceAccountName: "web", ServiceAccountUid: "sa-uid-1", NodeName: "node-1", NodeUid: "node-uid-1"},
		StubPkcs10Request:    stub(c.t, newP256(c.t), nil),
		MaxExpirationSeconds: 86400,
	}
	if edit != nil {
		edit(r)
	}
	return r
}

// stub is the DER stub request the kubelet sends (an empty template), or tmpl.
func stub(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// pkixForm replaces the stub with key's public key and its proof over the pod UID.
func pkixForm(t *testing.T, key crypto.Signer) func(*signetv1.SignPodCertificateRequestRequest) {
	return func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request = nil
		r.PkixPublicKey = spkiOf(t, key.Public())
		r.ProofOfPossession = testpki.ProofOfPossession(t, key, r.GetPod().GetPodUid())
	}
}

// podCases: the two ways of naming the key, key types, forged and malformed identities,
// annotations, field sizes, lifetimes and signers of the wrong kind.
func podCases(c *corpus) {
	podKeys(c)
	podIdentities(c)
	podAnnotations(c)
	podLimitsAndKinds(c)
}

func podKeys(c *corpus) {
	const f = "pod-key"
	t := c.t
	pod := func(name string, w want, edits ...func(*signetv1.SignPodCertificateRequestRequest)) *corpusCase {
		return c.add(f, name, clientWatcher, request{pod: c.podCall(func(r *signetv1.SignPodCertificateRequestRequest) {
			for _, e := range edits {
				e(r)
			}
		})}, w)
	}
	stubOf := func(key crypto.Signer, tmpl *x509.CertificateRequest) func(*signetv1.SignPodCertificateRequestRequest) {
		return func(r *signetv1.SignPodCertificateRequestRequest) { r.StubPkcs10Request = stub(t, key, tmpl) }
	}
	pod("stub P-256", issued())
	pod("stub P-384", issued(), stubOf(testpki.Key(t, testpki.P384), nil))
	pod("stub Ed25519", issued(), stubOf(testpki.Key(t, testpki.Ed25519), nil))
	pod("pkix P-256 with proof", issued(), pkixForm(t, newP256(t)))
	pod("pkix Ed25519 with proof", issued(), pkixForm(t, testpki.Key(t, testpki.Ed25519)))
	pod("pkix RSA-3072 with PSS proof", issued(), pkixForm(t, testpki.Key(t, testpki.RSA3072)))
	pod("stub RSA-2048", unsupportedKey("RSA-2048"), stubOf(testpki.Key(t, testpki.RSA2048), nil))
	pod("stub RSA-1024", unsupportedKey("1024"), stubOf(testpki.Key(t, testpki.RSA1024), nil))
	pod("pkix P-224", unsupportedKey("P-224"), pkixForm(t, testpki.Key(t, testpki.P224)))
	pod("pkix secp256k1", unsupportedKey(""), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request, r.PkixPublicKey, r.ProofOfPossession = nil, curveSPKI(t, oidSecp256k1), []byte{1}
	})
	pod("pkix unknown algorithm", unsupportedKey(""), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request, r.PkixPublicKey, r.ProofOfPossession = nil, unknownAlgSPKI(), []byte{1}
	})
	pod("pkix not DER", malformed("pkix_public_key"), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request, r.PkixPublicKey, r.ProofOfPossession = nil, []byte("not a key"), []byte{1}
	})
	pod("pkix without proof", malformed("proof_of_possession"), pkixForm(t, newP256(t)),
		func(r *signetv1.SignPodCertificateRequestRequest) { r.ProofOfPossession = nil })
	pod("proof without pkix", malformed("pkix_public_key"), pkixForm(t, newP256(t)),
		func(r *signetv1.SignPodCertificateRequestRequest) { r.PkixPublicKey = nil })
	pod("stub and pkix", malformed("exactly one"), func(r *signetv1.SignPodCertificateRequestRequest) {
		s := r.StubPkcs10Request
		pkixForm(t, newP256(t))(r)
		r.StubPkcs10Request = s
	})
	pod("no key at all", malformed("no key"), func(r *signetv1.SignPodCertificateRequestRequest) { r.StubPkcs10Request = nil })
	pod("proof over another pod UID", badSignature(), pkixForm(t, newP256(t)),
		func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.PodUid += "-other" })
	pod("proof by another key", badSignature(), pkixForm(t, newP256(t)), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.ProofOfPossession = testpki.ProofOfPossession(t, newP256(t), r.Pod.PodUid)
	})
	rsaKey := testpki.Key(t, testpki.RSA3072).(*rsa.PrivateKey)
	pod("proof PKCS#1 v1.5 instead of PSS", badSignature(), pkixForm(t, rsaKey), func(r *signetv1.SignPodCertificateRequestRequest) {
		digest := sha256.Sum256([]byte(r.Pod.PodUid))
		r.ProofOfPossession, _ = rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, digest[:])
	})
	pod("stub with a subject", policy("subject"), stubOf(newP256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin"}}))
	pod("stub with a DNS SAN", policy("extension"), stubOf(newP256(t), &x509.CertificateRequest{DNSNames: []string{"kubernetes.default.svc"}}))
	pod("stub asking for CA:TRUE", policy("extension"), stubOf(newP256(t), &x509.CertificateRequest{ExtraExtensions: []pkix.Extension{basicConstraints(true, true)}}))
	pod("stub with a flipped signature", badSignature(), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request = derOf(t, testpki.BreakSignature(t, pemCSR(r.StubPkcs10Request)))
	})
	pod("stub as PEM", malformed(""), func(r *signetv1.SignPodCertificateRequestRequest) { r.StubPkcs10Request = pemCSR(r.StubPkcs10Request) })
}

// spiffeID checks that the pod certificate names exactly want.
func spiffeID(want string) func(*result, map[string]*result) error {
	return func(got *result, _ map[string]*result) error {
		leaf := leafOf(got)
		if leaf == nil {
			return nil
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want || len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
			return fmt.Errorf("pod certificate names %v %v %v %v, want only %s", leaf.URIs, leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses, want)
		}
		return nil
	}
}

func podIdentities(c *corpus) {
	const f = "pod-identity"
	pod := func(name string, w want, edit func(*signetv1.PodIdentity)) *corpusCase {
		return c.add(f, name, clientWatcher, request{pod: c.podCall(func(r *signetv1.SignPodCertificateRequestRequest) { edit(r.Pod) })}, w)
	}
	pod("forged kube-system/kube-proxy", issued(), func(p *signetv1.PodIdentity) {
		p.Namespace, p.ServiceAccountName = "kube-system", "kube-proxy"
	}).check = spiffeID("spiffe://cluster.local/ns/kube-system/sa/kube-proxy")
	pod("service account with a dot", issued(), func(p *signetv1.PodIdentity) { p.ServiceAccountName = "web.v2" }).check =
		spiffeID("spiffe://cluster.local/ns/shop/sa/web.v2")
	pod("pod UID with a space", issued(), func(p *signetv1.PodIdentity) { p.PodUid += " x" })
	for _, tt := range []struct {
		name string
		edit func(*signetv1.PodIdentity)
	}{
		{"namespace upper case", func(p *signetv1.PodIdentity) { p.Namespace = "Shop" }},
		{"namespace with a dot", func(p *signetv1.PodIdentity) { p.Namespace = "shop.evil" }},
		{"namespace traversal", func(p *signetv1.PodIdentity) { p.Namespace = "shop/../kube-system" }},
		{"namespace ESC", func(p *signetv1.PodIdentity) { p.Namespace = "shop\x1b" }},
		{"namespace of 64", func(p *signetv1.PodIdentity) { p.Namespace = strings.Repeat("n", 64) }},
		{"service account traversal", func(p *signetv1.PodIdentity) { p.ServiceAccountName = "web/../../ns/kube-system/sa/admin" }},
		{"service account NUL", func(p *signetv1.PodIdentity) { p.ServiceAccountName = "web\x00admin" }},
		{"service account empty", func(p *signetv1.PodIdentity) { p.ServiceAccountName = "" }},
		{"pod name of 254", func(p *signetv1.PodIdentity) { p.PodName = strings.Repeat("p", 254) }},
		{"pod UID of 129", func(p *signetv1.PodIdentity) { p.PodUid = strings.Repeat("u", 129) }},
		{"pod UID empty", func(p *signetv1.PodIdentity) { p.PodUid = "" }},
		{"node UID with ESC", func(p *signetv1.PodIdentity) { p.NodeUid = "node\x1b[31m" }},
		{"node name empty", func(p *signetv1.PodIdentity) { p.NodeName = "" }},
		{"node name with a space", func(p *signetv1.PodIdentity) { p.NodeName = "node 1" }},
	} {
		pod(tt.name, malformed(""), tt.edit)
	}
}

func podAnnotations(c *corpus) {
	const f = "pod-annotation"
	pod := func(name string, w want, a map[string]string) {
		c.add(f, name, clientWatcher, request{pod: c.podCall(func(r *signetv1.SignPodCertificateRequestRequest) {
			r.UnverifiedUserAnnotations = a
		})}, w)
	}
	pod("allowed key", issued(), map[string]string{"example.com/purpose": "web"})
	pod("allowed key in another case", issued(), map[string]string{"EXAMPLE.com/Purpose": "web"})
	pod("allowed key, value with ESC", issued(), map[string]string{"example.com/purpose": "\x1b[31mred"})
	pod("unknown key", unknownAnnotation("evil.com/admin"), map[string]string{"evil.com/admin": "true"})
	pod("unknown key with ESC", unknownAnnotation(""), map[string]string{"example.com/purpose\x1b[2K": "x"})
	pod("empty key", unknownAnnotation(""), map[string]string{"": "x"})
	many := map[string]string{}
	for i := range 2000 {
		many[fmt.Sprintf("evil.com/%s%05d", strings.Repeat("k", 80), i)] = "v"
	}
	pod("2000 unknown keys (a refusal quoting 180 KB)", unknownAnnotation(""), many)
	pod("300 KiB on an allowed key", malformed("unverified_user_annotations"), map[string]string{"example.com/purpose": strings.Repeat("a", 300<<10)})
}

func podLimitsAndKinds(c *corpus) {
	const f = "pod-limit"
	t := c.t
	pod := func(name, client string, w want, edit func(*signetv1.SignPodCertificateRequestRequest)) *corpusCase {
		return c.add(f, name, client, request{pod: c.podCall(edit)}, w)
	}
	big := bytes.Repeat([]byte{0x30}, 11<<10)
	pod("stub of 11 KiB", clientWatcher, malformed("stub_pkcs10_request"), func(r *signetv1.SignPodCertificateRequestRequest) { r.StubPkcs10Request = big })
	pod("pkix of 11 KiB", clientWatcher, malformed("pkix_public_key"), func(r *signetv1.SignPodCertificateRequestRequest) {
		r.StubPkcs10Request, r.PkixPublicKey, r.ProofOfPossession = nil, big, []byte{1}
	})
	pod("proof of 11 KiB", clientWatcher, malformed("proof_of_possession"), func(r *signetv1.SignPodCertificateRequestRequest) {
		pkixForm(t, newP256(t))(r)
		r.ProofOfPossession = big
	})
	lifetime := func(secs int32, w want, d time.Duration) {
		pod(fmt.Sprintf("maxExpirationSeconds %d", secs), clientWatcher, w, func(r *signetv1.SignPodCertificateRequestRequest) {
			r.MaxExpirationSeconds = secs
		}).lifetime = d
	}
	lifetime(0, malformed("max_expiration_seconds"), 0)
	lifetime(-1, malformed("max_expiration_seconds"), 0)
	lifetime(math.MinInt32, malformed("max_expiration_seconds"), 0)
	lifetime(3599, policy(""), 0)
	lifetime(3600, issued(), time.Hour)
	lifetime(math.MaxInt32, issued(), maxLifetime)
	pod("to a CSR signer", clientWatcher, policy("PodCertificateRequest"), func(r *signetv1.SignPodCertificateRequestRequest) { r.SignerName = signerLegacy })
	pod("to an unknown signer", clientWatcher, unknownSigner(), func(r *signetv1.SignPodCertificateRequestRequest) { r.SignerName = "example.com/pods" })
	pod("empty signer", clientWatcher, malformed("signer_name"), func(r *signetv1.SignPodCertificateRequestRequest) { r.SignerName = "" })
	pod("tool, not allowed", clientTool, notAllowed(), nil)
	pod("object UID with ESC", clientWatcher, malformed("object.uid"), func(r *signetv1.SignPodCertificateRequestRequest) { r.Object.Uid += "\x1b" })
	csr := baseFor(signerLegacy).call(c, nil)
	csr.SignerName = signerPod
	c.sign(f, "CSR to the pod signer", clientWatcher, csr, policy("CertificateSigningRequest"))
}
