package adversarial

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"sync"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
)

// rsa2052 is an RSA key whose modulus is not a whole number of bytes (generated once).
var rsa2052 = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2052) })

func oddRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa2052()
	if err != nil {
		t.Fatalf("generating a 2052-bit RSA key: %v", err)
	}
	return key
}

// keyCases: weak keys, odd curves, keys of unknown algorithms, invalid proofs of possession,
// bad encodings and deep ASN.1.
func keyCases(c *corpus) {
	keyTypes(c)
	proofOfPossession(c)
	badEncodings(c)
	deepNesting(c)
}

// keyTypes: keys Signet's baseline or a profile refuses, and ones it accepts.
func keyTypes(c *corpus) {
	const f = "key-type"
	t := c.t
	client, legacy, custom, kubelet := baseFor(signerClient), baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerKubelet)
	for _, b := range []base{client, legacy, custom} {
		c.sign(f, b.label+"/RSA-1024", clientWatcher, b.callWithKey(c, testpki.Key(t, testpki.RSA1024), nil), unsupportedKey("1024"))
		c.sign(f, b.label+"/P-224", clientWatcher, b.callWithKey(c, testpki.Key(t, testpki.P224), nil), unsupportedKey("P-224"))
	}
	c.sign(f, "client/RSA-2052 (not whole bytes)", clientWatcher, client.callWithKey(c, oddRSAKey(t), nil), unsupportedKey("2052"))
	c.sign(f, "custom/Ed25519 (not in keyTypes)", clientWatcher, custom.callWithKey(c, testpki.Key(t, testpki.Ed25519), nil), unsupportedKey("Ed25519"))
	c.sign(f, "custom/P-521 (not in keyTypes)", clientWatcher, custom.callWithKey(c, testpki.Key(t, testpki.P521), nil), unsupportedKey("P521"))
	c.sign(f, "client/Ed25519", clientWatcher, client.callWithKey(c, testpki.Key(t, testpki.Ed25519), nil), issued())
	c.sign(f, "client/P-384", clientWatcher, client.callWithKey(c, testpki.Key(t, testpki.P384), nil), issued())
	c.sign(f, "legacy/P-521", clientWatcher, legacy.callWithKey(c, testpki.Key(t, testpki.P521), nil), issued())
	rsaLegacy := legacy.callWithKey(c, testpki.Key(t, testpki.RSA2048), nil)
	rsaLegacy.Usages = []string{"digital signature", "key encipherment", "server auth"}
	c.sign(f, "legacy/RSA-2048 with key encipherment", clientWatcher, rsaLegacy, issued())
	rsaKubelet := kubelet.callWithKey(c, testpki.Key(t, testpki.RSA2048), nil)
	rsaKubelet.Usages = []string{"digital signature", "key encipherment", "client auth"}
	c.sign(f, "kubelet-client/RSA-2048 as client-go asks", clientWatcher, rsaKubelet, issued())

	c.sign(f, "client/RSA exponent 3", clientWatcher, client.callPEM(c, csrWithSPKI(t, "alice", rsaSPKI(t, 2048, 3))), unsupportedKey("65537"))
	c.sign(f, "client/RSA-8200", clientWatcher, client.callPEM(c, csrWithSPKI(t, "alice", rsaSPKI(t, 8200, 65537))), unsupportedKey("8192"))
	c.sign(f, "client/RSA-2047 without a private key", clientWatcher, client.callPEM(c, csrWithSPKI(t, "alice", rsaSPKI(t, 2047, 65537))), unsupportedKey(""))
	c.sign(f, "client/secp256k1", clientWatcher, client.callPEM(c, csrWithSPKI(t, "alice", curveSPKI(t, oidSecp256k1))), malformed(""))
	c.sign(f, "client/unknown key algorithm", clientWatcher, client.callPEM(c, csrWithSPKI(t, "alice", unknownAlgSPKI())), unsupportedKey(""))
}

// proofOfPossession: requests whose signature does not prove the key.
func proofOfPossession(c *corpus) {
	const f = "key-pop"
	t := c.t
	for _, b := range []base{baseFor(signerClient), baseFor(signerKubelet), baseFor(signerLegacy)} {
		good := b.call(c, nil)
		c.sign(f, b.label+"/flipped signature byte", clientWatcher, b.callPEM(c, testpki.BreakSignature(t, good.Request)), badSignature())
	}
	legacy := baseFor(signerLegacy)
	c.sign(f, "legacy/signed by another key", clientWatcher, legacy.callPEM(c, resignedByOtherKey(t, legacy.call(c, nil).Request)), badSignature())
	rsaKey := testpki.Key(t, testpki.RSA2048).(*rsa.PrivateKey)
	c.sign(f, "legacy/MD5 with RSA", clientWatcher, legacy.callPEM(c, md5Signed(t, rsaKey, "legacy.example.com")), badSignature())
	c.sign(f, "legacy/RSA algorithm on an ECDSA key", clientWatcher, legacy.callPEM(c, wrongAlgorithm(t, newP256(t), "legacy.example.com")), badSignature())
	tbs := tbsRequest(rawName(rdn(cnAttr("legacy.example.com"))...), spkiOf(t, newP256(t).Public()), nil)
	c.sign(f, "legacy/empty signature", clientWatcher, legacy.callPEM(c, pemCSR(assemble(tbs, oidECDSASHA256, nil))), badSignature())
}

// badEncodings: PEM and DER that are not one PKCS#10 request.
func badEncodings(c *corpus) {
	const f = "key-encoding"
	t := c.t
	legacy := baseFor(signerLegacy)
	good := legacy.call(c, nil).Request
	der := derOf(t, good)
	block := func(typ string, headers map[string]string, body []byte) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: typ, Headers: headers, Bytes: body})
	}
	truncated := der[:len(der)-10]
	for _, tt := range []struct {
		name string
		pem  []byte
	}{
		{"empty request", nil},
		{"not base64", []byte("-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n")},
		{"DER, not PEM", der},
		{"PEM type CERTIFICATE", block("CERTIFICATE", nil, der)},
		{"PEM type PRIVATE KEY", testpki.KeyPEM(t, newP256(t))},
		{"PEM headers", block("CERTIFICATE REQUEST", map[string]string{"Proc-Type": "4,ENCRYPTED"}, der)},
		{"two blocks", append(bytes.Clone(good), legacy.call(c, nil).Request...)},
		{"text before", append([]byte("hello\n"), good...)},
		{"text after", append(bytes.Clone(good), []byte("trailing\n")...)},
		{"trailing byte in the DER", pemCSR(append(bytes.Clone(der), 0))},
		{"truncated DER", pemCSR(truncated)},
		{"BER indefinite length", pemCSR(indefiniteLength(t, der))},
		{"NUL bytes", bytes.Repeat([]byte{0}, 4096)},
		{"unterminated block", []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n")},
	} {
		c.sign(f, "legacy/"+tt.name, clientWatcher, legacy.callPEM(c, tt.pem), malformed(""))
	}
	twice := legacy.call(c, func(r *x509.CertificateRequest) {
		r.ExtraExtensions = []pkix.Extension{basicConstraints(false, false), basicConstraints(true, true)}
	})
	c.sign(f, "legacy/duplicate requested extension", clientWatcher, twice, malformed(""))
}

// deepNesting: thousands of nested SEQUENCEs in an ignored extension, a subject value, the
// public key and an unknown attribute.
func deepNesting(c *corpus) {
	const f = "key-deep-asn1"
	t := c.t
	legacy := baseFor(signerLegacy)
	const depth = 5000
	c.sign(f, "legacy/private extension", clientWatcher, legacy.call(c, func(r *x509.CertificateRequest) {
		r.ExtraExtensions = []pkix.Extension{{Id: oidPrivate, Value: nested(depth)}}
	}), issued())
	subject := seq(set(seq(mustMarshal(oidCommonName), nested(depth))))
	subjectKey := newP256(t)
	c.sign(f, "legacy/subject value", clientWatcher, legacy.callPEM(c, pemCSR(signTBS(t, tbsRequest(subject, spkiOf(t, subjectKey.Public()), nil), subjectKey))), malformed(""))
	deepKey := tbsRequest(rawName(rdn(cnAttr("legacy.example.com"))...), nested(depth), nil)
	c.sign(f, "legacy/public key", clientWatcher, legacy.callPEM(c, pemCSR(signTBS(t, deepKey, newP256(t)))), malformed(""))
	key := newP256(t)
	attrs := seq(mustMarshal(oidPrivate), set(nested(depth)))
	tbs := tbsRequest(rawName(rdn(cnAttr("legacy.example.com"))...), spkiOf(t, key.Public()), attrs)
	c.sign(f, "legacy/unknown attribute", clientWatcher, legacy.callPEM(c, pemCSR(signTBS(t, tbs, key))), issued())
	ext := tbsRequest(rawName(rdn(cnAttr("legacy.example.com"))...), spkiOf(t, key.Public()), seq(mustMarshal(oidExtensionReq), set(nested(depth))))
	c.sign(f, "legacy/extension request", clientWatcher, legacy.callPEM(c, pemCSR(signTBS(t, ext, key))), malformed(""))
}
