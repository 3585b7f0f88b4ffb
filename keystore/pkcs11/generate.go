//go:build cgo

package pkcs11

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// Generate creates a key pair of algorithm (keyerr.P256 when "", P384, RSA2048, RSA3072 or
// RSA4096) in the token uri names, and returns it opened, with its canonical URI. The label is
// the URI's object= (required), the CKA_ID its id= or else 16 random bytes. The private key is
// a token object that may sign and never leaves the token (CKA_SENSITIVE true, CKA_EXTRACTABLE
// false). Generate refuses when an object with that label or id already exists.
func Generate(ctx context.Context, uri string, algorithm string, opts Options) (*Key, string, error) {
	k, canonical, err := generate(ctx, uri, algorithm, opts)
	if err != nil {
		return nil, "", fmt.Errorf("generating PKCS#11 key: %w", err)
	}
	return k, canonical, nil
}

func generate(ctx context.Context, uri string, algorithm string, opts Options) (*Key, string, error) {
	u, pin, err := parse(ctx, uri, opts)
	if err != nil {
		return nil, "", err
	}
	if !u.hasObject || u.object == "" {
		return nil, "", errors.New("the URI names no label for the new key: add object=<label>")
	}
	if algorithm == "" {
		algorithm = keyerr.P256
	}
	mech, pubAttrs, err := keyGenTemplate(algorithm)
	if err != nil {
		return nil, "", err
	}
	if !u.hasID {
		u.id = make([]byte, 16)
		if _, err := rand.Read(u.id); err != nil {
			return nil, "", err
		}
		u.hasID = true
	}
	mod, tok, sh, err := start(u, pin, true)
	if err != nil {
		return nil, "", err
	}
	k, err := func() (*Key, error) {
		if err := refuseExisting(mod, sh, u, tok.info.Label); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		common := []*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_TOKEN, true),
			cryptoki.NewAttribute(cryptoki.CKA_LABEL, u.object),
			cryptoki.NewAttribute(cryptoki.CKA_ID, u.id),
		}
		pub := append(slices.Clone(common),
			cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PUBLIC_KEY),
			cryptoki.NewAttribute(cryptoki.CKA_VERIFY, true),
			cryptoki.NewAttribute(cryptoki.CKA_ENCRYPT, false),
			cryptoki.NewAttribute(cryptoki.CKA_WRAP, false),
		)
		priv := append(slices.Clone(common),
			cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PRIVATE_KEY),
			cryptoki.NewAttribute(cryptoki.CKA_PRIVATE, true),
			cryptoki.NewAttribute(cryptoki.CKA_SENSITIVE, true),
			cryptoki.NewAttribute(cryptoki.CKA_EXTRACTABLE, false),
			cryptoki.NewAttribute(cryptoki.CKA_SIGN, true),
			cryptoki.NewAttribute(cryptoki.CKA_DECRYPT, false),
			cryptoki.NewAttribute(cryptoki.CKA_UNWRAP, false),
			cryptoki.NewAttribute(cryptoki.CKA_DERIVE, false),
		)
		_, h, err := mod.ctx.GenerateKeyPair(sh, []*cryptoki.Mechanism{mech}, append(pub, pubAttrs...), priv)
		if err != nil {
			return nil, classify(fmt.Sprintf("generating a %s key pair on token %q", algorithm, tok.info.Label), err)
		}
		return newKey(mod, tok, u, pin, sh, h)
	}()
	if err != nil {
		_ = mod.ctx.CloseSession(sh)
		_ = mod.release()
		return nil, "", err
	}
	if err := k.selfTest(); err != nil {
		_ = k.Close()
		return nil, "", err
	}
	return k, u.canonical(tok.info.Label, u.object, u.id), nil
}

// keyGenTemplate returns the key pair generation mechanism of algorithm, and the public key
// attributes that choose the curve or modulus size.
func keyGenTemplate(algorithm string) (*cryptoki.Mechanism, []*cryptoki.Attribute, error) {
	ec := func(params []byte) (*cryptoki.Mechanism, []*cryptoki.Attribute, error) {
		return cryptoki.NewMechanism(cryptoki.CKM_EC_KEY_PAIR_GEN, nil), []*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_EC),
			cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, params),
		}, nil
	}
	rsa := func(bits int) (*cryptoki.Mechanism, []*cryptoki.Attribute, error) {
		return cryptoki.NewMechanism(cryptoki.CKM_RSA_PKCS_KEY_PAIR_GEN, nil), []*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_RSA),
			cryptoki.NewAttribute(cryptoki.CKA_MODULUS_BITS, bits),
			cryptoki.NewAttribute(cryptoki.CKA_PUBLIC_EXPONENT, []byte{1, 0, 1}),
		}, nil
	}
	switch algorithm {
	case keyerr.P256:
		return ec(curves[0].params)
	case keyerr.P384:
		return ec(curves[1].params)
	case keyerr.RSA2048:
		return rsa(2048)
	case keyerr.RSA3072:
		return rsa(3072)
	case keyerr.RSA4096:
		return rsa(4096)
	default:
		return nil, nil, fmt.Errorf("algorithm %q is not supported (want %s, %s, %s, %s or %s)",
			algorithm, keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096)
	}
}

// refuseExisting fails when an object of any class has u's label or id already: a second key
// with the same label or id would make URIs ambiguous.
func refuseExisting(mod *module, sh cryptoki.SessionHandle, u *keyURI, tokenLabel string) error {
	for _, attr := range []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_LABEL, u.object),
		cryptoki.NewAttribute(cryptoki.CKA_ID, u.id),
	} {
		found, err := findObjects(mod, sh, []*cryptoki.Attribute{attr}, 1)
		if err != nil {
			return err
		}
		if len(found) > 0 {
			name, value := "object", fmt.Sprintf("%q", u.object)
			if attr.Type == cryptoki.CKA_ID {
				name, value = "id", escapeID(u.id)
			}
			return fmt.Errorf("%s=%s: token %q already has an object with this %s; choose another or delete it first", name, value, tokenLabel, name)
		}
	}
	return nil
}

// List returns the private keys on the token uri names, sorted by label, then id. The URI's
// object= and id=, when given, narrow the list; module-path and a PIN are required (private
// keys are visible only after login).
func List(ctx context.Context, uri string, opts Options) ([]Entry, error) {
	entries, err := list(ctx, uri, opts)
	if err != nil {
		return nil, fmt.Errorf("listing PKCS#11 keys: %w", err)
	}
	return entries, nil
}

func list(ctx context.Context, uri string, opts Options) ([]Entry, error) {
	u, pin, err := parse(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	mod, tok, sh, err := start(u, pin, false)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = mod.ctx.CloseSession(sh)
		_ = mod.release()
	}()
	found, err := findObjects(mod, sh, objectTemplate(cryptoki.CKO_PRIVATE_KEY, u), 1<<16)
	if err != nil {
		return nil, fmt.Errorf("token %q: %w", tok.info.Label, err)
	}
	entries := make([]Entry, 0, len(found))
	for _, h := range found {
		obj, err := readKey(mod, sh, h)
		if deviceFailure(err) {
			return nil, fmt.Errorf("token %q: %w", tok.info.Label, err)
		}
		if err != nil {
			obj = &keyObject{algorithm: "unsupported: " + err.Error()}
			if attrs, aerr := mod.ctx.GetAttributeValue(sh, h, []*cryptoki.Attribute{
				cryptoki.NewAttribute(cryptoki.CKA_LABEL, nil), cryptoki.NewAttribute(cryptoki.CKA_ID, nil),
			}); aerr == nil {
				obj.label, obj.id = string(attrs[0].Value), attrs[1].Value
			}
		}
		entries = append(entries, Entry{
			URI:       u.canonical(tok.info.Label, obj.label, obj.id),
			Label:     obj.label,
			ID:        obj.id,
			Algorithm: obj.algorithm,
			Public:    obj.public,
		})
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Label, b.Label), bytes.Compare(a.ID, b.ID))
	})
	return entries, nil
}

// keyLabels lists the labels of the private keys on the session's token, for the error of a
// key not found: " (private keys present: "a", "b")", or " (the token holds no private key)".
func keyLabels(mod *module, sh cryptoki.SessionHandle) string {
	found, err := findObjects(mod, sh, []*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PRIVATE_KEY)}, 64)
	if err != nil {
		return ""
	}
	if len(found) == 0 {
		return " (the token holds no private key)"
	}
	var labels []string
	for _, h := range found {
		attrs, err := mod.ctx.GetAttributeValue(sh, h, []*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_LABEL, nil)})
		if err == nil {
			labels = append(labels, fmt.Sprintf("%q", attrs[0].Value))
		}
	}
	slices.Sort(labels)
	return " (private keys present: " + strings.Join(labels, ", ") + ")"
}
