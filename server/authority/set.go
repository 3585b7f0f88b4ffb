package authority

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/ledger"
)

// Removed: a retired CA taken out of the trust bundle. It stays in the Set, so that a
// configuration that still lists it does not bring it back.
const Removed State = "removed"

// ByConfiguration is the By of a CA whose state the configuration set.
const ByConfiguration = "configuration"

// Errors of the rotation steps, for the front doors to classify.
var (
	// ErrRotationRefused: the step cannot be taken in the signer's current state.
	ErrRotationRefused = errors.New("rotation refused")
	// ErrInvalidCA: the CA given to stage cannot be used.
	ErrInvalidCA = errors.New("invalid CA")
)

// Fingerprint is the lower-case hex SHA-256 of cert's DER: how the server, the ledger and the
// watcher's reports name a CA.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// Entry is one CA of a Set.
type Entry struct {
	CASpec
	// Fingerprint is Fingerprint(Certificate).
	Fingerprint string
	// Since is when the CA entered its state; zero when the configuration set it before the
	// signer's first rotation.
	Since time.Time
	// By is who put it there: ByConfiguration or an admin client's identity.
	By string
}

// Set is a signer's CAs as the server keeps them across restarts: one active CA, at most one
// staged, retired CAs that are still published, and removed ones. Its methods return a new
// Set; a Set is never changed in place.
type Set struct {
	Entries []Entry
	// Clusters are the clusters that must publish the staged CA before activation, as known
	// when it was staged.
	Clusters []string
}

// NewSet is the Set of configured CAs, for a signer that was never rotated.
func NewSet(specs []CASpec) Set {
	var s Set
	for _, spec := range specs {
		s.Entries = append(s.Entries, Entry{CASpec: spec, Fingerprint: Fingerprint(spec.Certificate), By: ByConfiguration})
	}
	return s
}

// Specs are the CAs to open: every CA that is not removed.
func (s Set) Specs() []CASpec {
	var out []CASpec
	for _, e := range s.Entries {
		if e.State != Removed {
			out = append(out, e.CASpec)
		}
	}
	return out
}

// Find returns the entry with fingerprint fp.
func (s Set) Find(fp string) (Entry, bool) {
	i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Fingerprint == fp })
	if i < 0 {
		return Entry{}, false
	}
	return s.Entries[i], true
}

// InState returns the entries in state st, in order.
func (s Set) InState(st State) []Entry {
	var out []Entry
	for _, e := range s.Entries {
		if e.State == st {
			out = append(out, e)
		}
	}
	return out
}

// clone returns a copy whose slices can be changed.
func (s Set) clone() Set {
	return Set{Entries: slices.Clone(s.Entries), Clusters: slices.Clone(s.Clusters)}
}

// set puts the entry of fp in state st, since now, by by.
func (s *Set) set(fp string, st State, now time.Time, by string) {
	for i := range s.Entries {
		if s.Entries[i].Fingerprint == fp {
			s.Entries[i].State, s.Entries[i].Since, s.Entries[i].By = st, now, by
		}
	}
}

// Stage adds spec as the staged CA; clusters are those that must publish it before
// activation. Refused (ErrRotationRefused) while another CA is staged, and (ErrInvalidCA)
// when the certificate is already in the set or not a CA's.
func (s Set) Stage(spec CASpec, clusters []string, now time.Time, by string) (Set, error) {
	if staged := s.InState(Staged); len(staged) > 0 {
		return Set{}, fmt.Errorf("%w: CA %s (%s) is already staged since %s; activate it or retire it first",
			ErrRotationRefused, short(staged[0].Fingerprint), staged[0].Certificate.Subject, when(staged[0].Since))
	}
	if c := spec.Certificate; c == nil || !c.BasicConstraintsValid || !c.IsCA {
		return Set{}, fmt.Errorf("%w: the certificate is not a CA certificate (basic constraints CA:TRUE missing)", ErrInvalidCA)
	}
	fp := Fingerprint(spec.Certificate)
	if e, ok := s.Find(fp); ok {
		return Set{}, fmt.Errorf("%w: CA %s (%s) is already in the set, %s", ErrInvalidCA, short(fp), spec.Certificate.Subject, e.State)
	}
	for _, e := range s.Entries {
		if e.State != Removed && spec.KeyURI != "" && e.KeyURI == spec.KeyURI {
			return Set{}, fmt.Errorf("%w: key %s is already the key of CA %s (%s)", ErrInvalidCA, keystore.Redact(spec.KeyURI), short(e.Fingerprint), e.State)
		}
	}
	spec.State = Staged
	out := s.clone()
	out.Entries = append(out.Entries, Entry{CASpec: spec, Fingerprint: fp, Since: now, By: by})
	out.Clusters = slices.Clone(clusters)
	return out, nil
}

// Activate makes the staged CA active and the active CA retired. The gates are the caller's.
func (s Set) Activate(now time.Time, by string) (Set, error) {
	staged := s.InState(Staged)
	if len(staged) == 0 {
		return Set{}, fmt.Errorf("%w: no CA is staged; stage one first (signetctl ca stage)", ErrRotationRefused)
	}
	out := s.clone()
	for _, e := range s.InState(Active) {
		out.set(e.Fingerprint, Retired, now, by)
	}
	out.set(staged[0].Fingerprint, Active, now, by)
	out.Clusters = nil
	return out, nil
}

// Remove takes the retired or staged CA fp out of the bundle. The gates are the caller's.
func (s Set) Remove(fp string, now time.Time, by string) (Set, error) {
	e, ok := s.Find(fp)
	switch {
	case !ok:
		return Set{}, fmt.Errorf("%w: the signer has no CA with fingerprint %s", ErrRotationRefused, fp)
	case e.State == Active:
		return Set{}, fmt.Errorf("%w: CA %s (%s) is the active CA; stage and activate its successor first", ErrRotationRefused, short(fp), e.Certificate.Subject)
	case e.State == Removed:
		return Set{}, fmt.Errorf("%w: CA %s (%s) was already removed %s", ErrRotationRefused, short(fp), e.Certificate.Subject, when(e.Since))
	}
	out := s.clone()
	out.set(fp, Removed, now, by)
	if e.State == Staged {
		out.Clusters = nil
	}
	return out, nil
}

// Reconcile applies the configuration to a recorded set: a configured CA the set does not
// know joins in its configured state (a configured active CA is activated by configuration,
// the previous one retired); a CA the set knows keeps its recorded state, which is newer than
// the configuration (notes say where they differ); a configured key URI replaces the recorded
// one, since the configuration may hold what the record redacts. It reports whether the set
// changed (a change to record).
func (s Set) Reconcile(configured []CASpec, now time.Time) (out Set, changed bool, notes []string) {
	out = s.clone()
	for _, spec := range configured {
		fp := Fingerprint(spec.Certificate)
		i := slices.IndexFunc(out.Entries, func(e Entry) bool { return e.Fingerprint == fp })
		if i >= 0 {
			e := &out.Entries[i]
			if e.State != spec.State {
				notes = append(notes, fmt.Sprintf("%s: the configuration says %s, the recorded rotation state (%s %s by %s) wins",
					spec.name(0), spec.State, e.State, when(e.Since), e.By))
			}
			if spec.KeyURI != "" {
				e.KeyURI = spec.KeyURI
			}
			e.Source, e.Field = spec.Source, spec.Field
			if len(spec.Intermediates) > 0 {
				e.Intermediates = spec.Intermediates
			}
			continue
		}
		changed = true
		if spec.State == Active {
			for _, a := range out.InState(Active) {
				out.set(a.Fingerprint, Retired, now, ByConfiguration)
			}
			for _, st := range out.InState(Staged) {
				// The staged CA was never activated; the configuration chose another.
				out.set(st.Fingerprint, Removed, now, ByConfiguration)
			}
			out.Clusters = nil
		}
		out.Entries = append(out.Entries, Entry{CASpec: spec, Fingerprint: fp, Since: now, By: ByConfiguration})
	}
	return out, changed, notes
}

// Record is the set as a ledger Rotated record holds it.
func (s Set) Record() *ledger.Authority {
	a := &ledger.Authority{Clusters: slices.Clone(s.Clusters)}
	for _, e := range s.Entries {
		a.CAs = append(a.CAs, ledger.AuthorityCA{
			Fingerprint: e.Fingerprint, State: string(e.State), Since: e.Since, By: e.By,
			Key: keystore.Redact(e.KeyURI), Certificate: encodePEM(e.Certificate), Intermediates: encodePEM(e.Intermediates...),
		})
	}
	return a
}

// SetFromRecord rebuilds the set a Rotated record holds.
func SetFromRecord(a *ledger.Authority) (Set, error) {
	s := Set{Clusters: slices.Clone(a.Clusters)}
	for i, rc := range a.CAs {
		st := State(rc.State)
		if _, err := ParseState(rc.State); err != nil && st != Removed {
			return Set{}, fmt.Errorf("recorded CA %d: %w", i, err)
		}
		certs, err := parsePEM(rc.Certificate)
		if err != nil || len(certs) != 1 {
			return Set{}, fmt.Errorf("recorded CA %d: certificate: want one PEM certificate (%v)", i, err)
		}
		inter, err := parsePEM(rc.Intermediates)
		if err != nil {
			return Set{}, fmt.Errorf("recorded CA %d: intermediates: %w", i, err)
		}
		if fp := Fingerprint(certs[0]); fp != rc.Fingerprint {
			return Set{}, fmt.Errorf("recorded CA %d: fingerprint %s does not match its certificate (%s)", i, rc.Fingerprint, fp)
		}
		s.Entries = append(s.Entries, Entry{
			CASpec:      CASpec{State: st, KeyURI: rc.Key, Certificate: certs[0], Intermediates: inter, Source: "the ledger", Field: "recorded CA " + short(rc.Fingerprint)},
			Fingerprint: rc.Fingerprint, Since: rc.Since, By: rc.By,
		})
	}
	return s, nil
}

// encodePEM is certs in PEM.
func encodePEM(certs ...*x509.Certificate) string {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.String()
}

// parsePEM parses every CERTIFICATE block of s; anything else in s is an error.
func parsePEM(s string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("trailing data after the PEM certificates")
	}
	return out, nil
}

// ParseCertificates parses PEM certificates (a CA's certificate, its intermediates), refusing
// anything else.
func ParseCertificates(s string) ([]*x509.Certificate, error) { return parsePEM(s) }

// short is the first 16 hex digits of a fingerprint, for messages.
func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16]
	}
	return fp
}

// when describes a since time in messages.
func when(t time.Time) string {
	if t.IsZero() {
		return "from the configuration"
	}
	return "since " + t.UTC().Format(time.RFC3339)
}
