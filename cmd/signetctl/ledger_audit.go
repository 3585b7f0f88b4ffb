package main

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/ledger"
)

// The reasons of a failed audit or proof, in the -o json|yaml reports.
const (
	reasonLedgerBroken   = "LEDGER_BROKEN"
	reasonMalformed      = "MALFORMED"
	reasonBadSignature   = "BAD_SIGNATURE"
	reasonUnknownKey     = "UNKNOWN_KEY"
	reasonWrongOrigin    = "WRONG_ORIGIN"
	reasonLedgerShorter  = "LEDGER_SHORTER"
	reasonOtherHistory   = "OTHER_HISTORY"
	reasonNotIncluded    = "NOT_INCLUDED"
	reasonSeqMismatch    = "SEQ_MISMATCH"
	reasonShrunk         = "SHRUNK"
	reasonInconsistent   = "INCONSISTENT"
	reasonUnsupportedKey = "UNSUPPORTED_KEY"
)

// The help of the flags that say which checkpoints to trust.
const (
	originHelp                = "the log's `origin`, the checkpoints' first line (default: each checkpoint's own; pinning it is stronger)"
	checkpointKeyHelp         = "PEM `file` of the checkpoint key's public half (\"PUBLIC KEY\", Ed25519 or ECDSA P-256), as the operator publishes it"
	checkpointOriginRationale = `Without --origin the log is the one the checkpoint names in its first line, and the check
proves that the key signed it; pinning --origin (the server logs its origin at start; by default
signet-ledger/ and 16 hex digits of the SHA-256 of the public key) also proves it is the log you
mean, should one key sign for several.`
)

// addCheckpointKey adds --key (required) and --origin, the trust of a checkpoint check.
func addCheckpointKey(cmd *cobra.Command, keyFile, origin *string, required bool) {
	cmd.Flags().StringVar(keyFile, "key", "", checkpointKeyHelp)
	cmd.Flags().StringVar(origin, "origin", "", originHelp)
	_ = cmd.MarkFlagFilename("key")
	if required {
		_ = cmd.MarkFlagRequired("key")
	}
}

// readCheckpointKey reads the PEM public key in path; errors are input errors (exit 2).
func readCheckpointKey(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError("reading --key: %v", err)
	}
	pub, err := ledgerproof.ParsePublicKeyPEM(data)
	if err != nil {
		return nil, inputError("--key %s: %v", path, err)
	}
	return pub, nil
}

// readCheckpoint reads a signed checkpoint from the file name, or stdin for "-" (readInput),
// without the NUL bytes that may trail it: server/checkpoint.CheckFile ignores them in the
// server's DIR/checkpoint, and a signed note never ends in one.
// Errors are input errors (exit 2).
func readCheckpoint(name string, stdin io.Reader) ([]byte, error) {
	data, _, err := readInput(name, stdin)
	if err != nil {
		return nil, inputError("reading --checkpoint: %v", err)
	}
	return bytes.TrimRight(data, "\x00"), nil
}

// firstLine is the first line of a signed checkpoint: its origin.
func firstLine(signed []byte) string {
	line, _, _ := bytes.Cut(signed, []byte("\n"))
	return string(line)
}

// checkpointVerifier returns the verifier of pub for a signed checkpoint: under origin, or,
// when origin is empty, under the origin the checkpoint's first line names (Signet's key name
// is the origin). On failure it returns the reason too.
func checkpointVerifier(signed []byte, pub crypto.PublicKey, origin string) (note.Verifier, string, error) {
	named := firstLine(signed)
	if origin != "" && named != origin {
		return nil, reasonWrongOrigin, fmt.Errorf("%w: the checkpoint is of the log %.80q, not of --origin %q: it proves nothing about this log", ledgerproof.ErrOriginMismatch, named, origin)
	}
	v, err := ledgerproof.NewNoteVerifier(named, pub)
	switch {
	case errors.Is(err, ledgerproof.ErrUnsupportedKey):
		return nil, reasonUnsupportedKey, err
	case err != nil:
		return nil, reasonMalformed, fmt.Errorf("%w: the first line %.80q is not a log origin: %w", ledgerproof.ErrMalformedCheckpoint, named, err)
	}
	return v, "", nil
}

// openSigned verifies the signed checkpoint with pub (checkpointVerifier, OpenCheckpoint). It
// returns the checkpoint and, on failure, the reason and the problem.
func openSigned(signed []byte, pub crypto.PublicKey, origin string) (ledgerproof.Checkpoint, string, error) {
	v, reason, err := checkpointVerifier(signed, pub, origin)
	if err != nil {
		return ledgerproof.Checkpoint{}, reason, err
	}
	c, err := ledgerproof.OpenCheckpoint(signed, origin, v)
	if err != nil {
		reason, err := explainProofError(err)
		return ledgerproof.Checkpoint{}, reason, err
	}
	return c, "", nil
}

// explainProofError maps a ledgerproof error to its reason, and returns it wrapped with what
// it means.
func explainProofError(err error) (string, error) {
	reason, why := reasonMalformed, ""
	switch {
	case errors.Is(err, ledgerproof.ErrBadSignature):
		reason, why = reasonBadSignature, " — the signed text was changed after it was signed"
	case errors.Is(err, ledgerproof.ErrUnknownKey):
		reason, why = reasonUnknownKey, " — it was signed by another key than --key (another log, or a forgery)"
	case errors.Is(err, ledgerproof.ErrOriginMismatch):
		reason, why = reasonWrongOrigin, " — it is another log's"
	case errors.Is(err, ledgerproof.ErrNotIncluded):
		reason, why = reasonNotIncluded, " — the record, its position or the proof was changed, or the record is not in this checkpoint's tree"
	case errors.Is(err, ledgerproof.ErrShrunk):
		reason, why = reasonShrunk, " — the log lost records between the two checkpoints: evidence of a rollback or a fork; keep both"
	case errors.Is(err, ledgerproof.ErrInconsistent):
		reason, why = reasonInconsistent, " — the newer checkpoint is not an extension of the older: evidence that the log was rewritten or forked; keep both"
	case errors.Is(err, ledgerproof.ErrUnsupportedKey):
		reason = reasonUnsupportedKey
	}
	return reason, fmt.Errorf("%w%s", err, why)
}

// readLedgerTree reads every record of the ledger in dir with ledger.Leaves (which verifies
// each record and the hash chain) into a Merkle tree, and calls each, when not nil, with every
// leaf. On a broken ledger the tree holds the records before the problem and the error wraps
// a *ledger.CorruptionError.
func readLedgerTree(dir string, archives []string, each func(r ledger.Record, line []byte)) (*ledgerproof.Tree, ledger.Report, error) {
	tree := &ledgerproof.Tree{}
	var appendErr error
	rep, err := ledger.Leaves(dir, func(r ledger.Record, line []byte) {
		if appendErr != nil {
			return
		}
		if _, err := tree.Append(line); err != nil {
			appendErr = fmt.Errorf("record %d: %w", r.Seq, err)
			return
		}
		if each != nil {
			each(r, line)
		}
	}, archives...)
	if err == nil {
		err = appendErr
	}
	return tree, rep, err
}

// auditReport is ledger audit's answer for -o json|yaml.
type auditReport struct {
	OK          bool                `json:"ok"`
	Reason      string              `json:"reason,omitempty"`
	Problem     string              `json:"problem,omitempty"`
	Records     int                 `json:"records"`
	LastSeq     uint64              `json:"lastSeq,omitempty"`
	LastHash    string              `json:"lastHash,omitempty"`
	Root        string              `json:"root,omitempty"`
	Checkpoints []auditedCheckpoint `json:"checkpoints"`
}

// auditedCheckpoint is one checkpoint an audit checked.
type auditedCheckpoint struct {
	File   string `json:"file"`
	Origin string `json:"origin,omitempty"`
	Size   int64  `json:"size"`
	Root   string `json:"root,omitempty"`
}

// ledgerAuditCommand is "signetctl ledger audit": the ledger on disk against signed
// checkpoints, with no server.
func ledgerAuditCommand() *cobra.Command {
	var (
		dir, keyFile, origin string
		files, archives      []string
	)
	cmd := &cobra.Command{
		Use:   "audit --dir DIR --checkpoint FILE... --key PUB [--origin ORIGIN]",
		Short: "Check offline that the ledger holds every record signed checkpoints cover, unchanged",
		Long: `Audits the ledger in DIR against signed checkpoints, with no server: reads and verifies every
record and the hash chain (as 'ledger verify'), builds the Merkle tree of the records, verifies
each checkpoint's signature with the public key in PUB, and checks that the ledger has at least
the checkpoint's size and that the root of its first size records is the checkpoint's root.

Every segment is read in order; closed segments moved to archive storage are looked for in the
--archive directories (an audit needs them all: a missing one is named).

A checkpoint is what the server signed (it keeps the latest in DIR/checkpoint; 'signetctl ledger
checkpoint' fetches it) and what a witness or an auditor saved earlier. Give --checkpoint once
per checkpoint: a series a witness kept is checked one by one. An audit fails when a record is
broken, when a checkpoint's signature does not verify or names another log, when the ledger is
shorter than a checkpoint (records were removed from its end, or the directory was replaced by
an older copy), or when its root differs (the ledger holds another history than the one that
was signed).

` + checkpointOriginRationale + `

Prints "ledger audit OK: …" and exits 0, or "ledger audit FAILED: " and the first problem and
exits 1; exits 2 when DIR, a checkpoint or the key cannot be read.

` + exitCodesHelp,
		Example: `  signetctl ledger audit --dir /var/lib/signet/ledger --checkpoint saved/checkpoint --key checkpoint.pub
  signetctl ledger audit --dir /var/lib/signet/ledger --key checkpoint.pub \
      --origin signet-ledger/3f9a0c1d2e4b5a69 --checkpoint witness/cp-1 --checkpoint witness/cp-2 -o json`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	addArchives(cmd, &archives)
	cmd.Flags().StringArrayVar(&files, "checkpoint", nil, "a signed checkpoint `file` (repeat for several)")
	_ = cmd.MarkFlagRequired("checkpoint")
	_ = cmd.MarkFlagFilename("checkpoint")
	addCheckpointKey(cmd, &keyFile, &origin, true)
	out := addOutputFlag(cmd, "the audit report")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		pub, err := readCheckpointKey(keyFile)
		if err != nil {
			return err
		}
		signed := make([][]byte, len(files))
		for i, f := range files {
			if signed[i], err = readCheckpoint(f, cmd.InOrStdin()); err != nil {
				return err
			}
		}
		tree, rep, lerr := readLedgerTree(dir, archives, nil)
		var ce *ledger.CorruptionError
		if lerr != nil && !errors.As(lerr, &ce) {
			return inputError("%v", lerr)
		}
		r := auditReport{OK: true, Records: rep.Records, LastSeq: rep.LastSeq, LastHash: rep.LastHash, Checkpoints: []auditedCheckpoint{}}
		if root, err := tree.Root(); err == nil {
			r.Root = root.String()
		}
		if ce != nil {
			r.OK, r.Reason, r.Problem = false, reasonLedgerBroken, "the ledger is broken: "+ce.Problem
		} else {
			r.audit(tree, files, signed, pub, origin)
		}
		return printAudit(cmd.OutOrStdout(), out, r)
	}
	return cmd
}

// audit checks each signed checkpoint (read from files) against tree, in order, and records
// the first problem.
func (r *auditReport) audit(tree *ledgerproof.Tree, files []string, signed [][]byte, pub crypto.PublicKey, origin string) {
	for i, s := range signed {
		c, reason, err := openSigned(s, pub, origin)
		if err != nil {
			r.OK, r.Reason, r.Problem = false, reason, fmt.Sprintf("checkpoint %s: %v", files[i], err)
			return
		}
		switch err := tree.Extends(c); {
		case errors.Is(err, ledgerproof.ErrShrunk):
			r.OK, r.Reason = false, reasonLedgerShorter
			r.Problem = fmt.Sprintf("checkpoint %s: the ledger has %d records, fewer than the %d the checkpoint covers — records were removed from its end or the directory was replaced by an older copy",
				files[i], tree.Size(), c.Size)
			return
		case errors.Is(err, ledgerproof.ErrInconsistent):
			root, _ := tree.RootAt(c.Size)
			r.OK, r.Reason = false, reasonOtherHistory
			r.Problem = fmt.Sprintf("checkpoint %s: the root of the ledger's first %d records is %s, not the checkpoint's %s — the ledger holds another history than the one that was signed (records changed and re-chained, or the ledger replaced)",
				files[i], c.Size, root, c.Hash)
			return
		case err != nil:
			r.OK, r.Reason, r.Problem = false, reasonLedgerBroken, fmt.Sprintf("checkpoint %s: %v", files[i], err)
			return
		}
		r.Checkpoints = append(r.Checkpoints, auditedCheckpoint{File: files[i], Origin: c.Origin, Size: c.Size, Root: c.Hash.String()})
	}
}

// printAudit writes the report and returns the command's exit: exit 1 for a failed audit.
func printAudit(w io.Writer, out *outputFlag, r auditReport) error {
	switch {
	case !out.text():
		if err := out.print(w, r); err != nil {
			return err
		}
	case !r.OK:
		fmt.Fprintf(w, "ledger audit FAILED: %s\n", r.Problem)
	case len(r.Checkpoints) == 1:
		c := r.Checkpoints[0]
		fmt.Fprintf(w, "ledger audit OK: %d records; checkpoint of size %d (origin %s) is a prefix of the ledger; root %s\n", r.Records, c.Size, c.Origin, c.Root)
	default:
		fmt.Fprintf(w, "ledger audit OK: %d records; %d checkpoints are prefixes of the ledger:\n", r.Records, len(r.Checkpoints))
		for _, c := range r.Checkpoints {
			fmt.Fprintf(w, "  %s: size %d (origin %s), root %s\n", c.File, c.Size, c.Origin, c.Root)
		}
	}
	if !r.OK {
		return silentFailure()
	}
	return nil
}

// ledgerCheckpointCommand is "signetctl ledger checkpoint": the server's latest signed
// checkpoint, verbatim.
func ledgerCheckpointCommand() *cobra.Command {
	var keyFile, origin string
	cmd := &cobra.Command{
		Use:   "checkpoint [--key PUB [--origin ORIGIN]] [connection flags]",
		Short: "Print the server's latest signed ledger checkpoint, to save for a later audit",
		Long: `Asks the server for its latest signed checkpoint (LedgerService GetCheckpoint): the ledger's
size and Merkle root, signed with its checkpoint key, as a C2SP signed note. It is printed
verbatim, so that it can be saved and given later to 'signetctl ledger audit --checkpoint' or
compared with what others saw. Any client may call it.

With --key the checkpoint is verified first: it is printed only if the key in PUB signed it
(for --origin, if given); otherwise the problem is printed and the exit is 1.

` + checkpointOriginRationale + `

` + exitCodesHelp,
		Example: `  signetctl ledger checkpoint --server signet.example.com:8443 > checkpoints/$(date +%s)
  signetctl ledger checkpoint --dev-state-dir .signet-dev --key checkpoint.pub`,
		Args: cobra.NoArgs,
	}
	conn := addConnFlags(cmd)
	addCheckpointKey(cmd, &keyFile, &origin, false)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Changed("origin") && keyFile == "" {
			return usageError(cmd, "--origin needs --key")
		}
		var pub crypto.PublicKey
		if keyFile != "" {
			var err error
			if pub, err = readCheckpointKey(keyFile); err != nil {
				return err
			}
		}
		cc, err := conn.dial()
		if err != nil {
			return err
		}
		defer cc.Close()
		callCtx, cancel := conn.callContext(cmd.Context())
		defer cancel()
		resp, err := signetv1.NewLedgerServiceClient(cc).GetCheckpoint(callCtx, &signetv1.GetCheckpointRequest{})
		if err != nil {
			return conn.callError(err)
		}
		signed := resp.GetSignedCheckpoint()
		if len(signed) == 0 {
			return failure("the server sent no checkpoint")
		}
		if pub != nil {
			if _, _, err := openSigned(signed, pub, origin); err != nil {
				return failure("the server's checkpoint does not verify: %v", err)
			}
		}
		_, err = cmd.OutOrStdout().Write(signed)
		return err
	}
	return cmd
}
