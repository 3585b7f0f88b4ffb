package tpm

import (
	"bytes"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
)

// keyFilePEMType is the PEM type of a TPM key blob in the format of the openssl tpm2 provider,
// tpm2-tss-engine and the Linux kernel's trusted keys (draft-bottomley-tpm2-keys).
const keyFilePEMType = "TSS2 PRIVATE KEY"

// oidLoadableKey is id-loadablekey: a key whose private part is wrapped by its parent and is
// loaded with TPM2_Load. The draft's importable and sealed keys are not signing keys here.
var oidLoadableKey = asn1.ObjectIdentifier{2, 23, 133, 10, 1, 3}

// keyFile is a TPM key blob: the public area and the private area sealed by the parent.
type keyFile struct {
	parent    tpm2.TPMHandle // TPM_RH_OWNER (the storage root key) or a persistent storage key
	emptyAuth bool
	public    tpm2.TPM2BPublic
	private   tpm2.TPM2BPrivate
}

// tssPrivateKey is the ASN.1 TPMKey structure of draft-bottomley-tpm2-keys:
//
//	TPMKey ::= SEQUENCE {
//	    type        OBJECT IDENTIFIER,
//	    emptyAuth   [0] EXPLICIT BOOLEAN OPTIONAL,
//	    policy      [1] EXPLICIT SEQUENCE OF TPMPolicy OPTIONAL,
//	    secret      [2] EXPLICIT OCTET STRING OPTIONAL,
//	    authPolicy  [3] EXPLICIT SEQUENCE OF TPMAuthPolicy OPTIONAL,
//	    description [4] EXPLICIT UTF8String OPTIONAL,
//	    rsaParent   [5] EXPLICIT BOOLEAN OPTIONAL,
//	    parent      INTEGER,
//	    pubkey      OCTET STRING,   -- a marshalled TPM2B_PUBLIC
//	    privkey     OCTET STRING }  -- a marshalled TPM2B_PRIVATE
//
// The optional fields are raw values: Go's encoding/asn1 keeps the explicit [n] wrapper of a
// RawValue, and the booleans need BER's leniency, as the openssl tpm2 provider writes TRUE as
// 0x01 where DER (and Go's parser) want 0xFF.
type tssPrivateKey struct {
	Type        asn1.ObjectIdentifier
	EmptyAuth   asn1.RawValue `asn1:"optional,explicit,tag:0"`
	Policy      asn1.RawValue `asn1:"optional,explicit,tag:1"`
	Secret      asn1.RawValue `asn1:"optional,explicit,tag:2"`
	AuthPolicy  asn1.RawValue `asn1:"optional,explicit,tag:3"`
	Description asn1.RawValue `asn1:"optional,explicit,tag:4"`
	RSAParent   asn1.RawValue `asn1:"optional,explicit,tag:5"`
	Parent      int64
	PubKey      []byte
	PrivKey     []byte
}

// emptyAuthTrue is the emptyAuth field set: [0] EXPLICIT BOOLEAN TRUE.
var emptyAuthTrue = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: []byte{asn1.TagBoolean, 1, 0xFF}}

// parseBool reads an optional [n] EXPLICIT BOOLEAN: absent is false, and as in BER any
// non-zero octet is true.
func parseBool(v asn1.RawValue, name string) (bool, error) {
	if len(v.FullBytes) == 0 {
		return false, nil
	}
	var inner asn1.RawValue
	rest, err := asn1.Unmarshal(v.Bytes, &inner)
	if err != nil || len(rest) != 0 || inner.Class != asn1.ClassUniversal || inner.Tag != asn1.TagBoolean || len(inner.Bytes) != 1 {
		return false, fmt.Errorf("%s is not a BOOLEAN", name)
	}
	return inner.Bytes[0] != 0, nil
}

// marshalKeyFile encodes kf as a "TSS2 PRIVATE KEY" PEM block.
func marshalKeyFile(kf keyFile) ([]byte, error) {
	k := tssPrivateKey{
		Type:    oidLoadableKey,
		Parent:  int64(kf.parent),
		PubKey:  tpm2.Marshal(kf.public),
		PrivKey: tpm2.Marshal(kf.private),
	}
	if kf.emptyAuth {
		k.EmptyAuth = emptyAuthTrue
	}
	der, err := asn1.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("encoding key blob: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyFilePEMType, Bytes: der}), nil
}

// parseKeyFile decodes a "TSS2 PRIVATE KEY" PEM block. It refuses what this backend cannot
// load: other key types, policies, secrets, and parents other than the owner hierarchy's
// ECC storage root key or a persistent key.
func parseKeyFile(data []byte) (keyFile, error) {
	var kf keyFile
	block, _ := pem.Decode(data)
	if block == nil {
		return kf, errors.New("no PEM block found")
	}
	if block.Type != keyFilePEMType {
		return kf, fmt.Errorf("PEM block type %q is not %q", block.Type, keyFilePEMType)
	}
	var k tssPrivateKey
	rest, err := asn1.Unmarshal(block.Bytes, &k)
	if err != nil {
		return kf, fmt.Errorf("parsing %s: %w", keyFilePEMType, err)
	}
	rsaParent, err := parseBool(k.RSAParent, "rsaParent")
	if err != nil {
		return kf, err
	}
	if kf.emptyAuth, err = parseBool(k.EmptyAuth, "emptyAuth"); err != nil {
		return kf, err
	}
	switch {
	case len(rest) != 0:
		return kf, fmt.Errorf("parsing %s: trailing data", keyFilePEMType)
	case !k.Type.Equal(oidLoadableKey):
		return kf, fmt.Errorf("key type %v is not a loadable key (%v)", k.Type, oidLoadableKey)
	case len(k.Policy.FullBytes) != 0 || len(k.AuthPolicy.FullBytes) != 0:
		return kf, errors.New("the key has an authorization policy, which this backend cannot satisfy")
	case len(k.Secret.FullBytes) != 0:
		return kf, errors.New("the key has an imported secret, which this backend does not support")
	case rsaParent:
		return kf, errors.New("the key's parent is the RSA storage root key; this backend uses the ECC P-256 one")
	}
	kf.parent = tpm2.TPMHandle(k.Parent)
	if k.Parent == 0 { // the openssl tpm2 provider reads an absent parent so
		kf.parent = tpm2.TPMRHOwner
	}
	if kf.parent != tpm2.TPMRHOwner && (k.Parent < firstPersistent || k.Parent > lastPersistentHandle) {
		return kf, fmt.Errorf("parent 0x%x is neither the owner hierarchy nor a persistent key", k.Parent)
	}
	if kf.public, err = unmarshal2B[tpm2.TPM2BPublic](k.PubKey); err != nil {
		return kf, fmt.Errorf("parsing the public part: %w", err)
	}
	pub, err := kf.public.Contents()
	if err != nil {
		return kf, fmt.Errorf("parsing the public part: %w", err)
	}
	if !bytes.Equal(tpm2.Marshal(*pub), kf.public.Bytes()) {
		return kf, errors.New("parsing the public part: trailing data")
	}
	if kf.private, err = unmarshal2B[tpm2.TPM2BPrivate](k.PrivKey); err != nil {
		return kf, fmt.Errorf("parsing the private part: %w", err)
	}
	return kf, nil
}

// unmarshal2B unmarshals a TPM2B structure that must fill data exactly.
func unmarshal2B[T tpm2.Marshallable, P interface {
	*T
	tpm2.Unmarshallable
}](data []byte) (T, error) {
	var zero T
	if len(data) < 2 || int(binary.BigEndian.Uint16(data)) != len(data)-2 {
		return zero, errors.New("size field does not match the data")
	}
	v, err := tpm2.Unmarshal[T, P](data)
	if err != nil {
		return zero, err
	}
	if !bytes.Equal(tpm2.Marshal(*v), data) {
		return zero, errors.New("does not re-encode to the same bytes")
	}
	return *v, nil
}
