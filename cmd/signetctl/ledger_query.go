package main

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/certinfo"
	"github.com/signet-pki/signet/server/ledger"
)

// recordFilter selects ledger records; an empty field selects every record.
type recordFilter struct {
	serial, uid, signer, client, reason string
	decisions                           []string
	since, until                        string
	seqs                                []uint64

	// Parsed by check.
	sinceT, untilT time.Time
}

// addRecordFilter adds the filter flags to cmd.
func addRecordFilter(cmd *cobra.Command, f *recordFilter) {
	fs := cmd.Flags()
	fs.StringVar(&f.serial, "serial", "", "an issued certificate's serial number in `hex` (colons and 0x allowed)")
	fs.StringVar(&f.uid, "uid", "", "the `UID` of the CertificateSigningRequest or PodCertificateRequest")
	fs.StringVar(&f.signer, "signer", "", "the signer `name`")
	fs.StringVar(&f.client, "client", "", "the mTLS `identity` of the caller (the watcher, an admin)")
	fs.StringVar(&f.reason, "reason", "", "a refusal's `reason`, e.g. POLICY_VIOLATION")
	fs.StringSliceVar(&f.decisions, "decision", nil, "`decision`s: issued, refused, rotated, published, started, bound (comma-separated or repeated)")
	fs.StringVar(&f.since, "since", "", "records at or after `time`: RFC 3339, a date (2026-01-02), or a duration ago (24h)")
	fs.StringVar(&f.until, "until", "", "records before `time`: RFC 3339, a date, or a duration ago")
	_ = cmd.RegisterFlagCompletionFunc("decision", cobra.FixedCompletions(
		[]string{string(ledger.Issued), string(ledger.Refused), string(ledger.Rotated), string(ledger.Published), string(ledger.Started), string(ledger.Bound)}, cobra.ShellCompDirectiveNoFileComp))
}

// check parses the times and normalizes the serial, relative to now; errors are usage errors.
func (f *recordFilter) check(cmd *cobra.Command, now time.Time) error {
	var err error
	if f.sinceT, err = parseWhen(f.since, now); err != nil {
		return usageError(cmd, "--since: %v", err)
	}
	if f.untilT, err = parseWhen(f.until, now); err != nil {
		return usageError(cmd, "--until: %v", err)
	}
	if !f.sinceT.IsZero() && !f.untilT.IsZero() && !f.untilT.After(f.sinceT) {
		return usageError(cmd, "--until %s is not after --since %s", f.untilT.Format(time.RFC3339), f.sinceT.Format(time.RFC3339))
	}
	if f.serial != "" {
		if f.serial, err = normalizeSerial(f.serial); err != nil {
			return usageError(cmd, "%v", err)
		}
	}
	for _, d := range f.decisions {
		switch ledger.Decision(d) {
		case ledger.Issued, ledger.Refused, ledger.Rotated, ledger.Published, ledger.Started, ledger.Bound:
		default:
			return usageError(cmd, "--decision %q is not one of issued, refused, rotated, published, started, bound", d)
		}
	}
	return nil
}

// parseWhen parses an RFC 3339 time, a date (UTC midnight), or a duration before now; "" is
// the zero time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date (2006-01-02) or a duration (24h)", v)
}

// match reports whether r passes the filter.
func (f *recordFilter) match(r ledger.Record) bool {
	serial := ""
	if r.Serial != "" {
		serial, _ = normalizeSerial(r.Serial)
	}
	switch {
	case len(f.seqs) > 0 && !slices.Contains(f.seqs, r.Seq),
		f.serial != "" && serial != f.serial,
		f.uid != "" && r.ObjectUID != f.uid,
		f.signer != "" && r.Signer != f.signer,
		f.client != "" && r.Client != f.client,
		f.reason != "" && !strings.EqualFold(r.Reason, f.reason),
		len(f.decisions) > 0 && !slices.Contains(f.decisions, string(r.Decision)),
		!f.untilT.IsZero() && !r.Time.Before(f.untilT):
		return false
	}
	return true
}

// find returns the records of the ledger in dir that pass f, in seq order: through the
// ledger's index when f names a serial, a UID or seqs and no server has the ledger open
// (findIndexed), else by reading every record. A broken ledger gives the records before the
// problem and a failure (exit 1); a directory that cannot be read an input error (exit 2).
func (f *recordFilter) find(dir string) ([]ledger.Record, error) {
	if found, ok, err := f.findIndexed(dir); ok {
		return found, err
	}
	var found []ledger.Record
	err := ledger.Replay(dir, f.sinceT, func(r ledger.Record) error {
		if f.match(r) {
			found = append(found, r)
		}
		return nil
	})
	var ce *ledger.CorruptionError
	switch {
	case errors.As(err, &ce):
		return found, failure("%v", err)
	case err != nil:
		return found, inputError("%v", err)
	}
	return found, nil
}

// findIndexed is find through a snapshot of the ledger's index (ledger.OpenSnapshot), which
// reads the records the index names and not the history; ok is false when it cannot answer
// (f names no serial, UID or seq; the server holds the ledger; the index is missing or
// behind the segments), and find then reads every record.
func (f *recordFilter) findIndexed(dir string) (found []ledger.Record, ok bool, err error) {
	if f.serial == "" && f.uid == "" && len(f.seqs) == 0 {
		return nil, false, nil
	}
	s, err := ledger.OpenSnapshot(dir)
	if err != nil {
		return nil, false, nil
	}
	defer s.Close()
	var candidates []ledger.Record
	switch {
	case f.uid != "":
		candidates, err = s.Find(f.uid, "")
	case f.serial != "":
		candidates, err = s.Find("", f.serial)
	default:
		for _, seq := range f.seqs {
			if int64(seq) > s.Tree().Size() {
				continue
			}
			r, _, rerr := s.Record(seq)
			if err = rerr; err != nil {
				break
			}
			candidates = append(candidates, r)
		}
	}
	var ce *ledger.CorruptionError
	switch {
	case errors.As(err, &ce):
		return nil, true, failure("%v; the ledger is broken ('signetctl ledger verify' shows where)", err)
	case err != nil:
		return nil, false, nil // read every record, which says what is wrong
	}
	for _, r := range candidates {
		if f.match(r) && (f.sinceT.IsZero() || !r.Time.Before(f.sinceT)) {
			found = append(found, r)
		}
	}
	slices.SortFunc(found, func(a, b ledger.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return found, true, nil
}

// ledgerListCommand is "signetctl ledger list": one line per record found.
func ledgerListCommand() *cobra.Command {
	var (
		dir   string
		f     recordFilter
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list --dir DIR [filters]",
		Short: "List the records of a ledger, filtered by serial, object UID, signer, decision or time",
		Long: `Lists the records of the ledger in DIR that pass every filter given, one line each: seq, time,
decision, signer, object, and the serial number of an issued certificate or the reason of a
refusal. The ledger is verified as it is read: a broken one lists the records before the problem
and exits 1.

` + exitCodesHelp,
		Example: `  signetctl ledger list --dir /var/lib/signet/ledger --since 1h
  signetctl ledger list --dir /var/lib/signet/ledger --decision refused --signer example.com/serving
  signetctl ledger list --dir /var/lib/signet/ledger --uid 6f1c…-… -o json`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	addRecordFilter(cmd, &f)
	cmd.Flags().IntVar(&limit, "limit", 0, "show only the last `n` records found (0: all)")
	out := addOutputFlag(cmd, "the records as the ledger holds them")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		if limit < 0 {
			return usageError(cmd, "--limit must not be negative")
		}
		if err := f.check(cmd, time.Now()); err != nil {
			return err
		}
		found, ferr := f.find(dir)
		if limit > 0 && len(found) > limit {
			found = found[len(found)-limit:]
		}
		w := cmd.OutOrStdout()
		switch {
		case !out.text():
			if err := out.print(w, nonNil(found)); err != nil {
				return err
			}
		case len(found) == 0 && ferr == nil:
			fmt.Fprintln(w, "no records match")
		case len(found) > 0:
			writeRecordTable(w, found)
		}
		return ferr
	}
	return cmd
}

// nonNil makes a nil slice an empty one, so that it encodes as [] rather than null.
func nonNil(rs []ledger.Record) []ledger.Record {
	if rs == nil {
		return []ledger.Record{}
	}
	return rs
}

// writeRecordTable prints one line per record.
func writeRecordTable(w io.Writer, rs []ledger.Record) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tDECISION\tSIGNER\tOBJECT\tDETAIL")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.UTC().Format(time.RFC3339), r.Decision,
			orDash(r.Signer), orDash(objectRef(r)), orDash(recordDetail(r)))
	}
	tw.Flush()
}

// objectRef names a record's object: "csr/UID" or "pcr/UID", or the UID alone.
func objectRef(r ledger.Record) string {
	if r.ObjectUID == "" {
		return ""
	}
	switch r.ObjectKind {
	case "PodCertificateRequest":
		return "pcr/" + r.ObjectUID
	case "CertificateSigningRequest", "":
		return "csr/" + r.ObjectUID
	}
	return r.ObjectKind + "/" + r.ObjectUID
}

// recordDetail is the gist of a record in one short phrase.
func recordDetail(r ledger.Record) string {
	switch r.Decision {
	case ledger.Issued:
		d := "serial " + r.Serial
		if !r.NotAfter.IsZero() {
			d += ", until " + r.NotAfter.UTC().Format(time.RFC3339)
		}
		return d
	case ledger.Refused:
		return r.Reason
	case ledger.Published:
		return "cluster " + r.Cluster + ", bundle " + shortHex(r.BundleHash)
	case ledger.Started:
		return "new history by " + r.Client + ": " + r.Message
	case ledger.Bound:
		return "node " + r.Node + " bound to EK " + shortHex(r.EK)
	case ledger.Rotated:
		var states []string
		if r.Authority != nil {
			for _, ca := range r.Authority.CAs {
				states = append(states, ca.State+" "+shortHex(ca.Fingerprint))
			}
		}
		return strings.Join(states, ", ")
	}
	return ""
}

// ledgerShowCommand is "signetctl ledger show": every field of the records found.
func ledgerShowCommand() *cobra.Command {
	var (
		dir     string
		f       recordFilter
		showPEM bool
	)
	cmd := &cobra.Command{
		Use:   "show --dir DIR [SEQ...] [filters]",
		Short: "Show every field of ledger records, chosen by seq or by the filters of list",
		Long: `Shows the records of the ledger in DIR chosen by their seq numbers and/or the filters of
'ledger list': every field, and the issued certificate described (subject, SANs, validity, key,
usages); --pem prints its chain too. Exits 1 when no record matches, or the ledger is broken
before one is found.

` + exitCodesHelp,
		Example: `  signetctl ledger show --dir /var/lib/signet/ledger 1042
  signetctl ledger show --dir /var/lib/signet/ledger --serial 5e:0a:91 --pem
  signetctl ledger show --dir /var/lib/signet/ledger --uid 6f1c…-… -o yaml`,
	}
	addLedgerDir(cmd, &dir)
	addRecordFilter(cmd, &f)
	cmd.Flags().BoolVar(&showPEM, "pem", false, "print the issued chain and CA certificates in PEM")
	out := addOutputFlag(cmd, "the records as the ledger holds them")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		for _, a := range args {
			seq, err := strconv.ParseUint(a, 10, 64)
			if err != nil || seq == 0 {
				return usageError(cmd, "%q is not a record's seq (a positive number)", a)
			}
			f.seqs = append(f.seqs, seq)
		}
		if err := f.check(cmd, time.Now()); err != nil {
			return err
		}
		found, ferr := f.find(dir)
		w := cmd.OutOrStdout()
		if !out.text() {
			if err := out.print(w, nonNil(found)); err != nil {
				return err
			}
		} else {
			for i, r := range found {
				if i > 0 {
					fmt.Fprintln(w)
				}
				writeRecord(w, r, showPEM)
			}
		}
		if ferr == nil && len(found) == 0 {
			return failure("no record matches")
		}
		return ferr
	}
	return cmd
}

// writeRecord prints every field of r that is set, and a description of its leaf certificate.
func writeRecord(w io.Writer, r ledger.Record, showPEM bool) {
	fmt.Fprintf(w, "record %d\n", r.Seq)
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %-16s %s\n", label+":", value)
		}
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	line("Time", when(r.Time))
	line("Decision", string(r.Decision))
	line("Signer", r.Signer)
	line("Client", r.Client)
	line("Requester", r.Requester)
	line("Object", strings.TrimSpace(r.ObjectKind+" "+r.ObjectUID))
	line("Serial", r.Serial)
	line("Not before", when(r.NotBefore))
	line("Not after", when(r.NotAfter))
	line("Reason", r.Reason)
	line("Message", r.Message)
	line("Grounds", r.Grounds)
	line("CA", r.CA)
	line("Cluster", r.Cluster)
	line("Bundle hash", r.BundleHash)
	line("Anchors", strings.Join(r.Anchors, ", "))
	line("Idempotency key", r.IdempotencyKey)
	line("Request hash", r.RequestHash)
	if r.Authority != nil {
		fmt.Fprintln(w, "  CAs:")
		for _, ca := range r.Authority.CAs {
			fmt.Fprintf(w, "    %s %s since %s by %s, key %s\n", ca.State, ca.Fingerprint, orDash(when(ca.Since)), orDash(ca.By), orDash(ca.Key))
		}
		if len(r.Authority.Clusters) > 0 {
			line("Clusters", strings.Join(r.Authority.Clusters, ", "))
		}
	}
	line("Prev hash", r.PrevHash)
	line("Hash", r.Hash)
	if r.Certificate != "" {
		if block, _ := pem.Decode([]byte(r.Certificate)); block != nil {
			if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
				fmt.Fprintln(w, "  Certificate:")
				certinfo.Write(w, cert, "    ")
			}
		}
	}
	if showPEM {
		fmt.Fprint(w, r.Certificate)
		if r.Authority != nil {
			for _, ca := range r.Authority.CAs {
				fmt.Fprint(w, ca.Certificate)
			}
		}
	}
}
