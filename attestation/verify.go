package attestation

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"time"

	"github.com/google/go-tpm/tpm2"
)

// VerifyOptions is what Verify checks evidence against.
type VerifyOptions struct {
	// Trust is what the EK must chain to or be listed in.
	Trust Trust
	// TicketKey is the key the server seals its tickets with.
	TicketKey []byte
	// Node is the node name the request asks a certificate for (the common name's
	// "system:node:<name>").
	Node string
	// Now is the time of the check.
	Now time.Time
	// Skew is how far a ticket's issue time may be after Now (the clocks of the servers of a
	// fleet differ); zero allows none.
	Skew time.Duration
	// Boot is the boot-state policy; nil checks no boot state.
	Boot *BootPolicy
}

// NodeIdentity is what verified evidence establishes about the node that sent it.
type NodeIdentity struct {
	// Node is the node name, as the ticket and the request name it.
	Node string
	// EK is the EK's fingerprint (hex SHA-256 of its PKIX DER), and EKTrust why it is trusted.
	EK, EKTrust string
	// AKName is the AK's TPM name, in hex.
	AKName string
	// Ticket is the ticket's ID, in hex, for its single use, and TicketExpires its expiry:
	// the server must remember the ID at least until then.
	Ticket        string
	TicketExpires time.Time
	// ProviderID is the request's provider ID.
	ProviderID string
	// BootState names the reference set the boot state matched; empty without a policy.
	BootState string
}

// bindingLabel starts every binding digest, so that a binding signature cannot be taken for
// any other signature of the key.
const bindingLabel = "signet node attestation binding v1\x00"

// BindingDigest is the SHA-256 the binding key signs: the label, the ticket's nonce and the
// DER SubjectPublicKeyInfo of the request's key.
func BindingDigest(nonce, spki []byte) []byte {
	h := sha256.New()
	h.Write([]byte(bindingLabel))
	h.Write(nonce)
	h.Write(spki)
	return h.Sum(nil)
}

// Verify checks attested evidence for the request csr (parsed, its own signature verified),
// with no state, in this order; the first check that fails refuses, as a Failure naming it:
//
//   - endorsement key, endorsement key trust, attestation key: CheckKeys (the EK is a TPM
//     endorsement key that chains to a manufacturer root or is on the allow-list; the AK is a
//     restricted signing key created in, and fixed to, its TPM);
//   - ticket: sealed with opts.TicketKey (this server issued it, after the node decrypted a
//     credential that only the TPM of this EK could decrypt with this AK loaded), in the
//     current format;
//   - ticket expiry: not expired at opts.Now, and not issued after opts.Now+opts.Skew;
//   - ticket node: issued for opts.Node, the node the request names;
//   - ticket keys: issued for this EK and this AK (another TPM's AK, or another EK, cannot
//     ride on it);
//   - binding key: a signing key, not restricted, fixedTPM, fixedParent and created in the
//     TPM (sensitiveDataOrigin): a key loaded from outside (TPM2_LoadExternal) has neither
//     fixedTPM nor fixedParent;
//   - certification: CertifyInfo is a TPMS_ATTEST of type certify made by a TPM
//     (TPM_GENERATED), naming the binding key (its name is the hash of KeyPublic's bytes);
//   - nonce: its qualifying data is the ticket's nonce, so it was made for this ticket;
//   - certification signature: the AK signed CertifyInfo;
//   - binding signature: the binding key signed BindingDigest(nonce, the request's key), so
//     the TPM vouches for this request's key in this exchange;
//   - boot state, when opts.Boot is set: the AK quoted exactly the policy's PCRs of the
//     SHA-256 bank with the ticket's nonce, the values the node reported are the quoted ones,
//     and they equal one of the policy's reference sets;
//   - provider ID: the request carries one (ProviderID).
//
// Verify cannot know whether the ticket was spent before, or whether the EK is bound to
// another node: the caller checks both with its state (CheckTicketUsed, CheckEKBinding)
// before it trusts the identity.
func Verify(att *Attested, csr *x509.CertificateRequest, opts VerifyOptions) (NodeIdentity, error) {
	ev := att.Evidence
	k, err := CheckKeys(ev.EKCertificate, ev.EKPublic, ev.AKPublic, opts.Trust, opts.Now)
	if err != nil {
		return NodeIdentity{}, err
	}
	t, err := OpenTicket(ev.Ticket, opts.TicketKey)
	if err != nil {
		return NodeIdentity{}, err
	}
	if err := checkTicket(t, k, opts); err != nil {
		return NodeIdentity{}, err
	}
	key, err := decode(CheckKey, ev.KeyPublic)
	if err != nil {
		return NodeIdentity{}, err
	}
	if err := checkAttributes(CheckKey, key, attributes{"sign": true, "restricted": false, "decrypt": false, "fixedTPM": true, "fixedParent": true, "sensitiveDataOrigin": true},
		"the binding key must be created in, and never leave, the TPM; a key loaded from outside has neither fixedTPM nor fixedParent"); err != nil {
		return NodeIdentity{}, err
	}
	if err := checkCertify(ev.CertifyInfo, key, t.Nonce[:]); err != nil {
		return NodeIdentity{}, err
	}
	if err := verifySignature(k.ak.key, ev.CertifyInfo, ev.CertifySignature); err != nil {
		return NodeIdentity{}, refuse(CheckCertifySig, "the AK did not certify the binding key: %v", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		return NodeIdentity{}, refuse(CheckBinding, "the request's key: %v", err)
	}
	if err := verifyDigestSignature(key.key, BindingDigest(t.Nonce[:], spki), ev.BindingSignature); err != nil {
		return NodeIdentity{}, refuse(CheckBinding, "the binding key did not sign this request's key with the ticket's nonce: %v", err)
	}
	boot, err := checkBootState(ev, k.ak, t.Nonce[:], opts.Boot)
	if err != nil {
		return NodeIdentity{}, err
	}
	providerID, err := ProviderID(csr)
	if err != nil {
		return NodeIdentity{}, err
	}
	return NodeIdentity{
		Node: t.Node, EK: k.EK, EKTrust: k.EKTrust, AKName: k.AKName,
		Ticket: hex.EncodeToString(t.ID[:]), TicketExpires: t.Expires, ProviderID: providerID, BootState: boot,
	}, nil
}

// checkTicket checks an opened ticket's life and bindings.
func checkTicket(t Ticket, k *Keys, opts VerifyOptions) error {
	switch {
	case !opts.Now.Before(t.Expires):
		return refuse(CheckTicketExpiry, "the ticket expired at %s; attest again", t.Expires.UTC().Format(time.RFC3339))
	case t.Issued.After(opts.Now.Add(opts.Skew)):
		return refuse(CheckTicketExpiry, "the ticket was issued at %s, in the future", t.Issued.UTC().Format(time.RFC3339))
	case t.Node != opts.Node:
		return refuse(CheckTicketNode, "the ticket was issued for node %q, not %q", clip(t.Node), clip(opts.Node))
	case subtle.ConstantTimeCompare(t.EK[:], k.ekSum[:]) != 1:
		return refuse(CheckTicketKeys, "the ticket was issued for another endorsement key")
	case !bytes.Equal(t.AKName, k.ak.name):
		return refuse(CheckTicketKeys, "the ticket was issued for another attestation key")
	}
	return nil
}

// checkCertify checks that info is a TPM-made certification of key with nonce as its
// qualifying data.
func checkCertify(info []byte, key *tpmPublic, nonce []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = refuse(CheckCertify, "the certification does not decode")
		}
	}()
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](info)
	if err != nil {
		return refuse(CheckCertify, "the certification does not decode: %v", err)
	}
	if att.Magic != tpm2.TPMGeneratedValue {
		return refuse(CheckCertify, "the certification was not made by a TPM (magic 0x%08x)", uint32(att.Magic))
	}
	if att.Type != tpm2.TPMSTAttestCertify {
		return refuse(CheckCertify, "the attestation is of type 0x%04x, not a certification", uint16(att.Type))
	}
	if !bytes.Equal(tpm2.Marshal(att), info) {
		return refuse(CheckCertify, "the certification has bytes after it")
	}
	if subtle.ConstantTimeCompare(att.ExtraData.Buffer, nonce) != 1 {
		return refuse(CheckNonce, "the certification's qualifying data is not the ticket's nonce")
	}
	certified, err := att.Attested.Certify()
	if err != nil {
		return refuse(CheckCertify, "the attestation carries no certified name")
	}
	if !bytes.Equal(certified.Name.Buffer, key.name) {
		return refuse(CheckCertify, "the AK certified another key than the binding key")
	}
	return nil
}
