package rotation

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/authority"
)

// liveWindow is how recently a cluster must have reported to be expected to publish a CA
// staged now (a watcher reports every few seconds).
const liveWindow = 5 * time.Minute

// Status describes signer's CA set, its clusters and the gates of the next steps.
func (m *Manager) Status(signer string) (authority.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.signers[signer]
	if !ok || len(s.set.Entries) == 0 {
		return authority.Status{}, fmt.Errorf("%w: signer %s has no CA set", authority.ErrRotationRefused, signer)
	}
	return s.status(signer, m.opts.Clock.Now()), nil
}

// status builds the Status; m.mu must be held.
func (s *signerState) status(signer string, now time.Time) authority.Status {
	source := signetv1.TrustSource(signer)
	gated := s.reportsOf(source)
	expected := authority.Expected(s.cfg.Clusters, s.set.Clusters, gated)
	st := authority.Status{Signer: signer, Delay: s.cfg.MinPropagationDelay,
		Activation: authority.ActivationGate(s.set, expected, gated, source, s.cfg.MinPropagationDelay, now)}
	for _, state := range []authority.State{authority.Active, authority.Staged, authority.Retired, authority.Removed} {
		for _, e := range s.set.InState(state) {
			cs := authority.CAStatus{Entry: e, LastLeaf: s.lastLeaf(e)}
			if state == authority.Retired || state == authority.Staged {
				cs.Retirement = authority.RetirementGate(e, cs.LastLeaf, now)
			}
			st.CAs = append(st.CAs, cs)
		}
	}
	names := slices.Concat(expected, slices.Collect(maps.Keys(s.reports)), slices.Collect(maps.Keys(s.trust)))
	slices.Sort(names)
	for _, c := range slices.Compact(names) {
		// Each cluster's report of the signer's own source first, then its trust bundle's.
		sources := []string{source}
		if source != signetv1.TrustSourceBundle {
			sources = append(sources, signetv1.TrustSourceBundle)
		}
		for _, src := range sources {
			r, ok := s.reportsOf(src)[c]
			if !ok {
				r = authority.Report{Cluster: c, Source: src}
			}
			st.Clusters = append(st.Clusters, authority.ClusterStatus{Report: r, Registered: slices.Contains(expected, c)})
		}
	}
	return st
}

// lastLeaf is the latest NotAfter of a leaf e may have signed: its own, and for a CA that
// issued, those recorded before records named their CA.
func (s *signerState) lastLeaf(e authority.Entry) time.Time {
	last := s.leaves[e.Fingerprint]
	if e.State != authority.Staged && s.legacy.After(last) {
		last = s.legacy
	}
	return last
}

// Stage adds spec as signer's staged CA: its key is opened and checked against its
// certificate, the set recorded, then served (issuance is unchanged; the bundle gains it).
func (m *Manager) Stage(ctx context.Context, client, signer string, spec authority.CASpec) error {
	defer m.Exclusive()()
	if err := m.syncLocked(ctx); err != nil {
		return err
	}
	if strings.Contains(strings.ToLower(spec.KeyURI), "pin-value=") {
		return fmt.Errorf("%w: the key URI carries a pin-value, which the ledger would record redacted and the server could not re-open at restart; use pin-source=file:...", authority.ErrInvalidCA)
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	s := m.state(signer)
	expected := slices.Clone(s.cfg.Clusters)
	for c, r := range s.reports {
		if now.Sub(r.LastSeen) <= liveWindow {
			expected = append(expected, c)
		}
	}
	slices.Sort(expected)
	next, err := s.set.Stage(spec, slices.Compact(expected), now, client)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	fp := authority.Fingerprint(spec.Certificate)
	msg := fmt.Sprintf("staged CA %s (%s, key %s)", fp, spec.Certificate.Subject, keystore.Redact(spec.KeyURI))
	return m.apply(ctx, client, signer, "stage", next, msg, "", false)
}

// Activate makes signer's staged CA the one that issues, once every expected cluster
// published it and the propagation delay passed, or when forced with a reason.
func (m *Manager) Activate(ctx context.Context, client, signer string, force bool, reason string) error {
	defer m.Exclusive()()
	if err := m.syncLocked(ctx); err != nil {
		return err
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	s := m.state(signer)
	gate := s.status(signer, now).Activation
	next, err := s.set.Activate(now, client)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	grounds, err := forced(gate, "activation", force, reason)
	if err != nil {
		return err
	}
	staged := next.InState(authority.Active)[0]
	msg := fmt.Sprintf("activated CA %s (%s)", staged.Fingerprint, staged.Certificate.Subject)
	return m.apply(ctx, client, signer, "activate", next, msg, grounds, grounds != "")
}

// Retire takes signer's retired or staged CA, named by fingerprint or serial number, out of
// the bundle once no leaf it signed can still be valid, or when forced with a reason.
func (m *Manager) Retire(ctx context.Context, client, signer, fingerprint, serial string, force bool, reason string) error {
	defer m.Exclusive()()
	if err := m.syncLocked(ctx); err != nil {
		return err
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	s := m.state(signer)
	e, err := find(s.set, fingerprint, serial)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	gate := authority.RetirementGate(e, s.lastLeaf(e), now)
	next, err := s.set.Remove(e.Fingerprint, now, client)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	grounds, err := forced(gate, "retirement", force, reason)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("removed CA %s (%s, %s) from the trust bundle", e.Fingerprint, e.Certificate.Subject, e.State)
	return m.apply(ctx, client, signer, "retire", next, msg, grounds, grounds != "")
}

// forced returns the grounds of a step the gate would refuse but force allows ("" when the
// gate is open), or the refusal.
func forced(gate authority.Gate, step string, force bool, reason string) (string, error) {
	switch {
	case gate.Ready:
		return "", nil
	case !force:
		return "", gate.Err(step)
	case strings.TrimSpace(reason) == "":
		return "", fmt.Errorf("%w: forcing the %s needs a reason", authority.ErrRotationRefused, step)
	}
	return fmt.Sprintf("forced: %s (bypassed: %s)", reason, strings.Join(gate.Blocking, "; ")), nil
}

// find returns the CA of set named by a fingerprint or a serial number (exactly one given).
func find(set authority.Set, fingerprint, serial string) (authority.Entry, error) {
	switch {
	case (fingerprint == "") == (serial == ""):
		return authority.Entry{}, fmt.Errorf("%w: name the CA by exactly one of fingerprint and serial number", authority.ErrRotationRefused)
	case fingerprint != "":
		if e, ok := set.Find(strings.ToLower(fingerprint)); ok {
			return e, nil
		}
		return authority.Entry{}, fmt.Errorf("%w: the signer has no CA with fingerprint %s", authority.ErrRotationRefused, fingerprint)
	}
	want, ok := new(big.Int).SetString(strings.TrimPrefix(strings.ToLower(serial), "0x"), 16)
	if !ok {
		return authority.Entry{}, fmt.Errorf("%w: serial number %q is not hexadecimal", authority.ErrRotationRefused, serial)
	}
	var found []authority.Entry
	for _, e := range set.Entries {
		if e.Certificate.SerialNumber.Cmp(want) == 0 {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return authority.Entry{}, fmt.Errorf("%w: the signer has no CA with serial number %s", authority.ErrRotationRefused, serial)
	case 1:
		return found[0], nil
	}
	return authority.Entry{}, fmt.Errorf("%w: %d CAs of the signer have serial number %s; name it by fingerprint", authority.ErrRotationRefused, len(found), serial)
}

// apply opens next's CAs, records next, then serves it. Nothing changes unless all three
// succeed up to the record.
func (m *Manager) apply(ctx context.Context, client, signer, step string, next authority.Set, msg, grounds string, wasForced bool) error {
	if m.opts.Installer == nil {
		return fmt.Errorf("%w: the server cannot install CAs", authority.ErrRotationRefused)
	}
	commit, abort, err := m.opts.Installer.Prepare(ctx, signer, next)
	if err != nil {
		return fmt.Errorf("%w: %w", authority.ErrInvalidCA, err)
	}
	if err := m.record(ctx, signer, client, next, msg, grounds); err != nil {
		abort()
		return err
	}
	commit()
	m.mu.Lock()
	s := m.state(signer)
	s.adopt(next)
	m.fleet.served(signer, next)
	counts := countStates(s.set)
	m.mu.Unlock()
	m.opts.Metrics.SetAnchors(signer, counts)
	m.opts.Metrics.ObserveRotation(signer, step, wasForced)
	log := m.opts.Log.With("signer", signer, "client", client, "step", step)
	if wasForced {
		log.Warn("CA rotation step FORCED past its gate", "detail", msg, "grounds", grounds)
	} else {
		log.Info("CA rotation step taken", "detail", msg)
	}
	return nil
}
