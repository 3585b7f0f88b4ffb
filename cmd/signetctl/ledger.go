package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/server/ledger"
)

// ledgerCommand is "signetctl ledger": the decision ledger's subcommands. They read the ledger
// directory on the server's host, need no lock and can run while the server appends; prove
// (without --dir) and checkpoint ask the server, verify-proof needs only a bundle and a key.
func ledgerCommand() *cobra.Command {
	return groupCommand("ledger", "Verify, search, audit and prove the server's decision ledger (verify, list, show, audit, prove, verify-proof, checkpoint, new-history, reindex, export, import)",
		`Reads the server's decision ledger, on the server's host: verify checks every record and the
hash chain; list and show find records by serial, object UID, signer, decision and time; audit
checks the ledger against signed checkpoints (nothing removed or rewritten); prove prints a
record's inclusion proof bundle. They only read, take no lock and can run while the server
appends. prove can also ask the server instead (without --dir), and checkpoint fetches the
server's latest signed checkpoint; verify-proof checks a bundle anywhere, with the checkpoint
public key alone. new-history (server stopped) starts a new history when the server refuses its
ledger, archiving the previous one. reindex (server stopped) rebuilds the index and tree tiles
kept beside the segments. export copies a fleet's ledger (state.backend: postgres) into a ledger
directory; import (server stopped) loads a host's ledger into a new fleet's database.`,
		`  signetctl ledger verify --dir /var/lib/signet/ledger
  signetctl ledger list --dir /var/lib/signet/ledger --decision refused --since 24h
  signetctl ledger show --dir /var/lib/signet/ledger --serial 3f9a…
  signetctl ledger checkpoint --server signet.example.com:8443 --key checkpoint.pub > saved.checkpoint
  signetctl ledger audit --dir /var/lib/signet/ledger --checkpoint saved.checkpoint --key checkpoint.pub
  signetctl ledger prove --dir /var/lib/signet/ledger --serial 3f9a… > record.proof
  signetctl ledger verify-proof --key checkpoint.pub record.proof
  signetctl ledger new-history --dir /var/lib/signet/ledger --reason "records cut from the end"
  signetctl ledger reindex --dir /var/lib/signet/ledger --archive /mnt/archive/signet-ledger
  signetctl ledger export --postgres 'postgres://signet@db.example/signet?sslmode=verify-full' --postgres-password-file pw --dir backup
  signetctl ledger import --dir /var/lib/signet/ledger --postgres 'postgres://signet@db.example/signet?sslmode=verify-full' --postgres-password-file pw`,
		ledgerVerifyCommand(), ledgerListCommand(), ledgerShowCommand(),
		ledgerAuditCommand(), ledgerProveCommand(), ledgerVerifyProofCommand(), ledgerCheckpointCommand(),
		ledgerNewHistoryCommand(), ledgerReindexCommand(), ledgerExportCommand(), ledgerImportCommand())
}

// addArchives adds the repeatable --archive flag: directories holding closed segments moved
// out of the ledger directory.
func addArchives(cmd *cobra.Command, archives *[]string) {
	cmd.Flags().StringArrayVar(archives, "archive", nil, "a `directory` holding closed ledger segments moved out of --dir (repeat for several)")
	_ = cmd.MarkFlagDirname("archive")
}

// addLedgerDir adds the required --dir flag to cmd.
func addLedgerDir(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "dir", "", "the ledger `directory` (the server's ledger.dir, e.g. /var/lib/signet/ledger)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagDirname("dir")
}

// verifyReport is ledger verify's answer for -o json|yaml.
type verifyReport struct {
	OK       bool      `json:"ok"`
	Problem  string    `json:"problem,omitempty"`
	Records  int       `json:"records"`
	Segments int       `json:"segments"`
	FirstSeq uint64    `json:"firstSeq,omitempty"`
	LastSeq  uint64    `json:"lastSeq,omitempty"`
	First    time.Time `json:"firstTime,omitzero"`
	Last     time.Time `json:"lastTime,omitzero"`
	LastHash string    `json:"lastHash,omitempty"`
	TornTail int64     `json:"tornTailBytes,omitempty"`
}

// ledgerVerifyCommand is "signetctl ledger verify --dir DIR": it prints "ledger OK: …" for an
// intact ledger, or the first problem and exits 1.
func ledgerVerifyCommand() *cobra.Command {
	var dir string
	var archives []string
	cmd := &cobra.Command{
		Use:   "verify --dir DIR",
		Short: "Check every record, the seq order and the hash chain of a ledger",
		Long: `Verifies every record of the ledger in DIR: its hash, its seq and its link to the record before,
across all its segments in order. Closed segments moved to archive storage are looked for in
the --archive directories. Prints "ledger OK: …" and exits 0 for an intact ledger; prints the first problem and what is
intact before it, and exits 1, for a broken one; exits 2 when DIR cannot be read.

` + exitCodesHelp,
		Example: `  signetctl ledger verify --dir /var/lib/signet/ledger
  signetctl ledger verify --dir /var/lib/signet/ledger -o json
  signetctl ledger verify --dir /var/lib/signet/ledger --archive /mnt/archive/signet-ledger`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	addArchives(cmd, &archives)
	out := addOutputFlag(cmd, "the verification report")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		rep, err := ledger.Verify(dir, archives...)
		var ce *ledger.CorruptionError
		if err != nil && !errors.As(err, &ce) {
			return inputError("%v", err)
		}
		if !out.text() {
			r := verifyReport{OK: err == nil, Records: rep.Records, Segments: rep.Segments, FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq,
				First: rep.FirstTime.UTC(), Last: rep.LastTime.UTC(), LastHash: rep.LastHash, TornTail: rep.TornTail}
			if ce != nil {
				r.Problem = ce.Problem
			}
			if perr := out.print(w, r); perr != nil {
				return perr
			}
		} else if ce != nil {
			fmt.Fprintf(w, "ledger BROKEN: %s\n", ce.Problem)
			fmt.Fprintf(w, "intact before the problem: %s\n", summary(rep))
		} else {
			fmt.Fprintf(w, "ledger OK: %s\n", summary(rep))
			if rep.Segments > 1 {
				fmt.Fprintf(w, "segments: %d, %s to %s\n", rep.Segments, rep.FirstSegment, rep.File)
			}
			if rep.Records > 0 {
				fmt.Fprintf(w, "last hash: %s\n", rep.LastHash)
			}
			if rep.TornTail > 0 {
				fmt.Fprintf(w, "note: ignored a torn final write of %d bytes after the last record (cut short by a crash or still in progress, never acknowledged); the server truncates it when it opens the ledger\n", rep.TornTail)
			}
		}
		if ce != nil {
			return silentFailure()
		}
		return nil
	}
	return cmd
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
