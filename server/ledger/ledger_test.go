package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/server/ledger"
)

const segment = "ledger-000001.jsonl"

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)

// issued returns a valid Issued record for object i.
func issued(i int) ledger.Record {
	return ledger.Record{
		Decision:       ledger.Issued,
		Signer:         "example.com/signer",
		Client:         "spiffe://signet/watcher",
		Requester:      "system:node:worker-1",
		ObjectUID:      fmt.Sprintf("uid-%04d", i),
		IdempotencyKey: fmt.Sprintf("uid-%04d/abcd", i),
		RequestHash:    strings.Repeat("ab", 32),
		Serial:         fmt.Sprintf("%032x", i+1),
		NotBefore:      t0.Add(-5 * time.Minute),
		NotAfter:       t0.Add(24 * time.Hour),
		Message:        "issued",
		Certificate:    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	}
}

func refused(i int) ledger.Record {
	return ledger.Record{
		Decision: ledger.Refused, Signer: "example.com/signer", ObjectUID: fmt.Sprintf("uid-%04d", i),
		Reason: "POLICY_VIOLATION", Message: "usage \"server auth\" is not allowed by the signer's profile",
	}
}

type fixture struct {
	dir      string
	clock    *testclock.FakeClock
	log      *bytes.Buffer
	prealloc int64 // Options.Preallocate; 0 for the default
	maxBatch int   // Options.MaxBatch; 0 for the default
	// recoverEvery is Options.RecoverInterval; 0 for an hour, so that a test that does not
	// wait for recovery sees none.
	recoverEvery time.Duration
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{dir: filepath.Join(t.TempDir(), "ledger"), clock: testclock.NewFakeClock(t0), log: &bytes.Buffer{}}
}

func (f *fixture) options() ledger.Options {
	recoverEvery := f.recoverEvery
	if recoverEvery == 0 {
		recoverEvery = time.Hour
	}
	return ledger.Options{Clock: f.clock, Logger: slog.New(slog.NewTextHandler(f.log, nil)), Preallocate: f.prealloc, MaxBatch: f.maxBatch,
		RecoverInterval: recoverEvery}
}

func (f *fixture) open(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(f.dir, f.options())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fill appends n records (every fifth one refused), one second apart, and closes the ledger.
func (f *fixture) fill(t *testing.T, n int) {
	t.Helper()
	l := f.open(t)
	for i := 1; i <= n; i++ {
		r := issued(i)
		if i%5 == 0 {
			r = refused(i)
		}
		f.clock.Step(time.Second)
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// lines returns the segment split after every "\n": the record lines, then the rest, which is
// the free space's zeros (checked) after a Ledger wrote the segment.
func (f *fixture) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.segment())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if tail := lines[len(lines)-1]; strings.Trim(tail, "\x00") != "" {
		t.Fatalf("the segment ends with %q after its last line, not with zeros", tail)
	}
	return lines
}

// write replaces the segment with lines.
func (f *fixture) write(t *testing.T, lines []string) {
	t.Helper()
	if err := os.WriteFile(f.segment(), []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) segment() string { return filepath.Join(f.dir, segment) }

// size returns the segment's size.
func (f *fixture) size(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(f.segment())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestAppendFillsChainAndVerifies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	var prev ledger.Record
	for i := 1; i <= 3; i++ {
		f.clock.Step(time.Second)
		got, err := l.Append(context.Background(), issued(i))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if got.Seq != uint64(i) || !got.Time.Equal(f.clock.Now()) || len(got.Hash) != 64 {
			t.Errorf("record %d: seq %d time %v hash %q", i, got.Seq, got.Time, got.Hash)
		}
		wantPrev := strings.Repeat("0", 64)
		if i > 1 {
			wantPrev = prev.Hash
		}
		if got.PrevHash != wantPrev {
			t.Errorf("record %d: prevHash %s, want %s", i, got.PrevHash, wantPrev)
		}
		prev = got
	}
	if seq, hash := l.Last(); seq != 3 || hash != prev.Hash {
		t.Errorf("Last = %d %s, want 3 %s", seq, hash, prev.Hash)
	}
	rep, err := ledger.Verify(f.dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != 3 || rep.FirstSeq != 1 || rep.LastSeq != 3 || rep.LastHash != prev.Hash ||
		!rep.FirstTime.Equal(t0.Add(time.Second)) || !rep.LastTime.Equal(t0.Add(3*time.Second)) {
		t.Errorf("report = %+v", rep)
	}
}

func TestStoredLineIsCanonicalJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	r := issued(1)
	r.Message = "bad utf-8 \xff and <html> & \"quotes\"\nnewline"
	got, err := l.Append(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Message, "\uFFFD") {
		t.Errorf("message %q: invalid UTF-8 not replaced", got.Message)
	}
	line := f.lines(t)[0]
	want, _ := json.Marshal(got)
	if line != string(want)+"\n" {
		t.Errorf("line\n%s\nis not json.Marshal of the returned record\n%s", line, want)
	}
	var back ledger.Record
	if err := json.Unmarshal([]byte(line), &back); err != nil {
		t.Fatal(err)
	}
	if back.Message != got.Message || !back.Time.Equal(got.Time) || back.Hash != got.Hash {
		t.Errorf("decoded %+v, want %+v", back, got)
	}
	if strings.Contains(line, `"notBefore"`) != true || strings.Contains(f.lines(t)[0], `"reason"`) {
		t.Errorf("optional fields: %s", line)
	}
}

func TestAppendRejectsInvalidRecords(t *testing.T) {
	t.Parallel()
	l := newFixture(t).open(t)
	noCert := issued(1)
	noCert.Certificate = ""
	noReason := refused(1)
	noReason.Reason = ""
	noSigner := issued(1)
	noSigner.Signer = ""
	for name, r := range map[string]ledger.Record{
		"unknown decision":  {Decision: "maybe", Signer: "s"},
		"issued no cert":    noCert,
		"refused no reason": noReason,
		"issued no signer":  noSigner,
	} {
		if _, err := l.Append(context.Background(), r); !errors.Is(err, ledger.ErrInvalidRecord) {
			t.Errorf("%s: err = %v, want ErrInvalidRecord", name, err)
		}
	}
	if seq, _ := l.Last(); seq != 0 {
		t.Errorf("invalid records were stored: last seq %d", seq)
	}
	// A request that named no signer is still refused on the record (issue 18: every decision
	// is recorded).
	if _, err := l.Append(context.Background(), ledger.Record{Decision: ledger.Refused, Reason: "MALFORMED_REQUEST"}); err != nil {
		t.Errorf("refusal without a signer: %v", err)
	}
}

func TestReopenContinuesChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 4)
	l := f.open(t)
	if seq, _ := l.Last(); seq != 4 {
		t.Fatalf("reopened at seq %d, want 4", seq)
	}
	if r, err := l.Append(context.Background(), issued(5)); err != nil || r.Seq != 5 {
		t.Fatalf("Append after reopen: %+v, %v", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 5 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	if _, err := ledger.Open(f.dir, f.options()); !errors.Is(err, ledger.ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f.open(t)
}

func TestAppendAfterCloseIsUnavailable(t *testing.T) {
	t.Parallel()
	l := newFixture(t).open(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := l.Append(context.Background(), issued(1))
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("err = %v, want ErrUnavailable and ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestTornTailIsTruncatedOnOpen: a torn final line, at the end of the file (as a ledger
// written before free space existed has it) or followed by the free space's zeros, is
// reported by Verify and truncated by Open; the chain continues and free space follows it.
func TestTornTailIsTruncatedOnOpen(t *testing.T) {
	t.Parallel()
	for _, freeSpace := range []bool{false, true} {
		t.Run(fmt.Sprintf("free space %v", freeSpace), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.fill(t, 5)
			lines := f.lines(t)
			sixth := strings.Replace(lines[4], `"seq":5`, `"seq":6`, 1)
			zeros := lines[len(lines)-1]
			torn := append(lines[:len(lines)-1], sixth[:len(sixth)/2]) // a write cut short: no "\n"
			if freeSpace {
				torn = append(torn, zeros[len(sixth)/2:])
			}
			f.write(t, torn)

			rep, err := ledger.Verify(f.dir)
			if err != nil || rep.Records != 5 || rep.TornTail != int64(len(sixth)/2) {
				t.Fatalf("Verify before Open: %+v, %v (want 5 records and a torn tail)", rep, err)
			}
			if freeSpace && rep.FreeSpace != int64(len(zeros)-len(sixth)/2) || !freeSpace && rep.FreeSpace != 0 {
				t.Errorf("Verify before Open: %d bytes of free space, want the zeros after the torn line", rep.FreeSpace)
			}
			l := f.open(t)
			if !strings.Contains(f.log.String(), "truncating a torn final line") {
				t.Errorf("no warning logged: %q", f.log.String())
			}
			if r, err := l.Append(context.Background(), issued(6)); err != nil || r.Seq != 6 {
				t.Fatalf("Append after recovery: %+v, %v", r, err)
			}
			rep, err = ledger.Verify(f.dir)
			if err != nil || rep.Records != 6 || rep.TornTail != 0 || rep.FreeSpace == 0 {
				t.Errorf("Verify after recovery: %+v, %v (want 6 records, no torn tail, free space)", rep, err)
			}
		})
	}
}

func TestReplaySince(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 10)
	var seqs []uint64
	err := ledger.Replay(f.dir, t0.Add(7*time.Second), func(r ledger.Record) error {
		seqs = append(seqs, r.Seq)
		return nil
	})
	if err != nil || fmt.Sprint(seqs) != "[7 8 9 10]" {
		t.Errorf("Replay = %v, %v; want [7 8 9 10]", seqs, err)
	}
	stop := errors.New("stop")
	err = ledger.Replay(f.dir, time.Time{}, func(ledger.Record) error { return stop })
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "record 1") {
		t.Errorf("Replay with failing fn: %v", err)
	}
}

// TestOpenReplays: Open hands every verified record to Options.Replay in seq order, and an
// error from it fails Open.
func TestOpenReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 6)
	var seqs []uint64
	opts := f.options()
	opts.Replay = func(r ledger.Record) error {
		seqs = append(seqs, r.Seq)
		return nil
	}
	l, err := ledger.Open(f.dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Errorf("replayed %v, want [1 2 3 4 5 6]", seqs)
	}
	stop := errors.New("stop")
	opts.Replay = func(ledger.Record) error { return stop }
	if l, err := ledger.Open(f.dir, opts); !errors.Is(err, stop) {
		if err == nil {
			l.Close()
		}
		t.Errorf("Open with a failing Replay: %v, want it to fail", err)
	}
}

func TestVerifyEmptyAndMissing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 0)
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 0 || rep.LastSeq != 0 {
		t.Errorf("empty ledger: %+v, %v", rep, err)
	}
	if _, err := ledger.Verify(filepath.Join(f.dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing ledger: err = %v", err)
	}
}

// TestObjectKind: the object kind is stored and replayed; a record without one (as every
// record written before the field existed) has no objectKind member, so old ledgers keep
// their canonical encoding and verify.
func TestObjectKind(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	withKind := issued(1)
	withKind.ObjectKind = "PodCertificateRequest"
	for _, r := range []ledger.Record{withKind, issued(2)} {
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	lines := f.lines(t)
	if !strings.Contains(lines[0], `"objectUID":"uid-0001","objectKind":"PodCertificateRequest",`) {
		t.Errorf("record with a kind stored as %s", lines[0])
	}
	if strings.Contains(lines[1], "objectKind") {
		t.Errorf("record without a kind stored as %s", lines[1])
	}
	var kinds []string
	if err := ledger.Replay(f.dir, time.Time{}, func(r ledger.Record) error {
		kinds = append(kinds, r.ObjectKind)
		return nil
	}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if len(kinds) != 2 || kinds[0] != "PodCertificateRequest" || kinds[1] != "" {
		t.Errorf("replayed kinds %q, want [PodCertificateRequest \"\"]", kinds)
	}
}
