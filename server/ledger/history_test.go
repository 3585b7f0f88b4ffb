package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
)

func rotated(signer, fingerprint string) ledger.Record {
	return ledger.Record{Decision: ledger.Rotated, Signer: signer, Authority: &ledger.Authority{CAs: []ledger.AuthorityCA{
		{Fingerprint: fingerprint, State: "active", By: "configuration", Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
	}}}
}

// TestStartNewHistory: with the server stopped, an operator starts a new history on a ledger
// that lost its end: the previous files are archived whole, the new ledger's first record
// names the operator, the reason and the previous history, and each signer's last CA set is
// carried over. It is refused while a server holds the ledger, and without a reason.
func TestStartNewHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	appendN(t, l, 0, 2)
	for _, r := range []ledger.Record{rotated("a.example/x", "aa01"), rotated("b.example/y", "bb01"), rotated("a.example/x", "aa02")} {
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, 2, 1)
	if _, err := ledger.StartNewHistory(f.dir, "alice", "lost its end", f.options()); !errors.Is(err, ledger.ErrLocked) {
		t.Fatalf("StartNewHistory while the ledger is open: %v, want ErrLocked", err)
	}
	l.Close()
	if _, err := ledger.StartNewHistory(f.dir, "alice", "", f.options()); err == nil {
		t.Fatal("StartNewHistory without a reason succeeded")
	}

	h, err := ledger.StartNewHistory(f.dir, "alice", "records were cut from the end (incident 42)", f.options())
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := ledger.Verify(h.Archive); err != nil || rep.Records != 6 {
		t.Fatalf("archived history: %+v, %v; want its 6 records", rep, err)
	}
	if h.First.Seq != 1 || h.First.Decision != ledger.Started || h.First.Client != "alice" ||
		!strings.Contains(h.First.Message, "incident 42") || !strings.Contains(h.First.Grounds, h.Archive) || !strings.Contains(h.First.Grounds, "6 records") {
		t.Errorf("first record = %+v", h.First)
	}
	if len(h.Carried) != 2 || h.Carried[0].Authority.CAs[0].Fingerprint != "aa02" || h.Carried[1].Authority.CAs[0].Fingerprint != "bb01" {
		t.Errorf("carried = %+v, want the last CA set of a.example/x (aa02) and of b.example/y", h.Carried)
	}
	var decisions []string
	if err := ledger.Replay(f.dir, t0.AddDate(-1, 0, 0), func(r ledger.Record) error {
		decisions = append(decisions, string(r.Decision))
		return nil
	}); err != nil || strings.Join(decisions, ",") != "started,rotated,rotated" {
		t.Errorf("new history = %v, %v", decisions, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "history-"+strings.TrimPrefix(filepath.Base(h.Archive), "history-"))); err != nil {
		t.Error(err)
	}
	l2 := f.open(t)
	if r, err := l2.Append(context.Background(), issued(9)); err != nil || r.Seq != 4 {
		t.Errorf("Append to the new history: %+v, %v", r, err)
	}
}
