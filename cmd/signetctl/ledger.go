package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// ledgerCommand is "signetctl ledger": the decision ledger's subcommands.
func ledgerCommand() command {
	subs := []command{
		{name: "verify", summary: "check every record, the seq order and the hash chain of a ledger", run: runLedgerVerify},
	}
	return command{
		name:    "ledger",
		summary: "inspect the server's decision ledger (verify)",
		run: func(ctx context.Context, s streams, args []string) int {
			return dispatch(ctx, s, "signetctl ledger", subs, args)
		},
	}
}

// runLedgerVerify is "signetctl ledger verify --dir DIR": it prints "ledger OK: …" and returns
// 0 for an intact ledger, or prints the first problem and returns 1. It only reads, needs no
// lock and can run while the server appends.
func runLedgerVerify(_ context.Context, s streams, args []string) int {
	fs := flag.NewFlagSet("signetctl ledger verify", flag.ContinueOnError)
	fs.SetOutput(s.err)
	dir := fs.String("dir", "", "the ledger directory (the server's ledger directory, e.g. /var/lib/signet/ledger)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: signetctl ledger verify --dir DIR\n\nVerifies every record of the ledger in DIR: its hash, its seq and its link to the record before.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	rep, err := ledger.Verify(*dir)
	var ce *ledger.CorruptionError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(s.out, "ledger BROKEN: %s\n", ce.Problem)
		fmt.Fprintf(s.out, "intact before the problem: %s\n", summary(rep))
		return 1
	case err != nil:
		fmt.Fprintf(s.err, "signetctl ledger verify: %v\n", err)
		return 1
	}
	fmt.Fprintf(s.out, "ledger OK: %s\n", summary(rep))
	if rep.Records > 0 {
		fmt.Fprintf(s.out, "last hash: %s\n", rep.LastHash)
	}
	if rep.TornTail > 0 {
		fmt.Fprintf(s.out, "note: ignored a torn final write of %d bytes after the last record (cut short by a crash or still in progress, never acknowledged); the server truncates it when it opens the ledger\n", rep.TornTail)
	}
	return 0
}

// summary describes the records of rep: "1234 records, seq 1–1234, <first time> → <last time>".
func summary(rep ledger.Report) string {
	if rep.Records == 0 {
		return "0 records"
	}
	noun := "records"
	if rep.Records == 1 {
		noun = "record"
	}
	return fmt.Sprintf("%d %s, seq %d–%d, %s → %s", rep.Records, noun, rep.FirstSeq, rep.LastSeq,
		rep.FirstTime.UTC().Format(time.RFC3339Nano), rep.LastTime.UTC().Format(time.RFC3339Nano))
}
