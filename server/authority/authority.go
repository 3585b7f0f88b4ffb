// Package authority owns the CAs of one signer: the active CA, which issues; a staged CA, the
// next one, published before it issues; and retired CAs, still published while leaves they
// signed may be in use. It opens their keys, checks each against its certificate, hands the
// active CA to the issuance pipeline and builds the signer's trust bundle. Today the set is
// what the configuration lists; the staged transitions of CA rotation build on it.
package authority

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/issuance"
)

// State is where a CA is in its life.
type State string

// The states of a CA.
const (
	// Active: the CA issues. A signer has exactly one.
	Active State = "active"
	// Staged: the next CA, published in the trust bundle but not issuing yet.
	Staged State = "staged"
	// Retired: no longer issuing, published while its leaves may still be in use.
	Retired State = "retired"
)

// ParseState returns the State named s; "" is Active.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case "":
		return Active, nil
	case Active, Staged, Retired:
		return st, nil
	default:
		return "", fmt.Errorf("state %q is not one of %q, %q, %q", s, Active, Staged, Retired)
	}
}

// CASpec is one CA of a signer as configured.
type CASpec struct {
	State State
	// KeyURI names the key (keystore.Open); a retired CA may have none.
	KeyURI string
	// Certificate is the CA's certificate; Intermediates are appended to every chain it
	// issues.
	Certificate   *x509.Certificate
	Intermediates []*x509.Certificate
	// Source names where the certificate came from (its file), for errors.
	Source string
	// Field is where the CA is configured, relative to its signer (cas[1], or key and
	// certificate for a signer configured without cas), for errors.
	Field string
}

// name describes the CA in errors.
func (s CASpec) name(i int) string {
	field := s.Field
	if field == "" {
		field = fmt.Sprintf("CA %d", i)
	}
	return fmt.Sprintf("%s (%s, key %s, certificate %s)", field, s.State, keystore.Redact(s.KeyURI), s.Source)
}

// CA is an opened CA.
type CA struct {
	CASpec
	// Key is the opened key, nil for a retired CA.
	Key keystore.Key
}

// Authority is the opened CAs of one signer.
type Authority struct {
	cas    []*CA
	active *CA
}

// Open opens the keys of specs and checks the set: exactly one active CA; the active and the
// staged CA can sign certificates with their keys (each key matches its certificate, which is
// a CA). A retired CA's key is not opened. On error
// the keys opened so far are closed. keys is how every key is opened.
func Open(ctx context.Context, specs []CASpec, keys keystore.Options) (*Authority, error) {
	a := &Authority{}
	if err := a.open(ctx, specs, keys); err != nil {
		_ = a.Close()
		return nil, err
	}
	return a, nil
}

// open adds the CAs of specs to a, opening and checking their keys; on error the caller
// closes what was opened.
func (a *Authority) open(ctx context.Context, specs []CASpec, keys keystore.Options) error {
	if err := checkAnchors(specs); err != nil {
		return err
	}
	for i, spec := range specs {
		ca := &CA{CASpec: spec}
		a.cas = append(a.cas, ca)
		if spec.State == Active {
			if a.active != nil {
				return errors.New("more than one active CA")
			}
			a.active = ca
		}
		if spec.State == Retired {
			// A retired CA signs nothing: its key is not opened, so a key removed from its
			// HSM or TPM after retirement does not stop the server.
			continue
		}
		if spec.KeyURI == "" {
			return fmt.Errorf("%s: a key is required", spec.name(i))
		}
		key, err := keystore.Open(ctx, spec.KeyURI, keys)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.name(i), err)
		}
		ca.Key = key
		if err := ca.Issuing().Validate(); err != nil {
			return fmt.Errorf("%s: %w", spec.name(i), err)
		}
	}
	if a.active == nil {
		return errors.New("no active CA")
	}
	return nil
}

// checkAnchors refuses a set in which a certificate is not a CA's, or two CAs hold the same
// certificate or the same key: each would publish or sign as something it is not.
func checkAnchors(specs []CASpec) error {
	for i, spec := range specs {
		if c := spec.Certificate; c == nil || !c.BasicConstraintsValid || !c.IsCA {
			return fmt.Errorf("%s: the certificate is not a CA certificate (basic constraints CA:TRUE missing)", spec.name(i))
		}
		for j := range i {
			other := specs[j]
			if bytes.Equal(other.Certificate.Raw, spec.Certificate.Raw) {
				return fmt.Errorf("%s and %s: the same certificate is configured twice", other.name(j), spec.name(i))
			}
			if spec.KeyURI != "" && spec.KeyURI == other.KeyURI {
				return fmt.Errorf("%s and %s: the same key is configured twice", other.name(j), spec.name(i))
			}
		}
	}
	return nil
}

// Issuing is the CA as the issuance pipeline uses it.
func (ca *CA) Issuing() *issuance.CA {
	return &issuance.CA{Certificate: ca.Certificate, Intermediates: ca.Intermediates, Key: ca.Key}
}

// Active returns the CA that issues.
func (a *Authority) Active() *CA { return a.active }

// CAs returns every CA, in the configured order.
func (a *Authority) CAs() []*CA { return a.cas }

// Bundle returns the trust bundle relying parties install: the certificate of every CA,
// active first, then staged, then retired, each once, PEM-encoded.
func (a *Authority) Bundle() []byte {
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, st := range []State{Active, Staged, Retired} {
		for _, ca := range a.cas {
			if ca.State != st || seen[string(ca.Certificate.Raw)] {
				continue
			}
			seen[string(ca.Certificate.Raw)] = true
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate.Raw})
		}
	}
	return b.Bytes()
}

// Close closes every key; the Authority is unusable afterwards.
func (a *Authority) Close() error {
	var errs []error
	for _, ca := range a.cas {
		if ca.Key != nil {
			errs = append(errs, ca.Key.Close())
		}
	}
	return errors.Join(errs...)
}
