package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/servertest"
)

// TestLedgerNewHistory: a server refuses its ledger once a record was cut from its end after
// its last checkpoint; new-history (with the server stopped) archives that history untouched
// and starts a new one that records who did it and why, and the server starts on it.
func TestLedgerNewHistory(t *testing.T) {
	cfg, state := servertest.DevConfig(t, devpki.Options{})
	dir := cfg.Ledger.Dir
	srv := servertest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	client := devClient(t, srv.Addr, state)
	for i := 1; i <= 2; i++ {
		if _, err := client.SignCSR(context.Background(), aliceCSR(t, fmt.Sprintf("7a1c0000-0000-4000-8000-00000000000%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := runCmd("ledger", "new-history", "--dir", dir, "--reason", "r", "--operator", "alice"); code != 1 || !strings.Contains(errOut, "stop signet-server first") {
		t.Fatalf("new-history with the server running: exit %d, %q", code, errOut)
	}
	srv.Stop()

	// The ledger cut by its last record after the clean stop's checkpoint: refused at start.
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	records := bytes.TrimRight(whole, "\x00")
	if len(records) == 0 {
		t.Fatal("the server wrote no record")
	}
	cutAt := bytes.LastIndexByte(records[:len(records)-1], '\n') + 1
	if err := os.WriteFile(seg, append(append([]byte(nil), records[:cutAt]...), make([]byte, len(whole)-cutAt)...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, checkpoint.ErrBehind) {
		t.Fatalf("server.New on the cut ledger: %v, want ErrBehind", err)
	}

	code, out, errOut := runCmd("ledger", "new-history", "--dir", dir, "--reason", "records cut from the end, incident 42", "--operator", "alice")
	if code != 0 || !strings.Contains(out, "previous history archived in ") || !strings.Contains(out, "record 1 (started by alice)") {
		t.Fatalf("new-history: exit %d\n%s\n%s", code, out, errOut)
	}
	archives, _ := filepath.Glob(filepath.Join(dir, "history-*"))
	if len(archives) != 1 {
		t.Fatalf("archives %v, want one", archives)
	}
	if _, err := os.Stat(filepath.Join(archives[0], checkpoint.FileName)); err != nil {
		t.Errorf("the previous checkpoint was not archived with its history: %v", err)
	}
	var first ledger.Record
	if err := ledger.Replay(dir, time.Time{}, func(r ledger.Record) error {
		if r.Seq == 1 {
			first = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if first.Decision != ledger.Started || first.Client != "alice" || !strings.Contains(first.Message, "incident 42") || !strings.Contains(first.Grounds, archives[0]) {
		t.Errorf("first record of the new history = %+v", first)
	}
	s, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("server.New on the new history: %v", err)
	}
	s.Close()
}
