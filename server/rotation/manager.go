// Package rotation keeps each signer's CA set across restarts and takes it through the
// stages of a CA rotation: stage the next CA (published, not issuing), activate it once every
// cluster has reported a bundle holding it and the propagation delay has passed, and remove
// the previous one from the bundle once no leaf it signed can still be valid.
//
// The ledger is the state: every change of a set is a Rotated record holding the whole set
// after it, and while a CA is staged every newly published bundle a cluster reports is a
// Published record. At start the Manager rebuilds the sets, the reports and each CA's last
// leaf from the records the ledger replays; a signer that was never rotated has no record,
// and its set is its configuration, as before rotation existed.
package rotation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/ledger"
)

// DefaultMinPropagationDelay is how long after the last cluster published a staged CA it may
// be activated, unless the signer's configuration says otherwise: consumers read bundles
// late (the kubelet's projected-volume refresh of a changed bundle was measured at over 5
// minutes).
const DefaultMinPropagationDelay = time.Hour

// Config is one signer's rotation configuration.
type Config struct {
	// Clusters must each publish a staged CA before it is activated; reports from other
	// clusters are refused. Empty: every cluster that reports counts.
	Clusters []string
	// MinPropagationDelay is how long after the last cluster published the staged CA
	// activation waits.
	MinPropagationDelay time.Duration
}

// Installer opens a signer's CAs and swaps them in (the server). Prepare opens and checks
// the CAs of set without changing anything; commit serves them, abort closes them.
type Installer interface {
	Prepare(ctx context.Context, signer string, set authority.Set) (commit, abort func(), err error)
}

// Metrics receives what the Manager does (*metrics.Metrics); nil means none.
type Metrics interface {
	SetAnchors(signer string, byState map[string]int)
	ObserveReport(signer, cluster, hash string, at time.Time)
	ObserveRotation(signer, step string, forced bool)
}

// Recorder records the Manager's records: the file ledger, or a fleet's journal.
type Recorder interface {
	Append(ctx context.Context, r ledger.Record) (ledger.Record, error)
}

// Options are the Manager's collaborators.
type Options struct {
	Ledger Recorder
	// Shared, set on a fleet, is the journal every server appends to: the Manager follows the
	// rotation records the others append (Sync) instead of a replay at start.
	Shared    Shared
	Installer Installer
	Clock     clock.PassiveClock
	Log       *slog.Logger
	Metrics   Metrics
}

// signerState is what the Manager knows of one signer.
type signerState struct {
	cfg Config
	// recorded: set comes from the ledger; else from the configuration.
	recorded bool
	set      authority.Set
	reports  map[string]authority.Report
	// trust are the reports of the signer's own trust source, when it is not the
	// ClusterTrustBundle (signetv1.TrustSource): what its activation gate counts.
	trust map[string]authority.Report
	// leaves is, per CA fingerprint, the latest NotAfter of a leaf it signed; legacy the
	// latest of leaves recorded before records named their CA.
	leaves map[string]time.Time
	legacy time.Time
}

// Manager is the CA rotation of a server's signers.
type Manager struct {
	opts Options
	// op serializes the changes of sets (the rotation steps and reconfiguration); take it
	// before the server's own lock (Exclusive).
	op sync.Mutex
	// mu guards signers; held only briefly, never across a call out.
	mu      sync.Mutex
	signers map[string]*signerState
	// fleet is what the Manager knows of a fleet's journal (fleet.go); guarded by op.
	fleet fleetState
}

// New returns a Manager; feed it the ledger's records with Replay before Resolve.
func New(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	return &Manager{opts: opts, signers: map[string]*signerState{}}
}

// SetLedger sets the ledger the Manager records into (opened after the replay).
func (m *Manager) SetLedger(l Recorder) { m.opts.Ledger = l }

// SetShared makes the Manager follow a fleet's journal (Sync).
func (m *Manager) SetShared(sh Shared) { m.opts.Shared = sh }

// SetInstaller sets the Installer of the rotation steps.
func (m *Manager) SetInstaller(i Installer) { m.opts.Installer = i }

// Exclusive takes the lock that serializes changes of the sets and returns its release: the
// server holds it while it reloads a signer's configuration.
func (m *Manager) Exclusive() func() {
	m.op.Lock()
	return m.op.Unlock
}

// state returns signer's state, creating it; m.mu must be held.
func (m *Manager) state(signer string) *signerState {
	s, ok := m.signers[signer]
	if !ok {
		s = &signerState{reports: map[string]authority.Report{}, trust: map[string]authority.Report{}, leaves: map[string]time.Time{}}
		m.signers[signer] = s
	}
	return s
}

// Replay takes one record of the ledger, in order, while it opens.
func (m *Manager) Replay(r ledger.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.replayLocked(r)
}

func (m *Manager) replayLocked(r ledger.Record) error {
	switch r.Decision {
	case ledger.Issued:
		m.issuedLocked(r)
	case ledger.Rotated:
		set, err := authority.SetFromRecord(r.Authority)
		if err != nil {
			return fmt.Errorf("ledger record %d (signer %s): %w", r.Seq, r.Signer, err)
		}
		s := m.state(r.Signer)
		s.adopt(set)
	case ledger.Published:
		s := m.state(r.Signer)
		s.report(authority.Report{Cluster: r.Cluster, Source: r.Source, BundleHash: r.BundleHash, Anchors: r.Anchors}, r.Time)
	}
	return nil
}

// Issued takes a durable issued record: its CA's last leaf moves on.
func (m *Manager) Issued(r ledger.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.issuedLocked(r)
}

func (m *Manager) issuedLocked(r ledger.Record) {
	s := m.state(r.Signer)
	if r.CA == "" {
		if r.NotAfter.After(s.legacy) {
			s.legacy = r.NotAfter
		}
		return
	}
	if r.NotAfter.After(s.leaves[r.CA]) {
		s.leaves[r.CA] = r.NotAfter
	}
}

// adopt makes set the signer's recorded set; a newly staged CA starts its reports' proof
// afresh.
func (s *signerState) adopt(set authority.Set) {
	before := stagedFP(s.set)
	s.set, s.recorded = set, true
	after := stagedFP(set)
	if after == before {
		return
	}
	for _, reports := range []map[string]authority.Report{s.reports, s.trust} {
		for c, r := range reports {
			r.StagedAt = time.Time{}
			if after != "" && r.Holds(after) {
				r.StagedAt = r.LastSeen
			}
			reports[c] = r
		}
	}
}

// reportsOf are the reports of source: the ClusterTrustBundle's, or the trust source's.
func (s *signerState) reportsOf(source string) map[string]authority.Report {
	if source == signetv1.TrustSourceBundle {
		return s.reports
	}
	return s.trust
}

// report records a cluster's report at now: when its bundle hash was first reported, and when
// it first held the staged CA.
func (s *signerState) report(r authority.Report, now time.Time) {
	reports := s.reportsOf(r.Source)
	prev, seen := reports[r.Cluster]
	r.ReportedAt, r.LastSeen = now, now
	if seen && prev.BundleHash == r.BundleHash {
		r.ReportedAt = prev.ReportedAt
	}
	if fp := stagedFP(s.set); fp != "" && r.Holds(fp) {
		r.StagedAt = now
		if seen && prev.Holds(fp) && !prev.StagedAt.IsZero() {
			r.StagedAt = prev.StagedAt
		}
	}
	reports[r.Cluster] = r
}

// stagedFP is the fingerprint of the staged CA of set, or "".
func stagedFP(set authority.Set) string {
	if st := set.InState(authority.Staged); len(st) > 0 {
		return st[0].Fingerprint
	}
	return ""
}

// Plan is how a signer's configured CAs become its set.
type Plan struct {
	Signer string
	Set    authority.Set
	// Changed: the set must be recorded (the configuration changed a recorded set).
	Changed bool
	// Notes say where the configuration and the recorded set differ.
	Notes []string
}

// Resolve returns the set signer serves with given its configured CAs: the configuration for
// a signer never rotated, else the recorded set reconciled with it (authority.Set.Reconcile).
// Nothing changes until Adopt.
func (m *Manager) Resolve(signer string, cfg Config, configured []authority.CASpec) Plan {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state(signer)
	s.cfg = cfg
	if !s.recorded {
		return Plan{Signer: signer, Set: authority.NewSet(configured)}
	}
	set, changed, notes := s.set.Reconcile(configured, m.opts.Clock.Now())
	return Plan{Signer: signer, Set: set, Changed: changed, Notes: notes}
}

// Adopt records a plan's change, if any, and makes its set the signer's. Call it once the
// plan's CAs are open; on error serve the previous set.
func (m *Manager) Adopt(ctx context.Context, p Plan) error {
	for _, n := range p.Notes {
		m.opts.Log.Info("signer configuration differs from its recorded CA set", "signer", p.Signer, "detail", n)
	}
	if p.Changed {
		msg := "the configuration changed the CA set"
		if err := m.record(ctx, p.Signer, authority.ByConfiguration, p.Set, msg, ""); err != nil {
			return err
		}
		m.opts.Log.Warn("CA set changed by the configuration, without the propagation gate of signetctl ca", "signer", p.Signer)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state(p.Signer)
	if p.Changed {
		s.adopt(p.Set)
	} else if !s.recorded {
		s.set = p.Set
	} else {
		s.set = p.Set // same CAs, with the configuration's key URIs and sources
	}
	m.fleet.served(p.Signer, s.set)
	m.opts.Metrics.SetAnchors(p.Signer, countStates(s.set))
	return nil
}

// record appends a Rotated record of set for signer.
func (m *Manager) record(ctx context.Context, signer, by string, set authority.Set, message, grounds string) error {
	if m.opts.Ledger == nil {
		return errors.New("recording the CA set: no ledger")
	}
	r := ledger.Record{Decision: ledger.Rotated, Signer: signer, Client: by, Message: message, Grounds: grounds, Authority: set.Record()}
	var err error
	if m.opts.Shared != nil {
		_, err = m.opts.Shared.AppendRotation(ctx, r, m.fleet.cursor)
	} else {
		_, err = m.opts.Ledger.Append(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("recording the CA set of %s: %w", signer, err)
	}
	return nil
}

// Report takes a cluster's report of the bundle it published for signer: its
// ClusterTrustBundle (no source), or, for a signer whose trust lives in the API server's
// client-ca-file, that file as the watcher read it. While a CA is staged, a bundle the cluster
// had not reported before is recorded (the proof that activation waits for). A cluster the
// signer's configuration does not list is refused, and so is a source the signer's trust does
// not live in.
func (m *Manager) Report(ctx context.Context, client string, r authority.Report, signer string) error {
	if r.Source != signetv1.TrustSourceBundle && (r.Source != signetv1.TrustSource(signer) || r.Source != signetv1.TrustSourceAPIServerClientCA) {
		return fmt.Errorf("%w: the trust of signer %s does not live in %q; it lives in %s", authority.ErrRotationRefused, signer, r.Source,
			authority.DescribeSource(signetv1.TrustSource(signer)))
	}
	return m.takeReport(ctx, client, r, signer, "the cluster published a bundle holding the staged CA")
}

// Confirm records an admin's confirmation that cluster's relying party trusts signer's staged
// CA where nothing publishes it (signetv1.TrustSourceKubeletCA: kube-apiserver's
// --kubelet-certificate-authority): it counts as that cluster's report of the staged CA.
func (m *Manager) Confirm(ctx context.Context, client, signer, cluster, source, reason string) error {
	switch {
	case source != signetv1.TrustSourceKubeletCA || signetv1.TrustSource(signer) != source:
		return fmt.Errorf("%w: there is nothing to confirm for signer %s in %q: its trust lives in %s", authority.ErrRotationRefused, signer, source,
			authority.DescribeSource(signetv1.TrustSource(signer)))
	case cluster == "" || reason == "":
		return fmt.Errorf("%w: a confirmation names the cluster and says how it was checked (reason)", authority.ErrRotationRefused)
	}
	m.mu.Lock()
	fp := stagedFP(m.state(signer).set)
	m.mu.Unlock()
	if fp == "" {
		return fmt.Errorf("%w: signer %s has no staged CA to confirm", authority.ErrRotationRefused, signer)
	}
	r := authority.Report{Cluster: cluster, Source: source, BundleHash: "confirmed:" + fp, Anchors: []string{fp}}
	return m.takeReport(ctx, client, r, signer, fmt.Sprintf("%s confirmed that the cluster's %s holds the staged CA: %s", client, source, reason))
}

// takeReport records (when it is news while a CA is staged) and counts one report.
func (m *Manager) takeReport(ctx context.Context, client string, r authority.Report, signer, message string) error {
	if m.opts.Shared != nil { // whether the report is news depends on the fleet's set
		if err := m.Sync(ctx); err != nil {
			return err
		}
	}
	m.mu.Lock()
	s := m.state(signer)
	if len(s.cfg.Clusters) > 0 && !slices.Contains(s.cfg.Clusters, r.Cluster) {
		m.mu.Unlock()
		return fmt.Errorf("%w: cluster %q is not registered for signer %s (signers[].rotation.clusters lists %q); set the watcher's clusterName to one of them",
			authority.ErrRotationRefused, r.Cluster, signer, s.cfg.Clusters)
	}
	now := m.opts.Clock.Now()
	prev, seen := s.reportsOf(r.Source)[r.Cluster]
	news := stagedFP(s.set) != "" && (!seen || prev.BundleHash != r.BundleHash)
	m.mu.Unlock()
	if news {
		if m.opts.Ledger == nil {
			return errors.New("recording a trust bundle report: no ledger")
		}
		// Recorded before it counts, so the proof survives a restart.
		if _, err := m.opts.Ledger.Append(ctx, ledger.Record{
			Decision: ledger.Published, Signer: signer, Client: client, Cluster: r.Cluster, Source: r.Source,
			BundleHash: r.BundleHash, Anchors: r.Anchors, Message: message,
		}); err != nil {
			return fmt.Errorf("recording the trust bundle report of cluster %s: %w", r.Cluster, err)
		}
		m.opts.Log.Info("cluster published a new trust bundle while a CA is staged", "signer", signer, "cluster", r.Cluster,
			"source", r.Source, "bundle_hash", r.BundleHash)
	}
	m.mu.Lock()
	s.report(r, now)
	m.mu.Unlock()
	if r.Source == signetv1.TrustSourceBundle {
		m.opts.Metrics.ObserveReport(signer, r.Cluster, r.BundleHash, now)
	}
	return nil
}

// countStates counts set's CAs by state.
func countStates(set authority.Set) map[string]int {
	out := map[string]int{}
	for _, st := range []authority.State{authority.Active, authority.Staged, authority.Retired, authority.Removed} {
		out[string(st)] = len(set.InState(st))
	}
	return out
}

type noMetrics struct{}

func (noMetrics) SetAnchors(string, map[string]int)               {}
func (noMetrics) ObserveReport(string, string, string, time.Time) {}
func (noMetrics) ObserveRotation(string, string, bool)            {}
