//go:build cgo

package pkcs11

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// Named curves: the DER of their OIDs is the CKA_EC_PARAMS of their keys.
var (
	oidP256 = asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7}
	oidP384 = asn1.ObjectIdentifier{1, 3, 132, 0, 34}
)

// curves maps the supported curves' CKA_EC_PARAMS to the curve and its algorithm name.
var curves = []struct {
	params    []byte
	curve     elliptic.Curve
	algorithm string
}{
	{mustMarshal(oidP256), elliptic.P256(), keyerr.P256},
	{mustMarshal(oidP384), elliptic.P384(), keyerr.P384},
}

func mustMarshal(v any) []byte {
	der, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return der
}

// keyObject is what a private key object tells about itself.
type keyObject struct {
	handle  cryptoki.ObjectHandle
	label   string
	id      []byte
	keyType uint
	canSign bool
	// alwaysAuth is CKA_ALWAYS_AUTHENTICATE: each signature needs a context-specific login.
	alwaysAuth bool
	// identity is an attribute of the private key object that tells it from other keys of its
	// type (an RSA key's CKA_MODULUS, an EC key's CKA_EC_PARAMS), when the object shows it.
	identity     []byte
	identityAttr uint
	public       crypto.PublicKey
	algorithm    string
}

// readKey reads the private key object h: its label, id, type, and its public key (from its
// own attributes for RSA, from the public key object with the same id, or else the same label,
// for ECDSA). A key type or curve this backend cannot sign with is an error.
func readKey(m *module, sh cryptoki.SessionHandle, h cryptoki.ObjectHandle) (*keyObject, error) {
	attrs, err := m.ctx.GetAttributeValue(sh, h, []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, nil),
		cryptoki.NewAttribute(cryptoki.CKA_LABEL, nil),
		cryptoki.NewAttribute(cryptoki.CKA_ID, nil),
		cryptoki.NewAttribute(cryptoki.CKA_SIGN, nil),
	})
	if err != nil {
		return nil, classify("reading the private key's attributes", err)
	}
	k := &keyObject{
		handle:  h,
		keyType: bytesToUint(attrs[0].Value),
		label:   string(attrs[1].Value),
		id:      attrs[2].Value,
		canSign: len(attrs[3].Value) == 1 && attrs[3].Value[0] != 0,
	}
	// A module that does not know the attribute fails the whole call: read it alone.
	if attrs, err := m.ctx.GetAttributeValue(sh, h, []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_ALWAYS_AUTHENTICATE, nil),
	}); err == nil {
		k.alwaysAuth = len(attrs[0].Value) == 1 && attrs[0].Value[0] != 0
	}
	switch k.keyType {
	case cryptoki.CKK_RSA:
		k.public, k.algorithm, err = rsaPublic(m, sh, h, k)
	case cryptoki.CKK_EC:
		k.public, k.algorithm, err = ecPublic(m, sh, h, k)
	default:
		err = fmt.Errorf("key type %#x is not supported (want RSA or EC)", k.keyType)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// rsaPublic reads the modulus and public exponent, from the private key object or else from its
// public key object.
func rsaPublic(m *module, sh cryptoki.SessionHandle, h cryptoki.ObjectHandle, k *keyObject) (crypto.PublicKey, string, error) {
	template := []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_MODULUS, nil),
		cryptoki.NewAttribute(cryptoki.CKA_PUBLIC_EXPONENT, nil),
	}
	attrs, err := m.ctx.GetAttributeValue(sh, h, template)
	if err == nil && len(attrs[0].Value) > 0 {
		k.identity, k.identityAttr = attrs[0].Value, cryptoki.CKA_MODULUS
	} else {
		pub, perr := publicObject(m, sh, k)
		if perr != nil {
			return nil, "", perr
		}
		if attrs, err = m.ctx.GetAttributeValue(sh, pub, template); err != nil {
			return nil, "", classify("reading the RSA public key", err)
		}
	}
	n := new(big.Int).SetBytes(attrs[0].Value)
	e := new(big.Int).SetBytes(attrs[1].Value)
	if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || n.Sign() == 0 {
		return nil, "", errors.New("the RSA public key has an unusable exponent or modulus")
	}
	bits := n.BitLen()
	if bits < 2048 || bits > 4096 {
		return nil, "", fmt.Errorf("RSA keys of %d bits are not supported (want 2048 to 4096)", bits)
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, fmt.Sprintf("RSA-%d", bits), nil
}

// ecPublic reads the curve from the private key object and the point from its public key
// object.
func ecPublic(m *module, sh cryptoki.SessionHandle, h cryptoki.ObjectHandle, k *keyObject) (crypto.PublicKey, string, error) {
	attrs, err := m.ctx.GetAttributeValue(sh, h, []*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, nil)})
	if err != nil {
		return nil, "", classify("reading the EC key's curve", err)
	}
	params := attrs[0].Value
	k.identity, k.identityAttr = params, cryptoki.CKA_EC_PARAMS
	i := -1
	for j, c := range curves {
		if bytes.Equal(c.params, params) {
			i = j
		}
	}
	if i < 0 {
		var oid asn1.ObjectIdentifier
		if _, err := asn1.Unmarshal(params, &oid); err == nil {
			return nil, "", fmt.Errorf("EC curve %s is not supported (want P-256 or P-384)", oid)
		}
		return nil, "", errors.New("EC key parameters that are not a named curve are not supported (want P-256 or P-384)")
	}
	pub, err := publicObject(m, sh, k)
	if err != nil {
		return nil, "", err
	}
	attrs, err = m.ctx.GetAttributeValue(sh, pub, []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, nil),
		cryptoki.NewAttribute(cryptoki.CKA_EC_POINT, nil),
	})
	if err != nil {
		return nil, "", classify("reading the EC public key", err)
	}
	if !bytes.Equal(attrs[0].Value, params) {
		return nil, "", errors.New("the public key object is on another curve than the private key")
	}
	key, err := parseECPoint(curves[i].curve, attrs[1].Value)
	if err != nil {
		return nil, "", err
	}
	return key, curves[i].algorithm, nil
}

// parseECPoint parses a CKA_EC_POINT: a DER OCTET STRING wrapping the uncompressed point, as
// PKCS#11 2.40 says, or the bare point, as some modules give it.
func parseECPoint(curve elliptic.Curve, v []byte) (*ecdsa.PublicKey, error) {
	size := 1 + 2*((curve.Params().BitSize+7)/8)
	point := v
	var inner []byte
	if rest, err := asn1.Unmarshal(v, &inner); err == nil && len(rest) == 0 && len(inner) == size {
		point = inner
	}
	if len(point) != size || point[0] != 4 {
		return nil, errors.New("CKA_EC_POINT is not an uncompressed point on the key's curve")
	}
	key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("CKA_EC_POINT: %w", err)
	}
	return key, nil
}

// publicObject finds the public key object of the private key k: by its CKA_ID when it has
// one, else by its label.
func publicObject(m *module, sh cryptoki.SessionHandle, k *keyObject) (cryptoki.ObjectHandle, error) {
	template := []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PUBLIC_KEY),
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, k.keyType),
	}
	if len(k.id) > 0 {
		template = append(template, cryptoki.NewAttribute(cryptoki.CKA_ID, k.id))
	} else {
		template = append(template, cryptoki.NewAttribute(cryptoki.CKA_LABEL, k.label))
	}
	found, err := findObjects(m, sh, template, 2)
	switch {
	case err != nil:
		return 0, err
	case len(found) == 0:
		return 0, errors.New("no public key object with the private key's id (or label) to read the public key from")
	case len(found) > 1:
		return 0, errors.New("several public key objects have the private key's id (or label)")
	}
	return found[0], nil
}

// bytesToUint decodes a CK_ULONG attribute (native byte order, as the module wrote it).
func bytesToUint(b []byte) uint {
	switch len(b) {
	case 8:
		return uint(binary.NativeEndian.Uint64(b))
	case 4:
		return uint(binary.NativeEndian.Uint32(b))
	default:
		return ^uint(0)
	}
}
