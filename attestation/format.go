package attestation

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// The PEM blocks of an attested request (seed 004), in the order they must appear.
const (
	BlockRequest  = "CERTIFICATE REQUEST"
	BlockProvider = "KUBELET AUTHENTICATOR ATTESTATION PROVIDER"
	BlockData     = "KUBELET AUTHENTICATOR ATTESTATION DATA"
)

// ProviderTPM is the content of the provider block for TPM 2.0 attestation.
const ProviderTPM = "tpm"

// VersionV1 is the first version of the attestation data.
const VersionV1 = "signet.tpm/v1"

// SupportedVersions are the versions of the attestation data Verify accepts. A server
// accepts every version a node of the supported skew may send; a node sends the newest its
// server accepts.
var SupportedVersions = []string{VersionV1}

// OIDProviderID is the request extension that carries the node's provider ID (seed 004's
// KubernetesNodeProviderIdentifierOID, in Google's arc as the seed proposes).
var OIDProviderID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 1, 21}

// MaxEvidenceBytes bounds the attestation data block. Real evidence is a few KiB: an EK
// certificate, three TPM public areas, an attestation structure and two signatures.
const MaxEvidenceBytes = 32 << 10

// MaxProviderIDLength bounds the provider ID, as Kubernetes bounds none but a Node's
// spec.providerID is an object field.
const MaxProviderIDLength = 512

// Evidence is the attestation data of version VersionV1, carried as JSON in the BlockData
// block. The TPM structures are their TPM wire encodings.
type Evidence struct {
	// Version is VersionV1.
	Version string `json:"version"`
	// EKCertificate is the DER EK certificate, when the TPM has one; EKPublic's key must be
	// its key.
	EKCertificate []byte `json:"ekCertificate,omitempty"`
	// EKPublic is the EK's TPMT_PUBLIC.
	EKPublic []byte `json:"ekPublic"`
	// AKPublic is the AK's TPMT_PUBLIC.
	AKPublic []byte `json:"akPublic"`
	// Ticket is the sealed ticket the server answered to the credential activation.
	Ticket string `json:"ticket"`
	// KeyPublic is the binding key's TPMT_PUBLIC.
	KeyPublic []byte `json:"keyPublic"`
	// CertifyInfo is the TPMS_ATTEST that TPM2_Certify produced for the binding key, signed by
	// the AK, with the ticket's nonce as qualifying data.
	CertifyInfo []byte `json:"certifyInfo"`
	// CertifySignature is the AK's TPMT_SIGNATURE over CertifyInfo.
	CertifySignature []byte `json:"certifySignature"`
	// BindingSignature is the binding key's TPMT_SIGNATURE over BindingDigest(nonce, the
	// request's public key).
	BindingSignature []byte `json:"bindingSignature"`
	// Quote, QuoteSignature and PCRValues are the boot state, when the server's boot-state
	// policy asks for it (Activation.QuotePCRs): TPM2_Quote's TPMS_ATTEST over those PCRs of
	// the SHA-256 bank with the ticket's nonce, the AK's TPMT_SIGNATURE over it, and the
	// values the node read, ascending by index.
	Quote          []byte     `json:"quote,omitempty"`
	QuoteSignature []byte     `json:"quoteSignature,omitempty"`
	PCRValues      []PCRValue `json:"pcrValues,omitempty"`
}

// Attested is an attested request as the server receives it, split into its parts.
type Attested struct {
	// Request is the CERTIFICATE REQUEST block alone, PEM-encoded, as a request with no
	// attestation is.
	Request []byte
	// Provider is the content of the provider block.
	Provider string
	// Evidence is the attestation data.
	Evidence Evidence
}

// Split takes apart a PEM request with attestation: a CERTIFICATE REQUEST block, then the
// provider block, then the data block, with nothing but whitespace around them and no PEM
// headers. The provider must be ProviderTPM and the data the JSON of a supported version
// (ParseEvidence). Errors are Failures of CheckFormat or CheckVersion, wrapping ErrMalformed.
func Split(data []byte) (*Attested, error) {
	blocks, err := pemBlocks(data)
	if err != nil {
		return nil, err
	}
	want := []string{BlockRequest, BlockProvider, BlockData}
	for i, name := range want {
		if i >= len(blocks) {
			return nil, refuse(CheckFormat, "the %s block is missing (an attested request has the blocks %s, in that order)", name, strings.Join(want, ", "))
		}
		if blocks[i].Type != name {
			return nil, refuse(CheckFormat, "block %d is %q, want %q (an attested request has the blocks %s, in that order)", i+1, blocks[i].Type, name, strings.Join(want, ", "))
		}
	}
	if len(blocks) > len(want) {
		return nil, refuse(CheckFormat, "a %q block follows the attestation data; nothing may", blocks[len(want)].Type)
	}
	provider := string(bytes.TrimSpace(blocks[1].Bytes))
	if provider != ProviderTPM {
		return nil, refuse(CheckFormat, "attestation provider %q is not served; this signer verifies %q", clip(provider), ProviderTPM)
	}
	ev, err := ParseEvidence(blocks[2].Bytes)
	if err != nil {
		return nil, err
	}
	return &Attested{Request: pem.EncodeToMemory(blocks[0]), Provider: provider, Evidence: *ev}, nil
}

// pemBlocks decodes every PEM block of data, refusing anything else: text between or around
// blocks, a block pem.Decode would skip, headers.
func pemBlocks(data []byte) ([]*pem.Block, error) {
	var blocks []*pem.Block
	rest := data
	for len(bytes.TrimSpace(rest)) > 0 {
		trimmed := bytes.TrimLeftFunc(rest, unicode.IsSpace)
		if !bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
			return nil, refuse(CheckFormat, "data outside a PEM block")
		}
		block, next := pem.Decode(trimmed)
		// pem.Decode skips a malformed block and decodes the next one: refuse that as data
		// outside a block.
		if block == nil || bytes.Count(trimmed[:len(trimmed)-len(next)], []byte("-----BEGIN ")) != 1 {
			return nil, refuse(CheckFormat, "a PEM block does not decode")
		}
		if len(block.Headers) != 0 {
			return nil, refuse(CheckFormat, "PEM headers are not allowed (block %q)", block.Type)
		}
		if len(blocks) == 3 {
			return nil, refuse(CheckFormat, "a %q block follows the attestation data; nothing may", block.Type)
		}
		blocks = append(blocks, block)
		rest = next
	}
	if len(blocks) == 0 {
		return nil, refuse(CheckFormat, "no PEM block found")
	}
	return blocks, nil
}

// ParseEvidence decodes attestation data: JSON with a "version" that SupportedVersions
// lists (else a Failure of CheckVersion naming the supported versions), then, for that
// version, the whole object with no unknown field and every required field present (else
// CheckFormat).
func ParseEvidence(data []byte) (*Evidence, error) {
	if len(data) > MaxEvidenceBytes {
		return nil, refuse(CheckFormat, "the attestation data is %d bytes, more than the %d allowed", len(data), MaxEvidenceBytes)
	}
	var head struct {
		Version *string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, refuse(CheckFormat, "the attestation data is not a JSON object: %v", err)
	}
	if head.Version == nil {
		return nil, refuse(CheckVersion, "the attestation data has no version; supported: %s", strings.Join(SupportedVersions, ", "))
	}
	if !slices.Contains(SupportedVersions, *head.Version) {
		return nil, refuse(CheckVersion, "attestation data version %q is not supported; supported: %s", clip(*head.Version), strings.Join(SupportedVersions, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ev Evidence
	if err := dec.Decode(&ev); err != nil {
		return nil, refuse(CheckFormat, "decoding %s attestation data: %v", ev.Version, err)
	}
	if dec.More() {
		return nil, refuse(CheckFormat, "data after the attestation data's JSON object")
	}
	for _, f := range []struct {
		name  string
		empty bool
	}{
		{"ekPublic", len(ev.EKPublic) == 0}, {"akPublic", len(ev.AKPublic) == 0}, {"ticket", ev.Ticket == ""},
		{"keyPublic", len(ev.KeyPublic) == 0}, {"certifyInfo", len(ev.CertifyInfo) == 0},
		{"certifySignature", len(ev.CertifySignature) == 0}, {"bindingSignature", len(ev.BindingSignature) == 0},
	} {
		if f.empty {
			return nil, refuse(CheckFormat, "the attestation data has no %s", f.name)
		}
	}
	return &ev, nil
}

// Encode returns the request csrPEM (one CERTIFICATE REQUEST block) with the provider and
// data blocks of ev appended: what the node agent puts in a CertificateSigningRequest's
// spec.request. The kube-apiserver reads the first block and keeps the rest.
func Encode(csrPEM []byte, ev Evidence) ([]byte, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encoding attestation data: %w", err)
	}
	out := bytes.TrimSpace(slices.Clone(csrPEM))
	out = append(out, '\n')
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: BlockProvider, Bytes: []byte(ProviderTPM)})...)
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: BlockData, Bytes: data})...)
	return out, nil
}

// ProviderID returns the provider ID the request carries in the OIDProviderID extension: a
// DER UTF8String, IA5String or PrintableString of 1 to MaxProviderIDLength printable
// characters. Failures are of CheckProviderID.
func ProviderID(csr *x509.CertificateRequest) (string, error) {
	var found []byte
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(OIDProviderID) {
			continue
		}
		if found != nil {
			return "", refuse(CheckProviderID, "the request carries the provider ID extension (%s) twice", OIDProviderID)
		}
		found = ext.Value
	}
	if found == nil {
		return "", refuse(CheckProviderID, "the request carries no provider ID extension (%s)", OIDProviderID)
	}
	var raw asn1.RawValue
	rest, err := asn1.Unmarshal(found, &raw)
	if err != nil || len(rest) != 0 || raw.Class != asn1.ClassUniversal ||
		(raw.Tag != asn1.TagUTF8String && raw.Tag != asn1.TagIA5String && raw.Tag != asn1.TagPrintableString) {
		return "", refuse(CheckProviderID, "the provider ID extension (%s) is not a DER string", OIDProviderID)
	}
	id := string(raw.Bytes)
	switch {
	case id == "" || len(id) > MaxProviderIDLength:
		return "", refuse(CheckProviderID, "the provider ID has %d bytes; it must have 1 to %d", len(id), MaxProviderIDLength)
	case strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }):
		return "", refuse(CheckProviderID, "the provider ID %q has a character that is not printable", clip(id))
	}
	return id, nil
}

// ProviderIDExtension returns the request extension carrying id, for the node agent.
func ProviderIDExtension(id string) (pkix.Extension, error) {
	v, err := asn1.MarshalWithParams(id, "utf8")
	if err != nil {
		return pkix.Extension{}, fmt.Errorf("encoding the provider ID: %w", err)
	}
	return pkix.Extension{Id: OIDProviderID, Value: v}, nil
}

// clip bounds a caller's string quoted in a refusal.
func clip(s string) string {
	const max = 64
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
