package keystore

import (
	"context"
	"crypto"
	"fmt"
	"regexp"
	"strings"

	"github.com/signet-pki/signet/keystore/pkcs11"
	"github.com/signet-pki/signet/keystore/tpm"
)

// backends open the keys of each device scheme.
var backends = map[string]func(ctx context.Context, uri string, opts Options) (Key, error){
	BackendPKCS11: func(ctx context.Context, uri string, opts Options) (Key, error) {
		return pkcs11.Open(ctx, uri, pkcs11.Options{AllowPINValue: opts.AllowPINValue})
	},
	BackendTPM: func(ctx context.Context, uri string, opts Options) (Key, error) {
		return tpm.Open(ctx, uri, tpm.Options{Transport: opts.TPM})
	},
}

// Entry is a key a token or TPM holds, as List reports it.
type Entry struct {
	// URI opens the key (pkcs11: with the query of the URI given to List).
	URI string
	// Label is the key's PKCS#11 label, or its TPM handle.
	Label string
	// Algorithm is P-256, P-384, RSA-<bits>, or "unsupported: <why>" (Public is then nil).
	Algorithm string
	Public    crypto.PublicKey
}

// Generate creates a key inside the HSM or TPM that uri names (algorithm one of keyerr's
// names, P-256 when empty) and returns it open, with the URI that names it. The private key
// never leaves the device. File URIs are refused: a key made on disk is not one this command
// should make.
func Generate(ctx context.Context, uri, algorithm string, opts Options) (Key, string, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	scheme, _, _ := strings.Cut(uri, ":")
	var (
		key  Key
		made string
	)
	switch scheme {
	case BackendPKCS11:
		k, u, err := pkcs11.Generate(ctx, uri, algorithm, pkcs11.Options{AllowPINValue: opts.AllowPINValue})
		if err != nil {
			return nil, "", err
		}
		key, made = k, u
	case BackendTPM:
		k, u, err := tpm.Generate(ctx, uri, algorithm, tpm.Options{Transport: opts.TPM})
		if err != nil {
			return nil, "", err
		}
		key, made = k, u
	default:
		return nil, "", fmt.Errorf("creating a key at %q: %w: keys are created only inside an HSM (pkcs11:) or a TPM (tpm:)", redact(uri), ErrUnsupportedURI)
	}
	reopen := func(ctx context.Context) (Key, error) { return backends[scheme](ctx, made, opts) }
	return newDevice(scheme, made, opts, key, reopen), made, nil
}

// List returns the keys the token or TPM that uri names holds.
func List(ctx context.Context, uri string, opts Options) ([]Entry, error) {
	scheme, _, _ := strings.Cut(uri, ":")
	var out []Entry
	switch scheme {
	case BackendPKCS11:
		entries, err := pkcs11.List(ctx, uri, pkcs11.Options{AllowPINValue: opts.AllowPINValue})
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			out = append(out, Entry{URI: e.URI, Label: e.Label, Algorithm: e.Algorithm, Public: e.Public})
		}
	case BackendTPM:
		entries, err := tpm.List(ctx, uri, tpm.Options{Transport: opts.TPM})
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			out = append(out, Entry{URI: e.URI, Label: fmt.Sprintf("%#x", e.Handle), Algorithm: e.Algorithm, Public: e.Public})
		}
	default:
		return nil, fmt.Errorf("listing keys at %q: %w: only an HSM (pkcs11:) or a TPM (tpm:) can be listed", redact(uri), ErrUnsupportedURI)
	}
	return out, nil
}

// pinValue matches a pin-value attribute and its value in a PKCS#11 URI.
var pinValue = regexp.MustCompile(`(?i)(pin-value=)[^&;]*`)

// redact returns uri with any pin-value replaced, fit for errors and logs.
func redact(uri string) string {
	return pinValue.ReplaceAllString(uri, "${1}REDACTED")
}

// Redact is redact for other packages: uri with any PIN it carries replaced.
func Redact(uri string) string { return redact(uri) }
