package rotation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/ledger"
)

// Shared is a fleet's journal, which every server of the fleet appends to (pgstate.Journal).
// On a fleet the Manager's state is the journal's rotation records, as on one host it is the
// file ledger's; but other servers append them too, so the Manager follows them (Sync) and
// takes a step only over the set it has seen.
type Shared interface {
	// RotationRecords returns the Rotated and Published records after seq after, in order.
	RotationRecords(ctx context.Context, after uint64) ([]ledger.Record, error)
	// LastLeaves returns per signer and CA fingerprint ("" for records naming none) the
	// latest NotAfter of a leaf any server issued.
	LastLeaves(ctx context.Context) (map[string]map[string]time.Time, error)
	// AppendRotation appends a Rotated record only if no Rotated record of its signer came
	// after seq after; otherwise it fails and stores nothing.
	AppendRotation(ctx context.Context, r ledger.Record, after uint64) (ledger.Record, error)
}

// fleetState is what a Manager knows of a fleet's journal.
type fleetState struct {
	// cursor is the seq of the last rotation record followed.
	cursor uint64
	// serving is, per signer, the set its CAs serve (setKey); a set the journal holds that
	// differs is installed by the next Sync.
	serving map[string]string
}

func (f *fleetState) served(signer string, set authority.Set) {
	if f.serving == nil {
		f.serving = map[string]string{}
	}
	f.serving[signer] = setKey(set)
}

// setKey names a set by its CAs and their states.
func setKey(set authority.Set) string {
	var b strings.Builder
	for _, e := range set.Entries {
		b.WriteString(e.Fingerprint)
		b.WriteByte(':')
		b.WriteString(string(e.State))
		b.WriteByte(' ')
	}
	return b.String()
}

// Sync follows a fleet's journal: it reads the rotation records other servers appended since
// the last Sync, and each CA's last leaf, and installs every set that changed (once the
// Installer is set; at start the signers' configuration is reconciled with what it read,
// Resolve). A set whose CAs do not open here stays pending, logged, and is tried again at the
// next Sync. On one host it does nothing.
func (m *Manager) Sync(ctx context.Context) error {
	defer m.Exclusive()()
	return m.syncLocked(ctx)
}

// Cursor is the seq of the last rotation record Sync followed.
func (m *Manager) Cursor() uint64 {
	defer m.Exclusive()()
	return m.fleet.cursor
}

func (m *Manager) syncLocked(ctx context.Context) error {
	sh := m.opts.Shared
	if sh == nil {
		return nil
	}
	recs, err := sh.RotationRecords(ctx, m.fleet.cursor)
	if err != nil {
		return fmt.Errorf("following the fleet's CA rotation: %w", err)
	}
	leaves, err := sh.LastLeaves(ctx)
	if err != nil {
		return fmt.Errorf("following the fleet's CA rotation: %w", err)
	}
	m.mu.Lock()
	for _, r := range recs {
		if err := m.replayLocked(r); err != nil {
			m.mu.Unlock()
			return fmt.Errorf("following the fleet's CA rotation: %w", err)
		}
		m.fleet.cursor = r.Seq
	}
	for signer, byCA := range leaves {
		s := m.state(signer)
		for ca, t := range byCA {
			switch {
			case ca == "" && t.After(s.legacy):
				s.legacy = t
			case ca != "" && t.After(s.leaves[ca]):
				s.leaves[ca] = t
			}
		}
	}
	var pending []string
	sets := map[string]authority.Set{}
	for signer, s := range m.signers {
		if key, ok := m.fleet.serving[signer]; ok && s.recorded && key != setKey(s.set) {
			pending = append(pending, signer)
			sets[signer] = s.set
		}
	}
	m.mu.Unlock()
	if m.opts.Installer == nil {
		return nil
	}
	slices.Sort(pending)
	for _, signer := range pending {
		m.install(ctx, signer, sets[signer])
	}
	return nil
}

// install serves set, which another server of the fleet recorded for signer.
func (m *Manager) install(ctx context.Context, signer string, set authority.Set) {
	log := m.opts.Log.With("signer", signer)
	commit, _, err := m.opts.Installer.Prepare(ctx, signer, set)
	if err != nil {
		log.Error("the fleet changed the CA set, and its CAs do not open on this server: it serves the previous set until they do", "error", err.Error())
		return
	}
	commit()
	m.fleet.served(signer, set)
	m.opts.Metrics.SetAnchors(signer, countStates(set))
	log.Info("CA set changed by another server of the fleet, now served", "cas", setKey(set))
}
