package issuance_test

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

// TestParsePodKeyForms: both ways of naming the key are verified for every key type the
// kube-apiserver allows: the stub request's signature, and the v1beta1 proof of possession
// over the pod UID exactly as the kube-apiserver checks it.
func TestParsePodKeyForms(t *testing.T) {
	t.Parallel()
	for _, kt := range podKeyTypes {
		t.Run(kt, func(t *testing.T) {
			t.Parallel()
			key := podKey(t, kt)
			for form, req := range map[string]issuance.PodRequest{
				"stub":       {Pod: testPod, StubPKCS10Request: stub(t, key, nil)},
				"pkix+proof": {Pod: testPod, PKIXPublicKey: spki(t, key), ProofOfPossession: testpki.ProofOfPossession(t, key, testPod.PodUID)},
			} {
				got, err := issuance.ParsePodKey(req)
				if err != nil {
					t.Fatalf("%s: %v", form, err)
				}
				if !samePublicKey(key.Public(), got.PublicKey) {
					t.Errorf("%s: parsed another key", form)
				}
				if (got.Stub != nil) != (form == "stub") || len(got.StubContents()) != 0 {
					t.Errorf("%s: stub %v, contents %q; want a stub only for the stub form, and no contents", form, got.Stub != nil, got.StubContents())
				}
			}
		})
	}
}

// TestParsePodKeyRefusals: each way a key can be missing, malformed, unproven or unsupported
// is refused with its own sentinel and a message saying what is wrong.
func TestParsePodKeyRefusals(t *testing.T) {
	t.Parallel()
	p256 := testpki.Key(t, testpki.P256)
	p384 := testpki.Key(t, testpki.P384)
	rsa3072 := testpki.Key(t, testpki.RSA3072)
	uid := testPod.PodUID
	tampered := testpki.ProofOfPossession(t, p256, uid)
	tampered[len(tampered)-1] ^= 0x01
	// ECDSA over SHA-384 for a P-384 key: the kube-apiserver always hashes with SHA-256.
	d384 := sha512.Sum384([]byte(uid))
	sha384Proof, err := ecdsa.SignASN1(rand.Reader, p384.(*ecdsa.PrivateKey), d384[:])
	if err != nil {
		t.Fatal(err)
	}
	// RSA PKCS #1 v1.5 instead of PSS.
	d256 := sha256.Sum256([]byte(uid))
	pkcs1Proof, err := rsa.SignPKCS1v15(rand.Reader, rsa3072.(*rsa.PrivateKey), crypto.SHA256, d256[:])
	if err != nil {
		t.Fatal(err)
	}
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519SPKI, err := x509.MarshalPKIXPublicKey(x25519.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	secp256k1SPKI := unknownCurveSPKI(t)
	ed := testpki.Key(t, testpki.Ed25519).(ed25519.PrivateKey)
	good := stub(t, p256, nil)
	tests := []struct {
		name string
		req  issuance.PodRequest
		want error
		msg  string
	}{
		{"neither form", issuance.PodRequest{Pod: testPod}, issuance.ErrMalformedRequest, "no key"},
		{"both forms", issuance.PodRequest{Pod: testPod, StubPKCS10Request: good, PKIXPublicKey: spki(t, p256), ProofOfPossession: testpki.ProofOfPossession(t, p256, uid)}, issuance.ErrMalformedRequest, "both"},
		{"stub and a stray proof", issuance.PodRequest{Pod: testPod, StubPKCS10Request: good, ProofOfPossession: testpki.ProofOfPossession(t, p256, uid)}, issuance.ErrMalformedRequest, "both"},
		{"key without proof", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, p256)}, issuance.ErrMalformedRequest, "without proof_of_possession"},
		{"proof without key", issuance.PodRequest{Pod: testPod, ProofOfPossession: testpki.ProofOfPossession(t, p256, uid)}, issuance.ErrMalformedRequest, "without pkix_public_key"},
		{"stub is not DER", issuance.PodRequest{StubPKCS10Request: []byte("-----BEGIN CERTIFICATE REQUEST-----")}, issuance.ErrMalformedRequest, "parsing stub_pkcs10_request"},
		{"stub with trailing data", issuance.PodRequest{StubPKCS10Request: append(stub(t, p256, nil), 0)}, issuance.ErrMalformedRequest, "parsing stub_pkcs10_request"},
		{"stub over 10 KiB", issuance.PodRequest{StubPKCS10Request: make([]byte, 10<<10+1)}, issuance.ErrMalformedRequest, "more than the 10240"},
		{"stub signature broken", issuance.PodRequest{StubPKCS10Request: pemToDER(t, testpki.BreakSignature(t, testpki.CSR(t, p256, &x509.CertificateRequest{})))}, issuance.ErrInvalidSignature, "stub_pkcs10_request"},
		{"stub with an RSA-1024 key", issuance.PodRequest{StubPKCS10Request: stub(t, testpki.Key(t, testpki.RSA1024), nil)}, issuance.ErrUnsupportedKey, "1024 bits"},
		{"stub with a P-224 key", issuance.PodRequest{StubPKCS10Request: stub(t, testpki.Key(t, testpki.P224), nil)}, issuance.ErrUnsupportedKey, "P-224"},
		{"key is not DER", issuance.PodRequest{Pod: testPod, PKIXPublicKey: []byte{1, 2, 3}, ProofOfPossession: []byte{1}}, issuance.ErrMalformedRequest, "not a DER SubjectPublicKeyInfo"},
		{"X25519 key", issuance.PodRequest{Pod: testPod, PKIXPublicKey: x25519SPKI, ProofOfPossession: []byte{1}}, issuance.ErrUnsupportedKey, "ecdh"},
		{"unknown curve", issuance.PodRequest{Pod: testPod, PKIXPublicKey: secp256k1SPKI, ProofOfPossession: []byte{1}}, issuance.ErrUnsupportedKey, "1.2.840.10045.2.1"},
		{"proof without pod UID", issuance.PodRequest{PKIXPublicKey: spki(t, p256), ProofOfPossession: testpki.ProofOfPossession(t, p256, "")}, issuance.ErrMalformedRequest, "pod_uid is required"},
		{"proof over another UID", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, p256), ProofOfPossession: testpki.ProofOfPossession(t, p256, "other-uid")}, issuance.ErrInvalidSignature, "pod UID"},
		{"tampered proof", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, p256), ProofOfPossession: tampered}, issuance.ErrInvalidSignature, "pod UID"},
		{"proof by another key", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, p256), ProofOfPossession: testpki.ProofOfPossession(t, testpki.Key(t, testpki.P256), uid)}, issuance.ErrInvalidSignature, "pod UID"},
		{"P-384 proof over SHA-384", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, p384), ProofOfPossession: sha384Proof}, issuance.ErrInvalidSignature, "pod UID"},
		{"RSA proof with PKCS #1 v1.5", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, rsa3072), ProofOfPossession: pkcs1Proof}, issuance.ErrInvalidSignature, "pod UID"},
		{"Ed25519 proof over the UID's SHA-256", issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, ed), ProofOfPossession: ed25519.Sign(ed, d256[:])}, issuance.ErrInvalidSignature, "pod UID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := issuance.ParsePodKey(tt.req)
			if key != nil {
				t.Errorf("got a key along with %v", err)
			}
			wantSentinel(t, err, tt.want)
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not say %q", err, tt.msg)
			}
		})
	}
}

// TestParsePodKeyRSAPSSSaltLength: an RSA proof with the salt as long as the hash (what many
// libraries choose) verifies as well as one with the maximal salt Go uses by default: the
// kube-apiserver accepts any salt length.
func TestParsePodKeyRSAPSSSaltLength(t *testing.T) {
	t.Parallel()
	key := testpki.Key(t, testpki.RSA3072).(*rsa.PrivateKey)
	digest := sha256.Sum256([]byte(testPod.PodUID))
	sig, err := rsa.SignPSS(rand.Reader, key, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := issuance.ParsePodKey(issuance.PodRequest{Pod: testPod, PKIXPublicKey: spki(t, key), ProofOfPossession: sig}); err != nil {
		t.Errorf("ParsePodKey: %v", err)
	}
}

// unknownCurveSPKI is an ECDSA SubjectPublicKeyInfo on secp256k1, a curve crypto/x509 does not
// know.
func unknownCurveSPKI(t *testing.T) []byte {
	t.Helper()
	params, err := asn1.Marshal(asn1.ObjectIdentifier{1, 3, 132, 0, 10})
	if err != nil {
		t.Fatal(err)
	}
	point := make([]byte, 65)
	point[0] = 4
	der, err := asn1.Marshal(struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}, Parameters: asn1.RawValue{FullBytes: params}},
		PublicKey: asn1.BitString{Bytes: point, BitLength: 8 * len(point)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return der
}
