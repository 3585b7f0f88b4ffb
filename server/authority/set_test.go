package authority_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/authority"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func stateOf(t *testing.T, s authority.Set, ca *testpki.Authority) authority.State {
	t.Helper()
	e, ok := s.Find(authority.Fingerprint(ca.Cert))
	if !ok {
		t.Fatalf("CA %s is not in the set", ca.Cert.Subject)
	}
	return e.State
}

// TestSetSteps: stage, activate and remove move the CAs through their states, stamp since and
// by, and refuse the steps the state does not allow.
func TestSetSteps(t *testing.T) {
	t.Parallel()
	a, b, c := testpki.CA(t), testpki.CA(t), testpki.CA(t)
	set := authority.NewSet([]authority.CASpec{spec(t, authority.Active, a, true)})
	staged, err := set.Stage(spec(t, authority.Staged, b, true), []string{"east"}, t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if stateOf(t, set, a) != authority.Active || len(set.Entries) != 1 {
		t.Fatal("Stage changed the set it was called on")
	}
	if _, err := staged.Stage(spec(t, authority.Staged, c, true), nil, t0, "admin"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("staging a second CA: %v, want ErrRotationRefused", err)
	}
	if _, err := staged.Stage(spec(t, authority.Staged, b, true), nil, t0, "admin"); err == nil {
		t.Fatal("staging a CA twice was accepted")
	}
	if _, err := set.Stage(authority.CASpec{Certificate: testpki.CA(t).Cert, KeyURI: staged.Entries[0].KeyURI}, nil, t0, "admin"); !errors.Is(err, authority.ErrInvalidCA) {
		t.Fatalf("staging with the active CA's key: %v, want ErrInvalidCA", err)
	}
	activated, err := staged.Activate(t0.Add(time.Hour), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if stateOf(t, activated, a) != authority.Retired || stateOf(t, activated, b) != authority.Active || len(activated.Clusters) != 0 {
		t.Fatalf("after Activate: a %s, b %s, clusters %v", stateOf(t, activated, a), stateOf(t, activated, b), activated.Clusters)
	}
	if e, _ := activated.Find(authority.Fingerprint(b.Cert)); !e.Since.Equal(t0.Add(time.Hour)) || e.By != "admin" {
		t.Fatalf("activated entry since %s by %q", e.Since, e.By)
	}
	if _, err := activated.Activate(t0, "admin"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("activating with nothing staged: %v", err)
	}
	if _, err := activated.Remove(authority.Fingerprint(b.Cert), t0, "admin"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("removing the active CA: %v", err)
	}
	removed, err := activated.Remove(authority.Fingerprint(a.Cert), t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed.Specs()) != 1 || stateOf(t, removed, a) != authority.Removed {
		t.Fatalf("after Remove: %d CAs to open, a %s", len(removed.Specs()), stateOf(t, removed, a))
	}
}

// TestSetRecordRoundTrip: a set survives the ledger's encoding, and a record whose
// fingerprint does not match its certificate is refused.
func TestSetRecordRoundTrip(t *testing.T) {
	t.Parallel()
	a, b := testpki.CA(t), testpki.CA(t)
	set, err := authority.NewSet([]authority.CASpec{spec(t, authority.Active, a, true)}).
		Stage(spec(t, authority.Staged, b, true), []string{"east", "west"}, t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	rec := set.Record()
	back, err := authority.SetFromRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Entries) != 2 || stateOf(t, back, b) != authority.Staged || strings.Join(back.Clusters, ",") != "east,west" ||
		back.Entries[1].KeyURI != set.Entries[1].KeyURI || !back.Entries[1].Since.Equal(t0) {
		t.Fatalf("round trip: %+v", back)
	}
	rec.CAs[0].Fingerprint = rec.CAs[1].Fingerprint
	if _, err := authority.SetFromRecord(rec); err == nil {
		t.Fatal("a record with a wrong fingerprint was accepted")
	}
}

// TestSetReconcile: the configuration adds what the record does not know, activating a newly
// configured active CA; it does not undo a recorded rotation.
func TestSetReconcile(t *testing.T) {
	t.Parallel()
	a, b, c := testpki.CA(t), testpki.CA(t), testpki.CA(t)
	cfgA := spec(t, authority.Active, a, true)
	recorded, err := authority.NewSet([]authority.CASpec{cfgA}).Stage(spec(t, authority.Staged, b, true), nil, t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err = recorded.Activate(t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	// The configuration still says a is active: the record wins, with a note.
	out, changed, notes := recorded.Reconcile([]authority.CASpec{cfgA}, t0.Add(time.Hour))
	if changed || stateOf(t, out, a) != authority.Retired || stateOf(t, out, b) != authority.Active || len(notes) != 1 {
		t.Fatalf("stale configuration: changed %v, a %s, b %s, notes %q", changed, stateOf(t, out, a), stateOf(t, out, b), notes)
	}
	// A new active CA in the configuration (its files replaced): activated by configuration.
	out, changed, _ = recorded.Reconcile([]authority.CASpec{spec(t, authority.Active, c, true)}, t0.Add(time.Hour))
	if !changed || stateOf(t, out, c) != authority.Active || stateOf(t, out, b) != authority.Retired || stateOf(t, out, a) != authority.Retired {
		t.Fatalf("replaced CA: changed %v, a %s, b %s, c %s", changed, stateOf(t, out, a), stateOf(t, out, b), stateOf(t, out, c))
	}
	if e, _ := out.Find(authority.Fingerprint(c.Cert)); e.By != authority.ByConfiguration {
		t.Fatalf("the configured CA is by %q", e.By)
	}
}

// TestGates: activation waits for every expected cluster to publish the staged CA and then
// for the delay; retirement for the last leaf.
func TestGates(t *testing.T) {
	t.Parallel()
	a, b := testpki.CA(t), testpki.CA(t)
	set, err := authority.NewSet([]authority.CASpec{spec(t, authority.Active, a, true)}).Stage(spec(t, authority.Staged, b, true), []string{"east"}, t0, "admin")
	if err != nil {
		t.Fatal(err)
	}
	fpA, fpB := authority.Fingerprint(a.Cert), authority.Fingerprint(b.Cert)
	reports := map[string]authority.Report{"east": {Cluster: "east", Anchors: []string{fpA}, LastSeen: t0}}
	expected := authority.Expected([]string{"west"}, set.Clusters, reports)
	if strings.Join(expected, ",") != "east,west" {
		t.Fatalf("expected clusters %v", expected)
	}
	g := authority.ActivationGate(set, expected, reports, "", time.Minute, t0)
	if g.Ready || len(g.Blocking) != 2 || !strings.Contains(g.Blocking[0], `"east" has not published`) || !strings.Contains(g.Blocking[1], `"west" has not reported`) {
		t.Fatalf("gate %+v", g)
	}
	reports["east"] = authority.Report{Cluster: "east", Anchors: []string{fpA, fpB}, StagedAt: t0.Add(time.Second)}
	reports["west"] = authority.Report{Cluster: "west", Anchors: []string{fpA, fpB}, StagedAt: t0.Add(2 * time.Second)}
	g = authority.ActivationGate(set, expected, reports, "", time.Minute, t0.Add(time.Minute))
	if g.Ready || !g.NotBefore.Equal(t0.Add(time.Minute+2*time.Second)) {
		t.Fatalf("gate before the delay %+v", g)
	}
	if err := g.Err("activation"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("gate error %v", err)
	}
	if g := authority.ActivationGate(set, expected, reports, "", time.Minute, t0.Add(time.Hour)); !g.Ready {
		t.Fatalf("gate after the delay %+v", g)
	}
	if g := authority.ActivationGate(set, nil, nil, "", 0, t0); g.Ready || !strings.Contains(g.Blocking[0], "no cluster is registered") {
		t.Fatalf("gate without clusters %+v", g)
	}

	retired, _ := set.Activate(t0, "admin")
	e, _ := retired.Find(fpA)
	if g := authority.RetirementGate(e, t0.Add(time.Hour), t0); g.Ready || !g.NotBefore.Equal(t0.Add(time.Hour)) {
		t.Fatalf("retirement before the last leaf %+v", g)
	}
	if g := authority.RetirementGate(e, t0.Add(time.Hour), t0.Add(2*time.Hour)); !g.Ready {
		t.Fatalf("retirement after the last leaf %+v", g)
	}
	active, _ := retired.Find(fpB)
	if g := authority.RetirementGate(active, time.Time{}, t0); g.Ready {
		t.Fatal("the active CA may be retired")
	}
}
