package rotation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/rotation"
)

const signer = "example.com/serving"

// installer records what the Manager installs; fail makes Prepare fail.
type installer struct {
	installed []authority.Set
	fail      error
}

func (i *installer) Prepare(_ context.Context, _ string, set authority.Set) (func(), func(), error) {
	if i.fail != nil {
		return nil, nil, i.fail
	}
	return func() { i.installed = append(i.installed, set) }, func() {}, nil
}

// fixture is a Manager on a real ledger in a temporary folder, with a fake clock.
type fixture struct {
	m     *rotation.Manager
	l     *ledger.Ledger
	dir   string
	clock *clocktesting.FakeClock
	inst  *installer
}

func open(t *testing.T, dir string, clock *clocktesting.FakeClock) *fixture {
	t.Helper()
	f := &fixture{dir: dir, clock: clock, inst: &installer{}}
	f.m = rotation.New(rotation.Options{Clock: clock, Installer: f.inst})
	l, err := ledger.Open(dir, ledger.Options{Clock: clock, Replay: f.m.Replay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f.l = l
	f.m.SetLedger(l)
	return f
}

func (f *fixture) records(t *testing.T, d ledger.Decision) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	if err := ledger.Replay(f.dir, time.Time{}, func(r ledger.Record) error {
		if r.Decision == d {
			out = append(out, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManagerReplaysTheLedger: the set, the reports and each CA's last leaf come back from
// the ledger after a restart; a report is recorded only when it is news while a CA is staged.
func TestManagerReplaysTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	f := open(t, dir, clock)
	active, next := testpki.CA(t), testpki.CA(t)
	cfg := rotation.Config{MinPropagationDelay: time.Minute}
	plan := f.m.Resolve(signer, cfg, []authority.CASpec{{State: authority.Active, KeyURI: "/a.key", Certificate: active.Cert}})
	if plan.Changed {
		t.Fatal("a signer never rotated has nothing to record")
	}
	if err := f.m.Adopt(ctx, plan); err != nil {
		t.Fatal(err)
	}
	fpActive, fpNext := authority.Fingerprint(active.Cert), authority.Fingerprint(next.Cert)
	leafEnd := clock.Now().Add(48 * time.Hour)
	f.m.Issued(ledger.Record{Signer: signer, CA: fpActive, NotAfter: leafEnd})
	if _, err := f.l.Append(ctx, ledger.Record{Decision: ledger.Issued, Signer: signer, Serial: "01", Certificate: "x", CA: fpActive, NotAfter: leafEnd}); err != nil {
		t.Fatal(err)
	}
	report := func(cluster string, fps ...string) error {
		return f.m.Report(ctx, "watcher", authority.Report{Cluster: cluster, BundleHash: fps[len(fps)-1], Anchors: fps}, signer)
	}
	if err := report("east", fpActive); err != nil {
		t.Fatal(err)
	}
	if n := len(f.records(t, ledger.Published)); n != 0 {
		t.Fatalf("%d reports recorded while nothing is staged", n)
	}
	if err := f.m.Stage(ctx, "admin", signer, authority.CASpec{State: authority.Staged, KeyURI: "/n.key", Certificate: next.Cert}); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	for range 3 {
		if err := report("east", fpActive, fpNext); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.records(t, ledger.Published)); n != 1 {
		t.Fatalf("%d reports recorded; want one, the first of the new bundle", n)
	}
	st, _ := f.m.Status(signer)
	if len(st.Clusters) != 1 || !st.Clusters[0].Registered || !st.Clusters[0].StagedAt.Equal(clock.Now()) {
		t.Fatalf("clusters %+v; want east, expected (it reported when the CA was staged), publishing since now", st.Clusters)
	}
	if st.Activation.Ready || !st.Activation.NotBefore.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("activation %+v; want closed until the delay", st.Activation)
	}

	// Restart: the ledger gives everything back.
	_ = f.l.Close()
	clock.Step(2 * time.Minute)
	g := open(t, dir, clock)
	plan = g.m.Resolve(signer, cfg, []authority.CASpec{{State: authority.Active, KeyURI: "/a.key", Certificate: active.Cert}})
	if plan.Changed || len(plan.Set.InState(authority.Staged)) != 1 {
		t.Fatalf("after restart: changed %v, %d staged", plan.Changed, len(plan.Set.InState(authority.Staged)))
	}
	if err := g.m.Adopt(ctx, plan); err != nil {
		t.Fatal(err)
	}
	st, _ = g.m.Status(signer)
	if !st.Activation.Ready {
		t.Fatalf("after restart and the delay, activation %+v; want ready", st.Activation)
	}
	if err := g.m.Activate(ctx, "admin", signer, false, ""); err != nil {
		t.Fatal(err)
	}
	st, _ = g.m.Status(signer)
	for _, ca := range st.CAs {
		if ca.Fingerprint == fpActive && (ca.State != authority.Retired || !ca.LastLeaf.Equal(leafEnd) || ca.Retirement.Ready) {
			t.Fatalf("old CA %+v; want retired, its last leaf from the ledger holding retirement", ca)
		}
	}
	err := g.m.Retire(ctx, "admin", signer, fpActive, "", false, "")
	if !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("retiring with a valid leaf: %v", err)
	}
	clock.Step(49 * time.Hour)
	if err := g.m.Retire(ctx, "admin", signer, fpActive, "", false, ""); err != nil {
		t.Fatalf("retiring after the last leaf expired: %v", err)
	}
	if n := len(g.records(t, ledger.Rotated)); n != 3 {
		t.Fatalf("%d rotated records; want stage, activate, retire", n)
	}
}

// TestManagerRefusals: an unregistered cluster, a PIN in the key URI and a CA that cannot be
// opened are refused; nothing is recorded or installed for them.
func TestManagerRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Now())
	f := open(t, t.TempDir(), clock)
	active, next := testpki.CA(t), testpki.CA(t)
	if err := f.m.Adopt(ctx, f.m.Resolve(signer, rotation.Config{Clusters: []string{"east"}},
		[]authority.CASpec{{State: authority.Active, KeyURI: "/a.key", Certificate: active.Cert}})); err != nil {
		t.Fatal(err)
	}
	fp := authority.Fingerprint(active.Cert)
	if err := f.m.Report(ctx, "w", authority.Report{Cluster: "west", BundleHash: fp, Anchors: []string{fp}}, signer); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("report from an unregistered cluster: %v", err)
	}
	staged := authority.CASpec{State: authority.Staged, KeyURI: "pkcs11:token=t;object=k?module-path=/m.so&pin-value=1234", Certificate: next.Cert}
	if err := f.m.Stage(ctx, "admin", signer, staged); !errors.Is(err, authority.ErrInvalidCA) {
		t.Fatalf("staging with a pin-value: %v", err)
	}
	f.inst.fail = errors.New("the key does not match its certificate")
	staged.KeyURI = "/n.key"
	if err := f.m.Stage(ctx, "admin", signer, staged); !errors.Is(err, authority.ErrInvalidCA) {
		t.Fatalf("staging a CA that cannot be opened: %v", err)
	}
	if n := len(f.records(t, ledger.Rotated)); n != 0 || len(f.inst.installed) != 0 {
		t.Fatalf("%d records, %d installs after refusals", n, len(f.inst.installed))
	}
	if err := f.m.Activate(ctx, "admin", signer, true, ""); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("activating with nothing staged: %v", err)
	}
}
