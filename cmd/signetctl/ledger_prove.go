package main

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
)

// proveTarget is the record prove looks for: exactly one of the three is set.
type proveTarget struct {
	serial, uid string
	seq         uint64
}

// add adds --serial, --uid and --seq to cmd.
func (p *proveTarget) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&p.serial, "serial", "", "an issued certificate's serial number in `hex` (colons, 0x and leading zeros allowed): its issuance record")
	fs.StringVar(&p.uid, "uid", "", "the `UID` of a CertificateSigningRequest or PodCertificateRequest: its newest record")
	fs.Uint64Var(&p.seq, "seq", 0, "the record's `seq` (1 for the first)")
}

// check requires exactly one of the flags and normalizes the serial; errors are usage errors.
func (p *proveTarget) check(cmd *cobra.Command) error {
	n := 0
	for _, name := range []string{"serial", "uid", "seq"} {
		if cmd.Flags().Changed(name) {
			n++
		}
	}
	switch {
	case n != 1:
		return usageError(cmd, "give exactly one of --serial, --uid and --seq")
	case cmd.Flags().Changed("seq") && p.seq == 0:
		return usageError(cmd, "--seq must be positive (the first record is 1)")
	case cmd.Flags().Changed("uid") && p.uid == "":
		return usageError(cmd, "--uid must not be empty")
	case cmd.Flags().Changed("serial"):
		s, err := normalizeSerial(p.serial)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		p.serial = s
	}
	return nil
}

// String names the target as its flag.
func (p *proveTarget) String() string {
	switch {
	case p.serial != "":
		return "--serial " + p.serial
	case p.uid != "":
		return "--uid " + p.uid
	}
	return fmt.Sprintf("--seq %d", p.seq)
}

// filter is the recordFilter that selects the target: the record of that seq, the issued
// record of that serial, or the records of that object (prove takes the newest).
func (p *proveTarget) filter() recordFilter {
	switch {
	case p.seq != 0:
		return recordFilter{seqs: []uint64{p.seq}}
	case p.uid != "":
		return recordFilter{uid: p.uid}
	}
	return recordFilter{serial: p.serial, decisions: []string{string(ledger.Issued)}}
}

// connFlagNames are the names of the connection flags (addConnFlags).
func connFlagNames() []string {
	c := &cobra.Command{}
	addConnFlags(c)
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// ledgerProveCommand is "signetctl ledger prove": a record's inclusion bundle, from the
// ledger directory or from the server.
func ledgerProveCommand() *cobra.Command {
	var (
		dir, cpFile string
		treeSize    int64
		target      proveTarget
	)
	cmd := &cobra.Command{
		Use:   "prove (--dir DIR [--checkpoint FILE] | [connection flags] [--tree-size N]) (--serial HEX | --uid UID | --seq N)",
		Short: "Print a record's inclusion proof bundle against a signed checkpoint, for an auditor",
		Long: `Finds one ledger record (the issued record of a certificate serial number, the newest record
of an object UID, or a seq) and prints its inclusion proof bundle: the record exactly as stored,
its position, the Merkle audit path and the signed checkpoint it leads to. Whoever holds the
bundle and the checkpoint key's public half can check, with 'signetctl ledger verify-proof' or
their own code (ledgerproof's package documentation has the format), that the record is in the
log the server signed.

Two modes, chosen by --dir:
  --dir DIR     reads the ledger on this host, with no server: the record is proved against the
                checkpoint in FILE (default DIR/checkpoint, the server's latest); a record newer
                than that checkpoint is refused as not yet covered, and a ledger whose records
                do not match the checkpoint (see 'ledger audit') gives no proof. With the
                server stopped it reads the ledger's index, tree tiles and the record alone
                (older segments may be in archive storage); while the server runs, or when
                the index is missing or behind, it reads every record.
  no --dir      asks the server (LedgerService ProveInclusion), with the connection settings of
                every command that calls it (flags, environment, config file; see 'signetctl
                help connection'), against its latest signed checkpoint or, with --tree-size,
                a recent one of that size. The server shows a client only the records it may
                see.
--dir cannot be combined with connection flags, nor --checkpoint with a server.

The bundle is printed on standard output; redirect it to a file to hand it over.

` + exitCodesHelp,
		Example: `  signetctl ledger prove --dir /var/lib/signet/ledger --serial 5e:0a:91 > record.proof
  signetctl ledger prove --dir /var/lib/signet/ledger --seq 1042 --checkpoint witness/cp-77
  signetctl ledger prove --server signet.example.com:8443 --uid 6f1c…-… > record.proof
  signetctl ledger prove --dev-state-dir .signet-dev --seq 3 | signetctl ledger verify-proof --key checkpoint.pub -`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", "", "read the ledger in this `directory` (the server's ledger.dir) instead of asking the server")
	fs.StringVar(&cpFile, "checkpoint", "", "with --dir: the signed checkpoint `file` to prove against (default DIR/"+checkpoint.FileName+")")
	fs.Int64Var(&treeSize, "tree-size", 0, "without --dir: prove against the server's signed checkpoint of this `size` (default: its latest)")
	_ = cmd.MarkFlagDirname("dir")
	_ = cmd.MarkFlagFilename("checkpoint")
	target.add(cmd)
	conn := addConnFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		set := cmd.Flags().Changed
		if set("dir") {
			for _, name := range append(connFlagNames(), "tree-size") {
				if set(name) {
					return usageError(cmd, "--%s asks the server, --dir reads the ledger on this host: give one or the other", name)
				}
			}
			if dir == "" {
				return usageError(cmd, "--dir must not be empty")
			}
		} else if set("checkpoint") {
			return usageError(cmd, "--checkpoint needs --dir: the server proves against its own checkpoints (--tree-size picks one)")
		}
		if treeSize < 0 {
			return usageError(cmd, "--tree-size must not be negative")
		}
		if err := target.check(cmd); err != nil {
			return err
		}
		var (
			b   ledgerproof.InclusionBundle
			err error
		)
		if set("dir") {
			b, err = proveOffline(dir, cpFile, cmd.InOrStdin(), &target)
		} else {
			b, err = proveOnline(cmd, conn, &target, treeSize)
		}
		if err != nil {
			return err
		}
		text := b.Marshal()
		if _, err := ledgerproof.ParseInclusionBundle(text); err != nil {
			return failure("the proof does not make a well-formed bundle: %v", err)
		}
		_, err = cmd.OutOrStdout().Write(text)
		return err
	}
	return cmd
}

// unverifiedCheckpoint parses the body of a signed checkpoint without checking its signature:
// prove only needs its size and root, and the bundle's reader verifies it.
func unverifiedCheckpoint(signed []byte) (ledgerproof.Checkpoint, error) {
	i := bytes.Index(signed, []byte("\n\n"))
	if i < 0 {
		return ledgerproof.Checkpoint{}, fmt.Errorf("%w: no empty line before the signatures", ledgerproof.ErrMalformedNote)
	}
	return ledgerproof.ParseCheckpoint(signed[:i+1])
}

// proveOffline finds the target in the ledger in dir and proves it against the checkpoint in
// cpFile (default dir's; "-" reads stdin).
func proveOffline(dir, cpFile string, stdin io.Reader, target *proveTarget) (ledgerproof.InclusionBundle, error) {
	if cpFile == "" {
		cpFile = filepath.Join(dir, checkpoint.FileName)
	}
	signed, err := readCheckpoint(cpFile, stdin)
	if err != nil {
		return ledgerproof.InclusionBundle{}, err
	}
	c, err := unverifiedCheckpoint(signed)
	if err != nil {
		return ledgerproof.InclusionBundle{}, inputError("checkpoint %s: %v", cpFile, err)
	}
	if b, ok, err := proveFromSnapshot(dir, cpFile, c, signed, target); ok {
		return b, err
	}
	var (
		leaf []byte
		seq  uint64
	)
	f := target.filter()
	tree, _, err := readLedgerTree(dir, nil, func(r ledger.Record, line []byte) {
		if f.match(r) {
			leaf, seq = bytes.Clone(line), r.Seq
		}
	})
	var ce *ledger.CorruptionError
	switch {
	case errors.As(err, &ce):
		return ledgerproof.InclusionBundle{}, failure("%v; the ledger is broken ('signetctl ledger verify' shows where)", err)
	case err != nil:
		return ledgerproof.InclusionBundle{}, inputError("%v", err)
	case leaf == nil:
		return ledgerproof.InclusionBundle{}, failure("no record matches %s in the ledger %s", target, dir)
	}
	switch err := tree.Extends(c); {
	case errors.Is(err, ledgerproof.ErrShrunk):
		return ledgerproof.InclusionBundle{}, failure("the ledger %s has %d records, fewer than the %d the checkpoint %s covers; run 'signetctl ledger audit'",
			dir, tree.Size(), c.Size, cpFile)
	case int64(seq) > c.Size:
		return ledgerproof.InclusionBundle{}, failure("record %d is not yet covered by this checkpoint (%s, of size %d); retry once the server has signed a newer one, or give a newer --checkpoint",
			seq, cpFile, c.Size)
	case err != nil:
		return ledgerproof.InclusionBundle{}, failure("the ledger's first %d records do not have the root of the checkpoint %s: it holds another history; run 'signetctl ledger audit'", c.Size, cpFile)
	}
	proof, err := tree.ProveInclusion(int64(seq)-1, c.Size)
	if err != nil {
		return ledgerproof.InclusionBundle{}, failure("%v", err)
	}
	return ledgerproof.InclusionBundle{Index: int64(seq) - 1, Leaf: leaf, Proof: proof, SignedCheckpoint: signed}, nil
}

// proveFromSnapshot is proveOffline through a snapshot of the ledger's index and tree tiles
// (ledger.OpenSnapshot): it reads the record and the tree's tiles, not the history, and its
// proof leads to the checkpoint's root or it gives none. ok is false when it cannot answer
// (the server holds the ledger, the index is missing or behind, the checkpoint is larger than
// the tree the tiles hold, or the tiles do not lead to its root): proveOffline then reads
// every record, which also says what is wrong.
func proveFromSnapshot(dir, cpFile string, c ledgerproof.Checkpoint, signed []byte, target *proveTarget) (_ ledgerproof.InclusionBundle, ok bool, _ error) {
	s, err := ledger.OpenSnapshot(dir)
	if err != nil {
		return ledgerproof.InclusionBundle{}, false, nil
	}
	defer s.Close()
	tree := s.Tree()
	if c.Size > tree.Size() || tree.Extends(c) != nil {
		return ledgerproof.InclusionBundle{}, false, nil
	}
	f := target.filter()
	var found []ledger.Record
	switch {
	case target.seq != 0:
		if int64(target.seq) <= tree.Size() {
			r, _, rerr := s.Record(target.seq)
			found, err = []ledger.Record{r}, rerr
		}
	case target.uid != "":
		found, err = s.Find(target.uid, "")
	default:
		found, err = s.Find("", target.serial)
	}
	if err != nil {
		return ledgerproof.InclusionBundle{}, false, nil
	}
	found = slices.DeleteFunc(found, func(r ledger.Record) bool { return !f.match(r) })
	if len(found) == 0 {
		return ledgerproof.InclusionBundle{}, true, failure("no record matches %s in the ledger %s", target, dir)
	}
	seq := found[len(found)-1].Seq // the newest, as reading every record finds it
	if int64(seq) > c.Size {
		return ledgerproof.InclusionBundle{}, true, failure("record %d is not yet covered by this checkpoint (%s, of size %d); retry once the server has signed a newer one, or give a newer --checkpoint",
			seq, cpFile, c.Size)
	}
	leaf, err := s.Line(seq)
	if err != nil {
		return ledgerproof.InclusionBundle{}, false, nil
	}
	proof, err := tree.ProveInclusion(int64(seq)-1, c.Size)
	if err != nil {
		return ledgerproof.InclusionBundle{}, false, nil
	}
	return ledgerproof.InclusionBundle{Index: int64(seq) - 1, Leaf: leaf, Proof: proof, SignedCheckpoint: signed}, true, nil
}

// proveOnline asks the server for the target's inclusion proof.
func proveOnline(cmd *cobra.Command, conn *connFlags, target *proveTarget, treeSize int64) (ledgerproof.InclusionBundle, error) {
	cc, err := conn.dial()
	if err != nil {
		return ledgerproof.InclusionBundle{}, err
	}
	defer cc.Close()
	callCtx, cancel := conn.callContext(cmd.Context())
	defer cancel()
	resp, err := signetv1.NewLedgerServiceClient(cc).ProveInclusion(callCtx, &signetv1.ProveInclusionRequest{
		SerialNumber: target.serial, ObjectUid: target.uid, Seq: target.seq, TreeSize: treeSize,
	})
	if err != nil {
		return ledgerproof.InclusionBundle{}, conn.callError(err)
	}
	if resp.GetSeq() == 0 || resp.GetSeq() > 1<<62 {
		return ledgerproof.InclusionBundle{}, failure("the server's answer names no record (seq %d)", resp.GetSeq())
	}
	proof, err := ledgerproof.ParseHashes(resp.GetProof())
	if err != nil {
		return ledgerproof.InclusionBundle{}, failure("the server's answer: %v", err)
	}
	return ledgerproof.InclusionBundle{Index: int64(resp.GetSeq()) - 1, Leaf: resp.GetLeaf(), Proof: proof, SignedCheckpoint: resp.GetSignedCheckpoint()}, nil
}

// proofReport is verify-proof's answer for -o json|yaml.
type proofReport struct {
	OK      bool   `json:"ok"`
	Kind    string `json:"kind,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Problem string `json:"problem,omitempty"`
	Origin  string `json:"origin,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Root    string `json:"root,omitempty"`
	// Of an inclusion proof: the record.
	Seq       uint64 `json:"seq,omitempty"`
	Decision  string `json:"decision,omitempty"`
	Serial    string `json:"serial,omitempty"`
	ObjectUID string `json:"objectUID,omitempty"`
	Signer    string `json:"signer,omitempty"`
	// Of a consistency proof: the older checkpoint.
	OldSize int64  `json:"oldSize,omitempty"`
	OldRoot string `json:"oldRoot,omitempty"`
}

// fail records a failure.
func (r *proofReport) fail(reason string, err error) {
	r.OK, r.Reason, r.Problem = false, reason, err.Error()
}

// ledgerVerifyProofCommand is "signetctl ledger verify-proof": checks a bundle offline.
func ledgerVerifyProofCommand() *cobra.Command {
	var keyFile, origin string
	cmd := &cobra.Command{
		Use:   "verify-proof --key PUB [--origin ORIGIN] FILE|-",
		Short: "Check offline an inclusion or consistency proof bundle with the checkpoint public key",
		Long: `Verifies a proof bundle someone handed you, with the checkpoint key's public half PUB that the
operator publishes, and no server: an inclusion bundle ('signetctl ledger prove') proves that a
record is in the log a signed checkpoint commits to; a consistency bundle that a newer signed
checkpoint extends an older one (the log only grew). The kind is read from the bundle's first
line; FILE "-" reads standard input.

For an inclusion bundle it checks the checkpoint's signature, the audit path from the record to
the checkpoint's root, and that the record's own seq is its position in the tree; it prints the
record's seq, decision, serial number and object. A failure prints the reason and exits 1:
a bundle altered in any byte, signed by another key or for another origin, or, for consistency,
a log that shrank or was rewritten (keep such a bundle: with valid signatures it is evidence).

` + checkpointOriginRationale + `

` + exitCodesHelp,
		Example: `  signetctl ledger verify-proof --key checkpoint.pub record.proof
  signetctl ledger verify-proof --key checkpoint.pub --origin signet-ledger/3f9a0c1d2e4b5a69 - < record.proof`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(cmd, "one bundle FILE (or - for stdin) expected, got %d arguments", len(args))
			}
			return nil
		},
	}
	addCheckpointKey(cmd, &keyFile, &origin, true)
	out := addOutputFlag(cmd, "the verification report")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		pub, err := readCheckpointKey(keyFile)
		if err != nil {
			return err
		}
		data, _, err := readInput(args[0], cmd.InOrStdin())
		if err != nil {
			return inputError("reading the proof bundle: %v", err)
		}
		r := proofReport{OK: true}
		switch header := firstLine(data); header {
		case ledgerproof.InclusionBundleHeader:
			r.Kind = "inclusion"
			r.verifyInclusion(data, pub, origin)
		case ledgerproof.ConsistencyBundleHeader:
			r.Kind = "consistency"
			r.verifyConsistency(data, pub, origin)
		default:
			r.fail(reasonMalformed, fmt.Errorf("not a Signet proof bundle: the first line is %.60q, not %q or %q",
				header, ledgerproof.InclusionBundleHeader, ledgerproof.ConsistencyBundleHeader))
		}
		return printProof(cmd.OutOrStdout(), out, r)
	}
	return cmd
}

// verifyInclusion checks an inclusion bundle.
func (r *proofReport) verifyInclusion(data []byte, pub crypto.PublicKey, origin string) {
	b, err := ledgerproof.ParseInclusionBundle(data)
	if err != nil {
		r.fail(reasonMalformed, err)
		return
	}
	v, reason, err := checkpointVerifier(b.SignedCheckpoint, pub, origin)
	if err != nil {
		r.fail(reason, err)
		return
	}
	c, err := b.Verify(origin, v)
	if err != nil {
		r.fail(explainProofError(err))
		return
	}
	var rec ledger.Record
	if err := json.Unmarshal(b.Leaf, &rec); err != nil {
		r.fail(reasonMalformed, fmt.Errorf("the proven leaf is not a ledger record: %v", err))
		return
	}
	if rec.Seq != uint64(b.Index)+1 {
		r.fail(reasonSeqMismatch, fmt.Errorf("the record's seq %d is not its position in the tree (index %d, seq %d): the bundle puts the record at another seq than its own", rec.Seq, b.Index, b.Index+1))
		return
	}
	r.Origin, r.Size, r.Root = c.Origin, c.Size, c.Hash.String()
	r.Seq, r.Decision, r.Serial, r.ObjectUID, r.Signer = rec.Seq, string(rec.Decision), rec.Serial, rec.ObjectUID, rec.Signer
}

// verifyConsistency checks a consistency bundle; both checkpoints must name the same origin.
func (r *proofReport) verifyConsistency(data []byte, pub crypto.PublicKey, origin string) {
	b, err := ledgerproof.ParseConsistencyBundle(data)
	if err != nil {
		r.fail(reasonMalformed, err)
		return
	}
	v, reason, err := checkpointVerifier(b.Old, pub, origin)
	if err != nil {
		r.fail(reason, err)
		return
	}
	if named := firstLine(b.New); named != v.Name() {
		r.fail(reasonWrongOrigin, fmt.Errorf("%w: the newer checkpoint is of the log %.80q, the older of %q", ledgerproof.ErrOriginMismatch, named, v.Name()))
		return
	}
	older, newer, err := b.Verify(origin, v)
	if err != nil {
		r.fail(explainProofError(err))
		return
	}
	r.Origin, r.Size, r.Root, r.OldSize, r.OldRoot = newer.Origin, newer.Size, newer.Hash.String(), older.Size, older.Hash.String()
}

// printProof writes the report and returns the command's exit: exit 1 for a failed proof.
func printProof(w io.Writer, out *outputFlag, r proofReport) error {
	switch {
	case !out.text():
		if err := out.print(w, r); err != nil {
			return err
		}
	case !r.OK:
		fmt.Fprintf(w, "%s FAILED: %s\n", strings.TrimSpace(r.Kind+" proof"), r.Problem)
	case r.Kind == "inclusion":
		fmt.Fprintf(w, "inclusion proof OK: record %d is in the checkpoint of size %d (origin %s), root %s\n", r.Seq, r.Size, r.Origin, r.Root)
		line := func(label, value string) {
			if value != "" {
				fmt.Fprintf(w, "  %-10s %s\n", label+":", value)
			}
		}
		line("Seq", fmt.Sprint(r.Seq))
		line("Decision", r.Decision)
		line("Serial", r.Serial)
		line("Object", r.ObjectUID)
		line("Signer", r.Signer)
	default:
		fmt.Fprintf(w, "consistency proof OK: the log %s of size %d (root %s) extends its size %d (root %s): its first %d records are unchanged\n",
			r.Origin, r.Size, r.Root, r.OldSize, r.OldRoot, r.OldSize)
	}
	if !r.OK {
		return silentFailure()
	}
	return nil
}
