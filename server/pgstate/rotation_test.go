package pgstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/ledger/record"
)

const rotSigner = "example.com/signer"

func rotated(state string) record.Record {
	return record.Record{Decision: record.Rotated, Signer: rotSigner, Client: "admin", Message: "step",
		Authority: &record.Authority{CAs: []record.AuthorityCA{{Fingerprint: "ab12", State: state, Certificate: "-----BEGIN CERTIFICATE-----\n…"}}}}
}

// waitPayload waits up to 2 s for want on ch.
func waitPayload(t *testing.T, ch chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("%q not announced within %s", want, within)
		}
	}
}

// TestRotationRecordsReachEveryServer: a CA staged on server A is announced to B within 2 s
// and read by B from where it had followed; B's step over a set it had not seen is refused
// (ErrRotationRaced) and stores nothing, its step over the one it saw is taken and announced
// to A; a published report is announced too; after the database restarts, B's listener comes
// back and says to look again.
func TestRotationRecordsReachEveryServer(t *testing.T) {
	s := pgtest.Start(t)
	poolA, poolB := migrated(t, s, "rotation"), secondPool(t, s, "rotation")
	a, b := NewJournal(poolA, JournalOptions{}), NewJournal(poolB, JournalOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seenA, seenB := make(chan string, 16), make(chan string, 16)
	go func() { _ = Listen(ctx, poolA, RotationChannel, func(p string) { seenA <- p }, nil) }()
	go func() { _ = Listen(ctx, poolB, RotationChannel, func(p string) { seenB <- p }, nil) }()
	waitPayload(t, seenA, "", 2*time.Second)
	waitPayload(t, seenB, "", 2*time.Second)

	if _, err := a.Append(ctx, issued(1, 1)); err != nil { // not a rotation record: B must not read it
		t.Fatal(err)
	}
	staged, err := a.AppendRotation(ctx, rotated("staged"), 0)
	if err != nil {
		t.Fatalf("A stages: %v", err)
	}
	waitPayload(t, seenB, rotSigner, 2*time.Second)
	recs, err := b.RotationRecords(ctx, 0)
	if err != nil || len(recs) != 1 || recs[0].Seq != staged.Seq || recs[0].Authority.CAs[0].State != "staged" {
		t.Fatalf("B reads %+v, %v; want the staged record %d alone", recs, err, staged.Seq)
	}
	if _, err := b.AppendRotation(ctx, rotated("active"), 0); !errors.Is(err, ErrRotationRaced) {
		t.Fatalf("B over a set it had not seen: %v, want ErrRotationRaced", err)
	}
	if recs, _ := a.RotationRecords(ctx, staged.Seq); len(recs) != 0 {
		t.Fatalf("the refused step stored %+v", recs)
	}
	active, err := b.AppendRotation(ctx, rotated("active"), staged.Seq)
	if err != nil {
		t.Fatalf("B activates over the set it saw: %v", err)
	}
	waitPayload(t, seenA, rotSigner, 2*time.Second)
	if _, err := a.Append(ctx, record.Record{Decision: record.Published, Signer: rotSigner, Client: "watcher", Cluster: "c1",
		BundleHash: "00ff", Anchors: []string{"ab12"}, Message: "published"}); err != nil {
		t.Fatal(err)
	}
	waitPayload(t, seenB, rotSigner, 2*time.Second)
	if recs, err := b.RotationRecords(ctx, active.Seq); err != nil || len(recs) != 1 || recs[0].Decision != record.Published {
		t.Fatalf("B reads after the activation: %+v, %v; want the published record", recs, err)
	}
	checkChain(t, poolA)

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitPayload(t, seenB, "", 10*time.Second)
}

// TestCALeavesFollowTheFleetsIssuances: each CA's last leaf is the latest NotAfter any server
// recorded for it; an earlier one does not lower it; records that name no CA count under "".
func TestCALeavesFollowTheFleetsIssuances(t *testing.T) {
	s := pgtest.Start(t)
	poolA, poolB := migrated(t, s, "leaves"), secondPool(t, s, "leaves")
	a, b := NewJournal(poolA, JournalOptions{}), NewJournal(poolB, JournalOptions{})
	ctx := context.Background()
	base := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := func(server, i int, ca string, notAfter time.Time) record.Record {
		r := issued(server, i)
		r.CA, r.NotAfter = ca, notAfter
		return r
	}
	for _, step := range []struct {
		j *Journal
		r record.Record
	}{
		{a, leaf(1, 1, "ca1", base.Add(2*time.Hour))},
		{b, leaf(2, 1, "ca1", base.Add(time.Hour))}, // earlier: ca1 stays at +2h
		{b, leaf(2, 2, "ca2", base.Add(3*time.Hour))},
		{a, leaf(1, 2, "", base.Add(5*time.Hour))},
	} {
		if _, err := step.j.Append(ctx, step.r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.LastLeaves(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{"ca1": base.Add(2 * time.Hour), "ca2": base.Add(3 * time.Hour), "": base.Add(5 * time.Hour)}
	if len(got) != 1 || len(got[rotSigner]) != len(want) {
		t.Fatalf("LastLeaves = %v, want %v for %s", got, want, rotSigner)
	}
	for ca, w := range want {
		if !got[rotSigner][ca].Equal(w) {
			t.Errorf("CA %q: last leaf %v, want %v", ca, got[rotSigner][ca], w)
		}
	}
}
