package ledgerproof

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Signature type identifier bytes of C2SP signed-note (https://c2sp.org/signed-note,
// "Signature types").
const (
	// SigTypeEd25519 (0x01): Ed25519 (RFC 8032) over the note text; key ID =
	// SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4], as x/mod's note package does.
	SigTypeEd25519 = 0x01
	// SigTypeECDSA (0x02): "ECDSA signatures as implemented by
	// github.com/transparency-dev/witness"; key ID = SHA-256(DER SubjectPublicKeyInfo)[:4];
	// the signature is ASN.1 DER ECDSA over SHA-256 of the note text.
	SigTypeECDSA = 0x02
)

// NewNoteSigner returns a note.Signer that signs with key under the note key name name. Signet
// names the key after the checkpoint origin, as C2SP tlog-checkpoint recommends.
//
// Two key types are supported, following C2SP signed-note
// (https://c2sp.org/signed-note, C2SP/C2SP signed-note.md, "Signature types"):
//
//   - Ed25519 (type 0x01): the signature is key.Sign(rand, text, crypto.Hash(0)), and the key
//     ID the first 4 bytes, big-endian, of SHA-256(name || 0x0A || 0x01 || public key): the
//     same signature lines x/mod's note.NewSigner writes, verifiable with note.NewVerifier
//     and a vkey from note.NewEd25519VerifierKey.
//   - ECDSA on NIST P-256 (type 0x02). The spec assigns 0x02 to "ECDSA signatures as
//     implemented by github.com/transparency-dev/witness", says the curve MUST be P-256, P-384
//     or P-521 and SHOULD be P-256, and that "the key ID for these signatures is the truncated
//     SHA-256 hash of the DER encoded public key in SPKI format" (no name, no type byte: a
//     different input from Ed25519's). The witness's internal/note/note_verifier.go verifies
//     ecdsa.VerifyASN1(key, SHA-256(text), sig), and its vkey is
//     name+keyID+base64(0x02 || SPKI DER); the Sigstore Rekor log signs its checkpoints this
//     way (its signature lines start "wNI9aj", the key ID c0d23d6a). Only P-256 is accepted
//     here: TPMs and HSMs all have it, and one curve is one path to test.
//
// The signer is a key from Signet's keystore (file, PKCS#11, TPM 2.0): ECDSA signatures must
// come back ASN.1 DER, as crypto.Signer documents. Every signature is verified with the public
// key before it is returned, so a device that answers garbage fails the signing instead of
// publishing an unverifiable checkpoint. Randomness for ECDSA is crypto/rand (devices use
// their own). Any other key type is refused with an error wrapping ErrUnsupportedKey; an
// invalid name (empty, holding a Unicode space or "+", invalid UTF-8) is refused too.
func NewNoteSigner(name string, key crypto.Signer) (note.Signer, error) {
	if key == nil {
		return nil, fmt.Errorf("making note signer %q: no key", name)
	}
	v, err := newVerifier(name, key.Public())
	if err != nil {
		return nil, fmt.Errorf("making note signer %q: %w", name, err)
	}
	return &keySigner{verifier: v, key: key}, nil
}

// NewNoteVerifier returns the note.Verifier for signatures by pub under the key name name:
// pub is an ed25519.PublicKey or a P-256 *ecdsa.PublicKey (see NewNoteSigner for the
// signature types and key IDs). Other keys are refused with an error wrapping
// ErrUnsupportedKey.
func NewNoteVerifier(name string, pub crypto.PublicKey) (note.Verifier, error) {
	v, err := newVerifier(name, pub)
	if err != nil {
		return nil, fmt.Errorf("making note verifier %q: %w", name, err)
	}
	return v, nil
}

// newVerifier is NewNoteVerifier with errors that do not name the operation.
func newVerifier(name string, pub crypto.PublicKey) (*verifier, error) {
	if !validKeyName(name) {
		return nil, fmt.Errorf("invalid key name (empty, or holding a space, a plus or invalid UTF-8)")
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrUnsupportedKey, len(k))
		}
		k = bytes.Clone(k)
		enc := append([]byte{SigTypeEd25519}, k...)
		return &verifier{
			name: name, hash: keyID([]byte(name), []byte{'\n'}, enc), sigType: SigTypeEd25519, encoded: enc,
			verify: func(msg, sig []byte) bool { return ed25519.Verify(k, msg, sig) },
		}, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA keys must be on P-256", ErrUnsupportedKey)
		}
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("encoding the ECDSA public key: %w", err)
		}
		return &verifier{
			name: name, hash: keyID(der), sigType: SigTypeECDSA, encoded: append([]byte{SigTypeECDSA}, der...),
			verify: func(msg, sig []byte) bool {
				d := sha256.Sum256(msg)
				return ecdsa.VerifyASN1(k, d[:], sig)
			},
		}, nil
	default:
		return nil, fmt.Errorf("%w: %T (want Ed25519 or ECDSA P-256)", ErrUnsupportedKey, pub)
	}
}

// VerifierKey returns the text form of the verifier for pub under name, the "vkey" that
// note-based tools (x/mod's note.NewVerifier for Ed25519, transparency-dev's witness for
// ECDSA) are configured with: name+<key ID in 8 hex digits>+<base64 of type byte || key>,
// where key is the 32-byte Ed25519 public key or the ECDSA key's SPKI DER.
func VerifierKey(name string, pub crypto.PublicKey) (string, error) {
	v, err := newVerifier(name, pub)
	if err != nil {
		return "", fmt.Errorf("encoding verifier key %q: %w", name, err)
	}
	return fmt.Sprintf("%s+%08x+%s", v.name, v.hash, base64.StdEncoding.EncodeToString(v.encoded)), nil
}

// ParseVerifierKey parses a vkey as VerifierKey writes it (type 0x01 or 0x02) and returns its
// verifier, checking that the key ID matches the key. Errors wrap ErrUnsupportedKey for
// another type byte or curve.
func ParseVerifierKey(vkey string) (note.Verifier, error) {
	name, rest, _ := strings.Cut(vkey, "+")
	id16, key64, ok := strings.Cut(rest, "+")
	id, errID := strconv.ParseUint(id16, 16, 32)
	raw, errKey := base64.StdEncoding.Strict().DecodeString(key64)
	if !ok || len(id16) != 8 || errID != nil || errKey != nil || len(raw) < 2 {
		return nil, fmt.Errorf("parsing verifier key %q: want name+<8 hex digits>+<base64 key>", vkey)
	}
	var pub crypto.PublicKey
	switch raw[0] {
	case SigTypeEd25519:
		pub = ed25519.PublicKey(raw[1:])
	case SigTypeECDSA:
		k, err := x509.ParsePKIXPublicKey(raw[1:])
		if err != nil {
			return nil, fmt.Errorf("parsing verifier key %q: %w", vkey, err)
		}
		pub = k
	default:
		return nil, fmt.Errorf("parsing verifier key %q: %w: signature type 0x%02x", vkey, ErrUnsupportedKey, raw[0])
	}
	v, err := newVerifier(name, pub)
	if err != nil {
		return nil, fmt.Errorf("parsing verifier key %q: %w", vkey, err)
	}
	if !bytes.Equal(v.encoded, raw) {
		return nil, fmt.Errorf("parsing verifier key %q: the key is not in canonical form", vkey)
	}
	if v.KeyHash() != uint32(id) {
		return nil, fmt.Errorf("parsing verifier key %q: key ID %s does not match the key (%08x)", vkey, id16, v.KeyHash())
	}
	return v, nil
}

// ParsePublicKeyPEM parses the PEM file operators distribute to auditors and witnesses: one
// "PUBLIC KEY" block holding a PKIX SubjectPublicKeyInfo, optionally surrounded by text
// (comments) but not followed by another PEM block. The key must be Ed25519 or ECDSA P-256
// (ErrUnsupportedKey otherwise).
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("parsing public key PEM: no PEM block found")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("parsing public key PEM: block type %q, want \"PUBLIC KEY\"", block.Type)
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("parsing public key PEM: more than one PEM block (a second %q)", next.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing public key PEM: %w", err)
	}
	if _, err := newVerifier("check", pub); err != nil {
		return nil, fmt.Errorf("parsing public key PEM: %w", err)
	}
	return pub, nil
}

// MarshalPublicKeyPEM encodes pub (Ed25519 or ECDSA P-256) as the "PUBLIC KEY" PEM block
// ParsePublicKeyPEM reads.
func MarshalPublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	if _, err := newVerifier("check", pub); err != nil {
		return nil, fmt.Errorf("encoding public key PEM: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key PEM: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// verifier is the note.Verifier of one key.
type verifier struct {
	name    string
	hash    uint32
	sigType byte
	encoded []byte // type byte || public key encoding, as in a vkey
	verify  func(msg, sig []byte) bool
}

func (v *verifier) Name() string                { return v.name }
func (v *verifier) KeyHash() uint32             { return v.hash }
func (v *verifier) Verify(msg, sig []byte) bool { return v.verify(msg, sig) }

// keySigner is the note.Signer of one crypto.Signer.
type keySigner struct {
	*verifier
	key crypto.Signer
}

// Sign signs msg (the note text) and checks the signature with the public key.
func (s *keySigner) Sign(msg []byte) ([]byte, error) {
	var sig []byte
	var err error
	switch s.sigType {
	case SigTypeEd25519:
		sig, err = s.key.Sign(rand.Reader, msg, crypto.Hash(0))
	default:
		d := sha256.Sum256(msg)
		sig, err = s.key.Sign(rand.Reader, d[:], crypto.SHA256)
	}
	if err != nil {
		return nil, fmt.Errorf("signing note as %s+%08x: %w", s.name, s.hash, err)
	}
	if !s.verify(msg, sig) {
		return nil, fmt.Errorf("signing note as %s+%08x: the key returned a signature that does not verify with its public key", s.name, s.hash)
	}
	return sig, nil
}

// keyID returns the first 4 bytes, big-endian, of SHA-256 over the parts.
func keyID(parts ...[]byte) uint32 {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// validKeyName is C2SP signed-note's rule for key names (and x/mod's isValidName): non-empty
// UTF-8 without Unicode spaces or "+".
func validKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && !strings.ContainsFunc(name, unicode.IsSpace) && !strings.Contains(name, "+")
}
