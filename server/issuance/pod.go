package issuance

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
)

// maxPodKeyFieldBytes is the kube-apiserver's limit on each key field of a
// PodCertificateRequest (stubPKCS10Request, pkixPublicKey, proofOfPossession).
const maxPodKeyFieldBytes = 10 << 10

// Object identifiers of the key algorithms, named curves and attributes the pod key parser
// tells apart.
var (
	oidPublicKeyRSA     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidPublicKeyECDSA   = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	oidPublicKeyEd25519 = asn1.ObjectIdentifier{1, 3, 101, 112}
	oidExtensionRequest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 14}
	// namedCurves are the curves crypto/x509 parses (P-224 too, which CheckPublicKey refuses).
	namedCurves = []asn1.ObjectIdentifier{
		{1, 3, 132, 0, 33},          // P-224
		{1, 2, 840, 10045, 3, 1, 7}, // P-256
		{1, 3, 132, 0, 34},          // P-384
		{1, 3, 132, 0, 35},          // P-521
	}
)

// emptyName is the DER encoding of an empty subject (an empty RDNSequence).
var emptyName = []byte{0x30, 0x00}

// PodIdentity is the pod a PodCertificateRequest names in its spec.
type PodIdentity struct {
	Namespace          string
	PodName            string
	PodUID             string
	ServiceAccountName string
	ServiceAccountUID  string
	NodeName           string
	NodeUID            string
}

// PodRequest is everything the pipeline needs to decide on and issue one pod certificate.
// Exactly one way of naming the key is set: StubPKCS10Request (certificates.k8s.io/v1, and
// v1beta1 from Kubernetes 1.36), or PKIXPublicKey with ProofOfPossession (v1beta1).
type PodRequest struct {
	// SignerName is spec.signerName.
	SignerName string
	// Pod is the pod identity the certificate is for.
	Pod PodIdentity
	// StubPKCS10Request is a DER PKCS#10 request signed by the pod's key.
	StubPKCS10Request []byte
	// PKIXPublicKey is a DER SubjectPublicKeyInfo.
	PKIXPublicKey []byte
	// ProofOfPossession is the key's signature over the ASCII bytes of Pod.PodUID.
	ProofOfPossession []byte
	// MaxExpirationSeconds is spec.maxExpirationSeconds.
	MaxExpirationSeconds int32
	// UnverifiedUserAnnotations is spec.unverifiedUserAnnotations.
	UnverifiedUserAnnotations map[string]string
}

// PodKey is the verified public key of a PodCertificateRequest.
type PodKey struct {
	// PublicKey is the pod's public key; CheckPublicKey accepted it.
	PublicKey crypto.PublicKey
	// Stub is the parsed stub request; nil when the key came as PKIXPublicKey with a
	// ProofOfPossession.
	Stub *x509.CertificateRequest
}

// ParsePodKey returns the key of a PodCertificateRequest once it has checked the proof that
// the requester holds the private key:
//   - exactly one form: StubPKCS10Request, or PKIXPublicKey with ProofOfPossession; both,
//     neither or half of the second is ErrMalformedRequest, as is a field over 10 KiB;
//   - StubPKCS10Request: DER PKCS#10 (nothing after it), a key CheckPublicKey accepts, and a
//     signature that verifies with that key (ErrInvalidSignature otherwise). Its contents are
//     the policy's business (see PodKey.StubContents);
//   - PKIXPublicKey: a DER SubjectPublicKeyInfo of a key CheckPublicKey accepts (an unknown
//     algorithm or curve is ErrUnsupportedKey), and ProofOfPossession its signature over the
//     ASCII pod UID exactly as the kube-apiserver checks it: Ed25519 over the bytes, ECDSA
//     (ASN.1) over their SHA-256 whatever the curve, RSASSA-PSS over their SHA-256 with any
//     salt length. A mismatch is ErrInvalidSignature.
func ParsePodKey(req PodRequest) (*PodKey, error) {
	stub, spki, proof := req.StubPKCS10Request, req.PKIXPublicKey, req.ProofOfPossession
	for _, f := range []struct {
		name string
		data []byte
	}{{"stub_pkcs10_request", stub}, {"pkix_public_key", spki}, {"proof_of_possession", proof}} {
		if len(f.data) > maxPodKeyFieldBytes {
			return nil, fmt.Errorf("%w: %s is %d bytes, more than the %d the kube-apiserver allows", ErrMalformedRequest, f.name, len(f.data), maxPodKeyFieldBytes)
		}
	}
	switch {
	case len(stub) > 0 && (len(spki) > 0 || len(proof) > 0):
		return nil, fmt.Errorf("%w: both stub_pkcs10_request and pkix_public_key/proof_of_possession are set; exactly one way of naming the key is allowed", ErrMalformedRequest)
	case len(stub) > 0:
		return parseStub(stub)
	case len(spki) > 0 && len(proof) > 0:
		return parseProvenKey(spki, proof, req.Pod.PodUID)
	case len(spki) > 0:
		return nil, fmt.Errorf("%w: pkix_public_key is set without proof_of_possession", ErrMalformedRequest)
	case len(proof) > 0:
		return nil, fmt.Errorf("%w: proof_of_possession is set without pkix_public_key", ErrMalformedRequest)
	default:
		return nil, fmt.Errorf("%w: no key: stub_pkcs10_request (or, from a v1beta1 object, pkix_public_key with proof_of_possession) is required", ErrMalformedRequest)
	}
}

// parseStub parses and verifies a stub PKCS#10 request.
func parseStub(der []byte) (*PodKey, error) {
	csr, err := parseRequestDER(der, "stub_pkcs10_request")
	if err != nil {
		return nil, err
	}
	return &PodKey{PublicKey: csr.PublicKey, Stub: csr}, nil
}

// parseProvenKey parses a DER SubjectPublicKeyInfo and verifies proof over podUID.
func parseProvenKey(der, proof []byte, podUID string) (*PodKey, error) {
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if rest, err := asn1.Unmarshal(der, &spki); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: pkix_public_key is not a DER SubjectPublicKeyInfo", ErrMalformedRequest)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	switch {
	case err != nil && !knownKeyAlgorithm(spki.Algorithm):
		return nil, fmt.Errorf("%w: pkix_public_key has key algorithm %s with parameters crypto/x509 does not know (%s)", ErrUnsupportedKey, spki.Algorithm.Algorithm, supportedKeys)
	case err != nil:
		return nil, fmt.Errorf("%w: parsing pkix_public_key: %v", ErrMalformedRequest, err)
	}
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	if podUID == "" {
		return nil, fmt.Errorf("%w: pod.pod_uid is required: proof_of_possession signs it", ErrMalformedRequest)
	}
	if !verifyProof(pub, []byte(podUID), proof) {
		return nil, fmt.Errorf("%w: proof_of_possession is not the key's signature over the pod UID", ErrInvalidSignature)
	}
	return &PodKey{PublicKey: pub}, nil
}

// knownKeyAlgorithm reports whether crypto/x509 parses keys of algorithm a: RSA, Ed25519,
// and ECDSA on a curve it knows. A key of a known algorithm that does not parse is
// malformed; any other key is unsupported.
func knownKeyAlgorithm(a pkix.AlgorithmIdentifier) bool {
	switch {
	case a.Algorithm.Equal(oidPublicKeyRSA), a.Algorithm.Equal(oidPublicKeyEd25519):
		return true
	case a.Algorithm.Equal(oidPublicKeyECDSA):
		var curve asn1.ObjectIdentifier
		if _, err := asn1.Unmarshal(a.Parameters.FullBytes, &curve); err != nil {
			return false
		}
		for _, c := range namedCurves {
			if curve.Equal(c) {
				return true
			}
		}
	}
	return false
}

// verifyProof reports whether proof is pub's signature over msg, as the kube-apiserver
// verifies a PodCertificateRequest's proofOfPossession.
func verifyProof(pub crypto.PublicKey, msg, proof []byte) bool {
	digest := sha256.Sum256(msg)
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, msg, proof)
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest[:], proof)
	case *rsa.PublicKey:
		// nil options: any salt length (rsa.PSSSaltLengthAuto), as the kube-apiserver verifies.
		return rsa.VerifyPSS(k, crypto.SHA256, digest[:], proof, nil) == nil
	}
	return false
}

// StubContents lists what the stub request carries besides its key: a subject and each
// attribute, an extension request as its extensions (SANs included). It is empty for the
// request the kubelet sends (x509.CreateCertificateRequest of an empty template) and when the
// key came without a stub.
func (k *PodKey) StubContents() []string {
	if k == nil || k.Stub == nil {
		return nil
	}
	var found []string
	if !bytes.Equal(k.Stub.RawSubject, emptyName) {
		found = append(found, fmt.Sprintf("subject %q", k.Stub.Subject.String()))
	}
	var tbs struct {
		Version    int
		Subject    asn1.RawValue
		PublicKey  asn1.RawValue
		Attributes []asn1.RawValue `asn1:"tag:0"`
	}
	if _, err := asn1.Unmarshal(k.Stub.RawTBSCertificateRequest, &tbs); err != nil {
		return append(found, "attributes that do not parse")
	}
	for _, raw := range tbs.Attributes {
		var attr struct {
			Type   asn1.ObjectIdentifier
			Values asn1.RawValue
		}
		if _, err := asn1.Unmarshal(raw.FullBytes, &attr); err != nil {
			found = append(found, "an attribute that does not parse")
			continue
		}
		if !attr.Type.Equal(oidExtensionRequest) {
			found = append(found, "attribute "+attr.Type.String())
		}
	}
	for _, ext := range k.Stub.Extensions {
		found = append(found, "extension "+extensionName(ext.Id))
	}
	if len(tbs.Attributes) > 0 && len(found) == 0 {
		found = append(found, "an empty extension request attribute")
	}
	return found
}

// extensionName names an extension OID, with its common name when it has one.
func extensionName(id asn1.ObjectIdentifier) string {
	for _, n := range []struct {
		oid  asn1.ObjectIdentifier
		name string
	}{
		{oidSubjectAltName, "subject alternative name"},
		{oidBasicConstraints, "basic constraints"},
		{oidKeyUsage, "key usage"},
		{oidExtKeyUsage, "extended key usage"},
	} {
		if id.Equal(n.oid) {
			return fmt.Sprintf("%s (%s)", id, n.name)
		}
	}
	return id.String()
}
