// Package nodetpm is the node side of attestation: it reads the TPM's endorsement key (and
// its certificate), makes the attestation key and the binding key, answers the server's
// credential challenge and certifies the binding key for a request. It speaks TPM 2.0
// commands (github.com/google/go-tpm/tpm2) to whatever transport it is given: /dev/tpmrm0, a
// swtpm socket (internal/tpmconn) or the simulator in tests. It links no CA-key code.
//
// The AK and the binding key are primary keys of the owner hierarchy, made from fixed
// templates: the TPM derives the same keys from its seed every time, so the node keeps no key
// file, and a copy of the node's disk holds nothing that works in another TPM. Each call
// creates the keys it needs and flushes them before it returns.
package nodetpm

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/attestation"
)

// NV indices of the EK certificates (TCG EK Credential Profile): RSA 2048 and ECC P-256 of
// the low range, ECC P-384 of the high range (template H-3, which swtpm makes).
const (
	nvRSAEKCert     tpm2.TPMHandle = 0x01c00002
	nvECCEKCert     tpm2.TPMHandle = 0x01c0000a
	nvECCP384EKCert tpm2.TPMHandle = 0x01c00016
)

// ECCP384EKTemplate is the TCG EK Credential Profile's high-range template H-3 (ECC NIST
// P-384, SHA-384, AES-256-CFB, PolicyB SHA-384, userWithAuth, empty unique): the template of
// the ECC EK swtpm_setup makes and certifies at NV index 0x01c00016.
var ECCP384EKTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA384,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true,
		AdminWithPolicy: true, Restricted: true, Decrypt: true,
	},
	AuthPolicy: tpm2.TPM2BDigest{Buffer: []byte{ // PolicyB SHA-384: PolicyOR(PolicyA, PolicyC)
		0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc,
		0xf5, 0xfd, 0x3a, 0x1a, 0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4,
		0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca, 0xcb, 0x47, 0xba, 0x09,
		0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12,
	}},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Symmetric: tpm2.TPMTSymDefObject{
			Algorithm: tpm2.TPMAlgAES,
			KeyBits:   tpm2.NewTPMUSymKeyBits(tpm2.TPMAlgAES, tpm2.TPMKeyBits(256)),
			Mode:      tpm2.NewTPMUSymMode(tpm2.TPMAlgAES, tpm2.TPMAlgCFB),
		},
		Scheme:  tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
		CurveID: tpm2.TPMECCNistP384,
		KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{}),
}

// TPM is a node's TPM. It is not safe for concurrent use: the node agent runs one exchange at
// a time, under its lock.
type TPM struct {
	t transport.TPM
}

// New returns the node TPM reached through t.
func New(t transport.TPM) *TPM { return &TPM{t: t} }

// Keys are the node's EK and AK, as a ChallengeRequest and the Evidence carry them.
type Keys struct {
	EKCertificate []byte // DER, nil when the TPM has none
	EKPublic      []byte // TPMT_PUBLIC
	AKPublic      []byte // TPMT_PUBLIC
	ekTemplate    tpm2.TPMTPublic
}

// AKTemplate is the attestation key's template: an ECC P-256 restricted signing key
// (ECDSA, SHA-256), fixedTPM, fixedParent, created in the TPM, usable without a password.
// Its unique field makes it a different key from any other template of the owner hierarchy.
var AKTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true,
		NoDA: true, Restricted: true, SignEncrypt: true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		CurveID: tpm2.TPMECCNistP256,
		Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256})},
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{X: tpm2.TPM2BECCParameter{Buffer: []byte("signet attestation key")}}),
}

// BindingKeyTemplate is the binding key's template: an ECC P-256 signing key (ECDSA,
// SHA-256), not restricted, fixedTPM, fixedParent, created in the TPM.
var BindingKeyTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true,
		NoDA: true, SignEncrypt: true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		CurveID: tpm2.TPMECCNistP256,
		Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256})},
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{X: tpm2.TPM2BECCParameter{Buffer: []byte("signet node binding key")}}),
}

// Keys returns the EK (with its certificate, when the TPM holds one whose key is the EK of the
// matching TCG template) and the AK.
func (n *TPM) Keys() (*Keys, error) {
	ek, err := n.endorsementKey()
	if err != nil {
		return nil, err
	}
	ak, err := n.primary(tpm2.TPMRHOwner, AKTemplate, "attestation key")
	if err != nil {
		return nil, err
	}
	n.flush(ak.ObjectHandle)
	ek.AKPublic = ak.OutPublic.Bytes()
	return ek, nil
}

// endorsementKey finds the EK: for each certificate in NV (ECC P-256, ECC P-384, RSA) the key of the
// matching template, when it is the certificate's key; else the ECC EK, with no certificate.
func (n *TPM) endorsementKey() (*Keys, error) {
	for _, c := range []struct {
		index    tpm2.TPMHandle
		template tpm2.TPMTPublic
	}{{nvECCEKCert, tpm2.ECCEKTemplate}, {nvECCP384EKCert, ECCP384EKTemplate}, {nvRSAEKCert, tpm2.RSAEKTemplate}} {
		der, err := n.readNV(c.index)
		if err != nil || len(der) == 0 {
			continue
		}
		cert, err := x509.ParseCertificate(trimDER(der))
		if err != nil {
			continue
		}
		k, err := n.ekWith(c.template)
		if err != nil {
			return nil, err
		}
		ekPub, err := tpm2.Unmarshal[tpm2.TPMTPublic](k.EKPublic)
		if err != nil {
			return nil, fmt.Errorf("reading the endorsement key: %w", err)
		}
		pub, err := tpm2.Pub(*ekPub)
		if err == nil {
			if eq, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(pub) {
				k.EKCertificate = cert.Raw
				return k, nil
			}
		}
	}
	return n.ekWith(tpm2.ECCEKTemplate)
}

// ekWith creates the EK of template and returns its public area, flushing it.
func (n *TPM) ekWith(template tpm2.TPMTPublic) (*Keys, error) {
	rsp, err := n.primary(tpm2.TPMRHEndorsement, template, "endorsement key")
	if err != nil {
		return nil, err
	}
	defer n.flush(rsp.ObjectHandle)
	return &Keys{EKPublic: rsp.OutPublic.Bytes(), ekTemplate: template}, nil
}

// trimDER drops the padding some TPMs leave after the certificate in its NV index.
func trimDER(b []byte) []byte {
	if len(b) < 4 || b[0] != 0x30 || b[1] != 0x82 {
		return b
	}
	if n := 4 + (int(b[2])<<8 | int(b[3])); n <= len(b) {
		return b[:n]
	}
	return b
}

// readNV reads an NV index whole, in chunks the TPM accepts; an index that does not exist is
// (nil, nil).
func (n *TPM) readNV(index tpm2.TPMHandle) ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: index}.Execute(n.t)
	if err != nil {
		return nil, nil
	}
	contents, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, fmt.Errorf("reading NV index 0x%x: %w", uint32(index), err)
	}
	size := int(contents.DataSize)
	const chunk = 512
	var out bytes.Buffer
	for off := 0; off < size; off += chunk {
		k := min(chunk, size-off)
		rsp, err := tpm2.NVRead{
			AuthHandle: tpm2.AuthHandle{Handle: index, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: index, Name: pub.NVName},
			Size:       uint16(k), Offset: uint16(off),
		}.Execute(n.t)
		if err != nil {
			return nil, fmt.Errorf("reading NV index 0x%x: %w", uint32(index), err)
		}
		out.Write(rsp.Data.Buffer)
	}
	return out.Bytes(), nil
}

// Activate answers a credential challenge: TPM2_ActivateCredential with the AK as the object
// the credential names and the EK (authorized by its policy, PolicySecret of the endorsement
// hierarchy) as the key that decrypts it. It fails when the challenge was made for another
// EK or another AK.
func (n *TPM) Activate(keys *Keys, ch attestation.Challenge) ([]byte, error) {
	ek, err := n.primary(tpm2.TPMRHEndorsement, keys.ekTemplate, "endorsement key")
	if err != nil {
		return nil, err
	}
	defer n.flush(ek.ObjectHandle)
	ak, err := n.primary(tpm2.TPMRHOwner, AKTemplate, "attestation key")
	if err != nil {
		return nil, err
	}
	defer n.flush(ak.ObjectHandle)
	// The low-range templates authorize the EK by policy only (PolicySecret of the
	// endorsement hierarchy); the high-range ones also by its empty password (userWithAuth).
	ekAuth := tpm2.Policy(tpm2.TPMAlgSHA256, 16, ekPolicy)
	if keys.ekTemplate.ObjectAttributes.UserWithAuth {
		ekAuth = tpm2.PasswordAuth(nil)
	}
	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle:      tpm2.AuthHandle{Handle: ek.ObjectHandle, Name: ek.Name, Auth: ekAuth},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: ch.CredentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: ch.EncryptedSecret},
	}.Execute(n.t)
	if err != nil {
		return nil, fmt.Errorf("activating the credential: %w", err)
	}
	return rsp.CertInfo.Buffer, nil
}

// ekPolicy satisfies the TCG EK templates' policy: PolicySecret of the endorsement hierarchy.
func ekPolicy(t transport.TPM, handle tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{AuthHandle: tpm2.TPMRHEndorsement, PolicySession: handle, NonceTPM: nonceTPM}.Execute(t)
	return err
}

// Certified is the part of the evidence the TPM makes for one request.
type Certified struct {
	KeyPublic, CertifyInfo, CertifySignature, BindingSignature []byte
}

// Certify makes the evidence for a request whose key has the DER SubjectPublicKeyInfo spki:
// the AK certifies the binding key with nonce as qualifying data (TPM2_Certify), and the
// binding key signs attestation.BindingDigest(nonce, spki).
func (n *TPM) Certify(nonce, spki []byte) (*Certified, error) {
	ak, err := n.primary(tpm2.TPMRHOwner, AKTemplate, "attestation key")
	if err != nil {
		return nil, err
	}
	defer n.flush(ak.ObjectHandle)
	key, err := n.primary(tpm2.TPMRHOwner, BindingKeyTemplate, "binding key")
	if err != nil {
		return nil, err
	}
	defer n.flush(key.ObjectHandle)
	return CertifyWith(n.t, tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
		tpm2.AuthHandle{Handle: key.ObjectHandle, Name: key.Name, Auth: tpm2.PasswordAuth(nil)}, key.OutPublic.Bytes(), nonce, spki)
}

// CertifyWith is Certify with the AK and the binding key already loaded: ak certifies key
// (whose TPMT_PUBLIC is keyPublic) and key signs the binding digest. Tests use it to certify
// keys that are not the node's own.
func CertifyWith(t transport.TPM, ak, key tpm2.AuthHandle, keyPublic, nonce, spki []byte) (*Certified, error) {
	cert, err := tpm2.Certify{
		ObjectHandle:   key,
		SignHandle:     ak,
		QualifyingData: tpm2.TPM2BData{Buffer: nonce},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
	}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("certifying the binding key: %w", err)
	}
	sig, err := tpm2.Sign{
		KeyHandle: key,
		Digest:    tpm2.TPM2BDigest{Buffer: attestation.BindingDigest(nonce, spki)},
		InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUSigScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSchemeHash{HashAlg: tpm2.TPMAlgSHA256})},
		Validation: tpm2.TPMTTKHashCheck{Tag: tpm2.TPMSTHashCheck, Hierarchy: tpm2.TPMRHNull},
	}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("signing the binding: %w", err)
	}
	return &Certified{
		KeyPublic: keyPublic, CertifyInfo: cert.CertifyInfo.Bytes(),
		CertifySignature: tpm2.Marshal(cert.Signature), BindingSignature: tpm2.Marshal(sig.Signature),
	}, nil
}

// Evidence assembles the attestation data of a request.
func Evidence(keys *Keys, ticket string, c *Certified) attestation.Evidence {
	return attestation.Evidence{
		Version: attestation.VersionV1, EKCertificate: keys.EKCertificate, EKPublic: keys.EKPublic, AKPublic: keys.AKPublic,
		Ticket: ticket, KeyPublic: c.KeyPublic, CertifyInfo: c.CertifyInfo, CertifySignature: c.CertifySignature, BindingSignature: c.BindingSignature,
	}
}

// primary creates the primary key of template in hierarchy.
func (n *TPM) primary(hierarchy tpm2.TPMHandle, template tpm2.TPMTPublic, what string) (*tpm2.CreatePrimaryResponse, error) {
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: hierarchy, InPublic: tpm2.New2B(template)}.Execute(n.t)
	if err != nil {
		return nil, fmt.Errorf("creating the %s: %w", what, err)
	}
	return rsp, nil
}

// flush unloads a transient object; a failure leaves it for the TPM's resource manager.
func (n *TPM) flush(h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(n.t)
}

// Quoted is the boot state the TPM reports for a request.
type Quoted struct {
	Quote, Signature []byte
	Values           []attestation.PCRValue
}

// Quote reads pcrs of the SHA-256 bank and has the AK quote them with nonce as qualifying
// data (TPM2_Quote), for a server whose boot-state policy asks for them.
func (n *TPM) Quote(nonce []byte, pcrs []int) (*Quoted, error) {
	ak, err := n.primary(tpm2.TPMRHOwner, AKTemplate, "attestation key")
	if err != nil {
		return nil, err
	}
	defer n.flush(ak.ObjectHandle)
	return QuoteWith(n.t, tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)}, nonce, pcrs)
}

// QuoteWith is Quote with the AK already loaded.
func QuoteWith(t transport.TPM, ak tpm2.AuthHandle, nonce []byte, pcrs []int) (*Quoted, error) {
	var q Quoted
	for _, idx := range pcrs {
		rsp, err := tpm2.PCRRead{PCRSelectionIn: selection([]int{idx})}.Execute(t)
		if err != nil {
			return nil, fmt.Errorf("reading PCR %d: %w", idx, err)
		}
		if len(rsp.PCRValues.Digests) != 1 {
			return nil, fmt.Errorf("reading PCR %d: the TPM returned %d values", idx, len(rsp.PCRValues.Digests))
		}
		q.Values = append(q.Values, attestation.PCRValue{Index: idx, Digest: rsp.PCRValues.Digests[0].Buffer})
	}
	rsp, err := tpm2.Quote{SignHandle: ak, QualifyingData: tpm2.TPM2BData{Buffer: nonce},
		InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull}, PCRSelect: selection(pcrs)}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("quoting PCRs %v: %w", pcrs, err)
	}
	q.Quote, q.Signature = rsp.Quoted.Bytes(), tpm2.Marshal(rsp.Signature)
	return &q, nil
}

// selection is pcrs of the SHA-256 bank.
func selection(pcrs []int) tpm2.TPMLPCRSelection {
	idx := make([]uint, len(pcrs))
	for i, p := range pcrs {
		idx[i] = uint(p)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(idx...)}}}
}

// WithQuote adds the boot state to the evidence.
func WithQuote(ev attestation.Evidence, q *Quoted) attestation.Evidence {
	if q != nil {
		ev.Quote, ev.QuoteSignature, ev.PCRValues = q.Quote, q.Signature, q.Values
	}
	return ev
}
