package attestation

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/go-tpm/tpm2"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ChallengeRequest is what a node sends to ask for a credential challenge.
type ChallengeRequest struct {
	// Node is the node name the ticket will be for.
	Node string `json:"node"`
	// EKCertificate is the DER EK certificate, when the TPM has one.
	EKCertificate []byte `json:"ekCertificate,omitempty"`
	// EKPublic is the EK's TPMT_PUBLIC.
	EKPublic []byte `json:"ekPublic"`
	// AKPublic is the AK's TPMT_PUBLIC.
	AKPublic []byte `json:"akPublic"`
}

// Challenge is the server's answer to a ChallengeRequest: TPM2_MakeCredential's output for
// the EK and the AK's name.
type Challenge struct {
	// ID names the challenge in the ActivationRequest that answers it.
	ID string `json:"id"`
	// CredentialBlob and EncryptedSecret are TPM2_ActivateCredential's inputs.
	CredentialBlob  []byte `json:"credentialBlob"`
	EncryptedSecret []byte `json:"encryptedSecret"`
	// Expires is when the server forgets the challenge.
	Expires time.Time `json:"expires"`
}

// ActivationRequest answers a Challenge with the secret the TPM decrypted.
type ActivationRequest struct {
	ID     string `json:"id"`
	Secret []byte `json:"secret"`
}

// Activation is the server's answer to a correct ActivationRequest.
type Activation struct {
	// Ticket is the sealed ticket, for Evidence.Ticket.
	Ticket string `json:"ticket"`
	// Nonce is the ticket's nonce, the qualifying data of TPM2_Certify.
	Nonce []byte `json:"nonce"`
	// Expires is when the ticket expires.
	Expires time.Time `json:"expires"`
	// QuotePCRs are the PCRs of the SHA-256 bank the node must quote with its AK and the
	// nonce, when the server has a boot-state policy; none otherwise.
	QuotePCRs []int `json:"quotePCRs,omitempty"`
}

// Trust is what an EK must chain to or be listed in.
type Trust struct {
	// Roots are the TPM manufacturers' root certificates an EK certificate must chain to;
	// Intermediates may help build the chain.
	Roots, Intermediates *x509.CertPool
	// AllowedEKs are the hex SHA-256 fingerprints of the PKIX DER of EK public keys accepted
	// without a certificate (see EKFingerprint).
	AllowedEKs map[string]bool
}

// Keys are a node's EK and AK, checked by CheckKeys.
type Keys struct {
	ek, ak *tpmPublic
	// EK is the EK's fingerprint (hex SHA-256 of its PKIX DER).
	EK    string
	ekSum [32]byte
	// EKTrust says why the EK is trusted: "manufacturer root <subject>" or "allow-list".
	EKTrust string
	// AKName is the AK's TPM name, in hex.
	AKName string
}

// EKFingerprint returns the fingerprint of the EK in a TPMT_PUBLIC, as Trust.AllowedEKs lists
// it and the EK-to-node bindings record it.
func EKFingerprint(ekPublic []byte) (string, error) {
	ek, err := decode(CheckEK, ekPublic)
	if err != nil {
		return "", err
	}
	sum, err := fingerprint(ek.key)
	if err != nil {
		return "", refuse(CheckEK, "%v", err)
	}
	return hex.EncodeToString(sum[:]), nil
}

// CheckNodeName refuses a node name that is not a DNS subdomain (RFC 1123), as the
// kube-apiserver requires of a Node's name.
func CheckNodeName(node string) error {
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return refuse(CheckTicketNode, "node name %q is not valid: %s", clip(node), errs[0])
	}
	return nil
}

// CheckKeys checks a node's EK and AK:
//   - the EK is a TPMT_PUBLIC (canonical encoding, SHA-256 or SHA-384 name, RSA 2048–4096 or
//     ECC P-256/P-384) of a restricted decryption key, fixedTPM and fixedParent, as every EK
//     template makes it;
//   - the EK is trusted: its certificate, when sent, chains to trust.Roots at now (the
//     critical subject alternative name of TPM identity that EK certificates carry is
//     accepted) and carries the EK's key; else its fingerprint is in trust.AllowedEKs;
//   - the AK is a TPMT_PUBLIC of a restricted signing key, fixedTPM, fixedParent and created
//     in the TPM (sensitiveDataOrigin): a key that signs only what the TPM itself produced.
func CheckKeys(ekCert, ekPublic, akPublic []byte, trust Trust, now time.Time) (*Keys, error) {
	ek, sum, err := checkEK(ekPublic)
	if err != nil {
		return nil, err
	}
	k := &Keys{ek: ek, ekSum: sum, EK: hex.EncodeToString(sum[:])}
	if k.EKTrust, err = trustEK(ekCert, ek, k.EK, trust, now); err != nil {
		return nil, err
	}
	if k.ak, err = checkAK(akPublic); err != nil {
		return nil, err
	}
	k.AKName = hex.EncodeToString(k.ak.name)
	return k, nil
}

// checkEK decodes and checks an EK's TPMT_PUBLIC and returns it with its fingerprint.
func checkEK(ekPublic []byte) (*tpmPublic, [32]byte, error) {
	ek, err := decode(CheckEK, ekPublic)
	if err != nil {
		return nil, [32]byte{}, err
	}
	if err := checkAttributes(CheckEK, ek, attributes{"restricted": true, "decrypt": true, "sign": false, "fixedTPM": true, "fixedParent": true},
		"an endorsement key is a restricted decryption key that never leaves its TPM"); err != nil {
		return nil, [32]byte{}, err
	}
	sum, err := fingerprint(ek.key)
	if err != nil {
		return nil, [32]byte{}, refuse(CheckEK, "%v", err)
	}
	return ek, sum, nil
}

// checkAK decodes and checks an AK's TPMT_PUBLIC.
func checkAK(akPublic []byte) (*tpmPublic, error) {
	ak, err := decode(CheckAK, akPublic)
	if err != nil {
		return nil, err
	}
	if err := checkAttributes(CheckAK, ak, attributes{"restricted": true, "sign": true, "decrypt": false, "fixedTPM": true, "fixedParent": true, "sensitiveDataOrigin": true},
		"an attestation key is a restricted signing key created in, and never leaving, its TPM"); err != nil {
		return nil, err
	}
	return ak, nil
}

// oidSubjectAltName is the extension EK certificates use, critical, for the TPM's
// manufacturer, model and version (TCG EK Credential Profile).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// trustEK returns why the EK is trusted, or a Failure of CheckEKTrust.
func trustEK(certDER []byte, ek *tpmPublic, fp string, trust Trust, now time.Time) (string, error) {
	if len(certDER) == 0 {
		if trust.AllowedEKs[fp] {
			return "allow-list", nil
		}
		return "", refuse(CheckEKTrust, "the TPM sent no EK certificate and its EK %s is not on the allow-list", fp)
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return "", refuse(CheckEKTrust, "the EK certificate does not parse: %v", err)
	}
	if pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ek.key) {
		return "", refuse(CheckEKTrust, "the EK certificate is for another key than the EK")
	}
	cert.UnhandledCriticalExtensions = slices.DeleteFunc(slices.Clone(cert.UnhandledCriticalExtensions),
		func(id asn1.ObjectIdentifier) bool { return id.Equal(oidSubjectAltName) })
	if trust.Roots == nil {
		if trust.AllowedEKs[fp] {
			return "allow-list", nil
		}
		return "", refuse(CheckEKTrust, "no manufacturer roots are configured and the EK %s is not on the allow-list", fp)
	}
	chains, err := cert.Verify(x509.VerifyOptions{Roots: trust.Roots, Intermediates: trust.Intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		if trust.AllowedEKs[fp] {
			return "allow-list", nil
		}
		return "", refuse(CheckEKTrust, "the EK certificate (issuer %q) does not chain to a configured manufacturer root and the EK is not on the allow-list: %v",
			clip(cert.Issuer.String()), err)
	}
	root := chains[0][len(chains[0])-1]
	return fmt.Sprintf("manufacturer root %q", clip(root.Subject.String())), nil
}

// MakeChallenge makes a credential that only the TPM of k's EK can decrypt, with k's AK
// loaded: TPM2_MakeCredential in software. It returns the secret the node must send back and
// the challenge to send it, without ID and expiry.
func MakeChallenge(random io.Reader, k *Keys) (secret []byte, ch Challenge, err error) {
	if random == nil {
		random = rand.Reader
	}
	secret = make([]byte, 32)
	if _, err := io.ReadFull(random, secret); err != nil {
		return nil, Challenge{}, fmt.Errorf("making a challenge: %w", err)
	}
	encap, err := tpm2.ImportEncapsulationKey(k.ek.pub)
	if err != nil {
		return nil, Challenge{}, refuse(CheckEK, "the EK cannot receive a credential: %v", err)
	}
	blob, enc, err := tpm2.CreateCredential(random, encap, k.ak.name, secret)
	if err != nil {
		return nil, Challenge{}, refuse(CheckEK, "the EK cannot receive a credential: %v", err)
	}
	return secret, Challenge{CredentialBlob: blob, EncryptedSecret: enc}, nil
}

// NewTicket returns a ticket for node and the keys k, issued at now and valid for ttl, with a
// fresh ID and nonce.
func NewTicket(random io.Reader, k *Keys, node string, now time.Time, ttl time.Duration) (Ticket, error) {
	if random == nil {
		random = rand.Reader
	}
	if err := CheckNodeName(node); err != nil {
		return Ticket{}, err
	}
	t := Ticket{Node: node, EK: k.ekSum, AKName: k.ak.name, Issued: now.Truncate(time.Second), Expires: now.Add(ttl).Truncate(time.Second)}
	if _, err := io.ReadFull(random, t.ID[:]); err != nil {
		return Ticket{}, fmt.Errorf("making a ticket: %w", err)
	}
	if _, err := io.ReadFull(random, t.Nonce[:]); err != nil {
		return Ticket{}, fmt.Errorf("making a ticket: %w", err)
	}
	if len(t.AKName) > maxTicketField {
		return Ticket{}, refuse(CheckAK, "the AK name is %d bytes", len(t.AKName))
	}
	return t, nil
}
