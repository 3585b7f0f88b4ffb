package lint

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"sync"
)

// keySpec names a key type and size: "ECDSA P-256", "RSA 2048", "Ed25519".
type keySpec string

// throwawayKeys holds one throwaway signing key per key spec. Each key is generated once, on
// first use, and never leaves the process: it signs lint certificates only, which are never
// issued.
type throwawayKeys struct {
	mu   sync.Mutex
	keys map[keySpec]func() (crypto.Signer, error)
}

// get returns the throwaway key with the same type and parameters as pub: the same ECDSA curve,
// the same RSA modulus size, or Ed25519. Key generation runs at most once per spec, outside
// the lock, so a slow RSA generation blocks only callers that need the same spec.
func (t *throwawayKeys) get(pub crypto.PublicKey) (crypto.Signer, error) {
	spec, gen, err := specOf(pub)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.keys == nil {
		t.keys = make(map[keySpec]func() (crypto.Signer, error))
	}
	once, ok := t.keys[spec]
	if !ok {
		once = sync.OnceValues(gen)
		t.keys[spec] = once
	}
	t.mu.Unlock()
	key, err := once()
	if err != nil {
		return nil, fmt.Errorf("generating %s throwaway key: %w", spec, err)
	}
	return key, nil
}

// specOf returns the spec of pub and a generator for a fresh key of that spec.
func specOf(pub crypto.PublicKey) (keySpec, func() (crypto.Signer, error), error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		var curve elliptic.Curve
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			curve = k.Curve
		default:
			return "", nil, fmt.Errorf("unsupported CA key: ECDSA curve %s", curveName(k.Curve))
		}
		return keySpec("ECDSA " + curve.Params().Name), func() (crypto.Signer, error) {
			return ecdsa.GenerateKey(curve, rand.Reader)
		}, nil
	case *rsa.PublicKey:
		if k.N == nil {
			return "", nil, fmt.Errorf("unsupported CA key: RSA key without a modulus")
		}
		bits := k.N.BitLen()
		return keySpec(fmt.Sprintf("RSA %d", bits)), func() (crypto.Signer, error) {
			return rsa.GenerateKey(rand.Reader, bits)
		}, nil
	case ed25519.PublicKey:
		return "Ed25519", func() (crypto.Signer, error) {
			_, key, err := ed25519.GenerateKey(rand.Reader)
			return key, err
		}, nil
	default:
		return "", nil, fmt.Errorf("unsupported CA key type %T", pub)
	}
}

func curveName(c elliptic.Curve) string {
	if c == nil || c.Params() == nil {
		return "unknown"
	}
	return c.Params().Name
}
