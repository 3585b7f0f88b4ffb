package issuance

import "errors"

// Sentinel errors of the issuance pipeline. Every refusal wraps exactly one of them, so the
// API boundary can map it to a status code and a reason without looking at strings.
var (
	// ErrMalformedRequest: the PKCS#10 request or another field cannot be parsed.
	ErrMalformedRequest = errors.New("malformed request")
	// ErrInvalidSignature: the PKCS#10 signature does not verify (no proof of possession).
	ErrInvalidSignature = errors.New("invalid request signature")
	// ErrUnsupportedKey: the public key type or size is not accepted.
	ErrUnsupportedKey = errors.New("unsupported key")
	// ErrPolicyViolation: the request is well formed but the signer's policy refuses it.
	ErrPolicyViolation = errors.New("policy violation")
	// ErrUnknownAnnotation: a PodCertificateRequest carries spec.unverifiedUserAnnotations keys
	// the signer does not recognise.
	ErrUnknownAnnotation = errors.New("unknown annotation")
)
