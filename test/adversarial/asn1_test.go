package adversarial

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"testing"
	"unicode/utf16"
)

// Object identifiers the builders use.
var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOrgUnit      = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidSAN          = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidBasicConstr  = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidKeyUsage     = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage  = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidAuthKeyID    = asn1.ObjectIdentifier{2, 5, 29, 35}
	oidNameConstr   = asn1.ObjectIdentifier{2, 5, 29, 30}
	oidPrivate      = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1}
	oidRSA          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidECPublicKey  = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	oidSecp256k1    = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
	oidUnknownAlg   = asn1.ObjectIdentifier{1, 2, 3, 4, 5}
	oidECDSASHA256  = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	oidRSASHA256    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	oidRSAMD5       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 4}
	oidExtensionReq = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 14}
)

// ASN.1 classes and the universal tags the builders use beyond encoding/asn1's constants.
const (
	classUniversal       = 0
	classContextSpecific = 2
	tagUniversalString   = 28
	tagBMPString         = 30
	tagNull              = 5
)

// tlv encodes one ASN.1 element.
func tlv(class, tag int, compound bool, content []byte) []byte {
	b, err := asn1.Marshal(asn1.RawValue{Class: class, Tag: tag, IsCompound: compound, Bytes: content})
	if err != nil {
		panic(err) // encoding a RawValue only fails for a negative tag
	}
	return b
}

// seq encodes a SEQUENCE of already encoded elements.
func seq(elems ...[]byte) []byte {
	return tlv(classUniversal, asn1.TagSequence, true, bytes.Join(elems, nil))
}

// set encodes a SET of already encoded elements (in the given order, DER or not).
func set(elems ...[]byte) []byte {
	return tlv(classUniversal, asn1.TagSet, true, bytes.Join(elems, nil))
}

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// attr is one subject attribute with an explicit string type.
type attr struct {
	oid   asn1.ObjectIdentifier
	tag   int
	value []byte
}

func utf8Attr(oid asn1.ObjectIdentifier, s string) attr {
	return attr{oid: oid, tag: asn1.TagUTF8String, value: []byte(s)}
}

func cnAttr(s string) attr  { return utf8Attr(oidCommonName, s) }
func orgAttr(s string) attr { return utf8Attr(oidOrganization, s) }

// bmp encodes s as UTF-16BE, the content of a BMPString.
func bmp(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return b
}

// rawName encodes a subject: one RDN per argument, each a SET of its attributes.
func rawName(rdns ...[]attr) []byte {
	var encoded [][]byte
	for _, rdn := range rdns {
		var atvs [][]byte
		for _, a := range rdn {
			atvs = append(atvs, seq(mustMarshal(a.oid), tlv(classUniversal, a.tag, false, a.value)))
		}
		encoded = append(encoded, set(atvs...))
	}
	return seq(encoded...)
}

// rdn is one single-attribute RDN per attribute.
func rdn(attrs ...attr) [][]attr {
	out := make([][]attr, len(attrs))
	for i, a := range attrs {
		out[i] = []attr{a}
	}
	return out
}

// generalName is one entry of a SubjectAltName.
type generalName struct {
	tag   int
	value []byte
}

func dnsGN(s string) generalName   { return generalName{tag: 2, value: []byte(s)} }
func emailGN(s string) generalName { return generalName{tag: 1, value: []byte(s)} }
func uriGN(s string) generalName   { return generalName{tag: 6, value: []byte(s)} }
func ipGN(b []byte) generalName    { return generalName{tag: 7, value: b} }

// sanExtension encodes a SubjectAltName extension from raw names, bypassing Go's checks.
func sanExtension(names ...generalName) pkix.Extension {
	var elems [][]byte
	for _, n := range names {
		elems = append(elems, tlv(classContextSpecific, n.tag, false, n.value))
	}
	return pkix.Extension{Id: oidSAN, Value: seq(elems...)}
}

// basicConstraints is the extension value of CA:isCA.
func basicConstraints(critical, isCA bool) pkix.Extension {
	return pkix.Extension{Id: oidBasicConstr, Critical: critical, Value: mustMarshal(struct {
		IsCA bool `asn1:"optional"`
	}{isCA})}
}

// keyUsageExtension asks for key usage bits (bit 5 is keyCertSign, bit 6 cRLSign).
func keyUsageExtension(bits ...int) pkix.Extension {
	var b asn1.BitString
	b.Bytes, b.BitLength = []byte{0, 0}, 9
	for _, bit := range bits {
		b.Bytes[bit/8] |= 0x80 >> (bit % 8)
	}
	return pkix.Extension{Id: oidKeyUsage, Critical: true, Value: mustMarshal(b)}
}

// nested returns depth SEQUENCEs nested around a NULL.
func nested(depth int) []byte {
	b := []byte{tagNull, 0}
	for range depth {
		b = seq(b)
	}
	return b
}

// pemCSR wraps DER in a CERTIFICATE REQUEST PEM block.
func pemCSR(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// derOf returns the DER inside a PEM request.
func derOf(t *testing.T, pemBytes []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

// tbsRequest encodes a CertificationRequestInfo with the given subject, SubjectPublicKeyInfo
// and [0] attributes content.
func tbsRequest(subject, spki, attributes []byte) []byte {
	return seq(mustMarshal(0), subject, spki, tlv(classContextSpecific, 0, true, attributes))
}

// extensionRequest is the attributes content asking for exts.
func extensionRequest(exts ...pkix.Extension) []byte {
	return seq(mustMarshal(oidExtensionReq), set(mustMarshal(exts)))
}

// assemble builds a request from its TBS, signature algorithm and signature.
func assemble(tbs []byte, alg asn1.ObjectIdentifier, sig []byte) []byte {
	return seq(tbs, seq(mustMarshal(alg)), mustMarshal(asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)}))
}

// signTBS signs tbs with an ECDSA key (SHA-256) and returns the request's DER.
func signTBS(t *testing.T, tbs []byte, key crypto.Signer) []byte {
	t.Helper()
	digest := sha256.Sum256(tbs)
	sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	alg := oidECDSASHA256
	if _, ok := key.(*rsa.PrivateKey); ok {
		alg = oidRSASHA256
	}
	return assemble(tbs, alg, sig)
}

// spkiOf is the DER SubjectPublicKeyInfo of pub.
func spkiOf(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// rsaSPKI encodes an RSA public key of the given modulus size and exponent without a private
// key: for keys the server must refuse before it checks any signature.
func rsaSPKI(t *testing.T, bits, exponent int) []byte {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(bits-1)))
	if err != nil {
		t.Fatal(err)
	}
	n.SetBit(n, bits-1, 1).SetBit(n, 0, 1)
	pub := mustMarshal(struct {
		N *big.Int
		E int
	}{n, exponent})
	return seq(seq(mustMarshal(oidRSA), []byte{tagNull, 0}), mustMarshal(asn1.BitString{Bytes: pub, BitLength: 8 * len(pub)}))
}

// curveSPKI encodes an EC point of 65 bytes on a named curve crypto/x509 does not know.
func curveSPKI(t *testing.T, curve asn1.ObjectIdentifier) []byte {
	t.Helper()
	point := make([]byte, 65)
	point[0] = 4
	if _, err := rand.Read(point[1:]); err != nil {
		t.Fatal(err)
	}
	return seq(seq(mustMarshal(oidECPublicKey), mustMarshal(curve)), mustMarshal(asn1.BitString{Bytes: point, BitLength: 8 * len(point)}))
}

// unknownAlgSPKI is a key of an algorithm no one knows.
func unknownAlgSPKI() []byte {
	key := bytes.Repeat([]byte{0x42}, 64)
	return seq(seq(mustMarshal(oidUnknownAlg), []byte{tagNull, 0}), mustMarshal(asn1.BitString{Bytes: key, BitLength: 8 * len(key)}))
}

// csrWithSPKI is a request for cn carrying spki, signed by an unrelated ECDSA key: the key
// check must refuse it before the signature is looked at.
func csrWithSPKI(t *testing.T, cn string, spki []byte) []byte {
	t.Helper()
	tbs := tbsRequest(rawName(rdn(cnAttr(cn))...), spki, nil)
	return pemCSR(signTBS(t, tbs, newP256(t)))
}

// resignedByOtherKey is csrPEM's request signed by another key of the same type.
func resignedByOtherKey(t *testing.T, csrPEM []byte) []byte {
	t.Helper()
	csr, err := x509.ParseCertificateRequest(derOf(t, csrPEM))
	if err != nil {
		t.Fatal(err)
	}
	return pemCSR(signTBS(t, csr.RawTBSCertificateRequest, newP256(t)))
}

// md5Signed is a request for cn signed by an RSA key with MD5.
func md5Signed(t *testing.T, key *rsa.PrivateKey, cn string) []byte {
	t.Helper()
	tbs := tbsRequest(rawName(rdn(cnAttr(cn))...), spkiOf(t, key.Public()), nil)
	digest := md5Sum(tbs)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.MD5, digest)
	if err != nil {
		t.Fatal(err)
	}
	return pemCSR(assemble(tbs, oidRSAMD5, sig))
}

// wrongAlgorithm is a request from an ECDSA key that claims an RSA signature algorithm.
func wrongAlgorithm(t *testing.T, key *ecdsa.PrivateKey, cn string) []byte {
	t.Helper()
	tbs := tbsRequest(rawName(rdn(cnAttr(cn))...), spkiOf(t, key.Public()), nil)
	digest := sha256.Sum256(tbs)
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return pemCSR(assemble(tbs, oidRSASHA256, sig))
}

// indefiniteLength re-encodes the outer SEQUENCE of der with BER's indefinite length.
func indefiniteLength(t *testing.T, der []byte) []byte {
	t.Helper()
	var outer asn1.RawValue
	if _, err := asn1.Unmarshal(der, &outer); err != nil {
		t.Fatal(err)
	}
	out := append([]byte{0x30, 0x80}, outer.Bytes...)
	return append(out, 0, 0)
}

func md5Sum(b []byte) []byte {
	sum := md5.Sum(b)
	return sum[:]
}
