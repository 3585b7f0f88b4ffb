package issuance

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/signet-pki/signet/attestation"
)

// maxRequestBytes bounds the PEM request the pipeline will parse. The kube-apiserver stores
// requests of any size, but no sensible PKCS#10 request comes close to this.
const maxRequestBytes = 64 << 10

// pemBegin starts every PEM block.
var pemBegin = []byte("-----BEGIN ")

// supportedKeys names the keys CheckPublicKey accepts, for refusal messages.
const supportedKeys = "supported keys: RSA of 2048 to 8192 bits (whole bytes) with exponent 65537; ECDSA P-256, P-384 or P-521; Ed25519"

// minRSABits is the smallest RSA modulus the pipeline accepts.
const minRSABits = 2048

// Requester is the identity that created the request, as recorded by the kube-apiserver.
type Requester struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
}

// Request is everything the pipeline needs to decide on and issue one certificate.
type Request struct {
	// SignerName is the Kubernetes signer name the request is addressed to.
	SignerName string
	// PEM is the PEM-encoded PKCS#10 certificate request.
	PEM []byte
	// Usages are the certificates.k8s.io/v1 key usage strings.
	Usages []string
	// ExpirationSeconds is the requested lifetime; nil asks for the signer's maximum.
	ExpirationSeconds *int32
	// Requester is the identity that created the object.
	Requester Requester
	// Attested is what the server verified of the TPM evidence the request carried, for a
	// signer whose profile requires attestation; nil otherwise. PEM is then the request
	// without its attestation blocks.
	Attested *attestation.NodeIdentity
	// NodeAddresses are the status.addresses of the Node the request names, as the client
	// forwarded them (the watcher's nodeAddresses); none when it did not.
	NodeAddresses []NodeAddress
}

// NodeAddress is one of a Node's status.addresses.
type NodeAddress struct {
	// Type is Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS.
	Type    string
	Address string
}

// ParseCSR decodes and checks a PEM-encoded PKCS#10 request:
//   - exactly one PEM block, of type CERTIFICATE REQUEST, with no headers and nothing but
//     whitespace around it;
//   - DER that parses as PKCS#10;
//   - a signature that verifies with the request's own key (proof of possession);
//   - a key the pipeline accepts (see CheckPublicKey).
//
// Errors wrap ErrMalformedRequest, ErrInvalidSignature or ErrUnsupportedKey.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	if len(data) > maxRequestBytes {
		return nil, fmt.Errorf("%w: request is %d bytes, more than the %d allowed", ErrMalformedRequest, len(data), maxRequestBytes)
	}
	start := bytes.Index(data, pemBegin)
	if start < 0 {
		return nil, fmt.Errorf("%w: no PEM block found", ErrMalformedRequest)
	}
	if len(bytes.TrimSpace(data[:start])) != 0 {
		return nil, fmt.Errorf("%w: data before the CERTIFICATE REQUEST block", ErrMalformedRequest)
	}
	block, rest := pem.Decode(data[start:])
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block found", ErrMalformedRequest)
	}
	// pem.Decode skips a malformed block and decodes the next one; what it skipped is data
	// before the block too.
	if bytes.Count(data[start:len(data)-len(rest)], pemBegin) != 1 {
		return nil, fmt.Errorf("%w: data before the CERTIFICATE REQUEST block", ErrMalformedRequest)
	}
	if block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: PEM block type is %q, want \"CERTIFICATE REQUEST\"", ErrMalformedRequest, block.Type)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("%w: PEM headers are not allowed", ErrMalformedRequest)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: data after the CERTIFICATE REQUEST block", ErrMalformedRequest)
	}
	return parseRequestDER(block.Bytes, "PKCS#10")
}

// MaxSANs bounds the subject alternative names of a request (DNS names, IP addresses, URIs
// and email addresses together). kube-controller-manager has no such limit; no Kubernetes
// client sends more than a handful, and a certificate with thousands costs every party that
// reads it.
const MaxSANs = 256

// parseRequestDER parses a DER PKCS#10 request, named what in errors, checks its key
// (CheckPublicKey) and verifies its signature: the proof of possession of that key.
func parseRequestDER(der []byte, what string) (*x509.CertificateRequest, error) {
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("%w: parsing %s: %v", ErrMalformedRequest, what, err)
	}
	if n := len(csr.DNSNames) + len(csr.IPAddresses) + len(csr.URIs) + len(csr.EmailAddresses); n > MaxSANs {
		return nil, fmt.Errorf("%w: %s has %d subject alternative names, more than the %d Signet accepts", ErrMalformedRequest, what, n, MaxSANs)
	}
	if err := CheckPublicKey(csr.PublicKey); err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidSignature, what, err)
	}
	return csr, nil
}

// CheckPublicKey accepts RSA keys of at least 2048 bits with a public exponent of 65537,
// ECDSA keys on P-256, P-384 or P-521, and Ed25519 keys. Anything else is refused with an
// error wrapping ErrUnsupportedKey that names the supported types.
func CheckPublicKey(pub any) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return fmt.Errorf("%w: RSA key has %d bits, fewer than %d (%s)", ErrUnsupportedKey, bits, minRSABits, supportedKeys)
		}
		if k.N.BitLen() > 8192 {
			return fmt.Errorf("%w: RSA key has %d bits, more than 8192 (%s)", ErrUnsupportedKey, k.N.BitLen(), supportedKeys)
		}
		if k.N.BitLen()%8 != 0 {
			return fmt.Errorf("%w: RSA key has %d bits, not a whole number of bytes (%s)", ErrUnsupportedKey, k.N.BitLen(), supportedKeys)
		}
		if k.E != 65537 {
			return fmt.Errorf("%w: RSA public exponent %d, want 65537 (%s)", ErrUnsupportedKey, k.E, supportedKeys)
		}
		return nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return fmt.Errorf("%w: ECDSA curve %s (%s)", ErrUnsupportedKey, k.Curve.Params().Name, supportedKeys)
	case ed25519.PublicKey:
		return nil
	default:
		return fmt.Errorf("%w: key type %T (%s)", ErrUnsupportedKey, pub, supportedKeys)
	}
}
