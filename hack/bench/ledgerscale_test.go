package main

import (
	"bufio"
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

func TestParseLedgerSizes(t *testing.T) {
	for in, want := range map[string][]int{
		"0,1000000,10000000": {0, 1_000_000, 10_000_000},
		"100000":             {0, 100_000},
		" 0, 1_000_000 ":     {0, 1_000_000},
	} {
		got, err := parseLedgerSizes(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseLedgerSizes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "0,-1", "0,5,3", "0,0", "1M"} {
		if got, err := parseLedgerSizes(in); err == nil {
			t.Errorf("parseLedgerSizes(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tbench\nVmPeak:\t 1234 kB\nVmHWM:\t   90112 kB\nVmRSS:\t   81920 kB\nRssAnon:\t   20480 kB\nRssFile:\t   61440 kB\nRssShmem:\t       0 kB\nThreads:\t8\n"
	got, err := parseProcStatus([]byte(status))
	if want := (procStatus{RSS: 81920, Anon: 20480, File: 61440, HWM: 90112}); err != nil || got != want {
		t.Errorf("parseProcStatus = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseProcStatus([]byte("Name:\tbench\n")); err == nil {
		t.Error("no VmRSS: want an error")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t 12 MB\n")); err == nil {
		t.Error("a unit other than kB: want an error")
	}
}

func TestParseAppendCommand(t *testing.T) {
	callers, d, err := parseAppendCommand("append 64 5s")
	if err != nil || callers != 64 || d != 5*time.Second {
		t.Errorf("parseAppendCommand = %d, %s, %v", callers, d, err)
	}
	for _, in := range []string{"", "append", "append 0 5s", "append 1 0s", "append 1 5", "prove 1 5s"} {
		if _, _, err := parseAppendCommand(in); err == nil {
			t.Errorf("parseAppendCommand(%q): want an error", in)
		}
	}
}

func TestPctAndMedian(t *testing.T) {
	var ns []int64
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		ns = append(ns, int64(i)*int64(time.Microsecond))
	}
	if got := pct(ns, 0.5); got != 500*time.Microsecond {
		t.Errorf("p50 = %s", got)
	}
	if got := pct(ns, 0.99); got != 990*time.Microsecond {
		t.Errorf("p99 = %s", got)
	}
	if got := pct(ns, 1); got != time.Millisecond {
		t.Errorf("max = %s", got)
	}
	if got := pct(nil, 0.5); got != 0 {
		t.Errorf("p50 of none = %s", got)
	}
	step := ledgerStep{warm: []openResult{{OpenNs: 3e6}, {OpenNs: 1e6}, {OpenNs: 2e6}}}
	if got := step.warmMedian(openSeconds); got != 0.002 {
		t.Errorf("median start = %v, want 0.002", got)
	}
}

func TestSpace(t *testing.T) {
	if got := spaceNeed(0, 1_000_000, 2000); got != 1_300_000*2000 {
		t.Errorf("spaceNeed = %d", got)
	}
	if got := spaceNeed(5, 5, 2000); got != 0 {
		t.Errorf("spaceNeed of no growth = %d", got)
	}
	err := checkSpace(t.TempDir(), 1<<62)
	if err == nil || !strings.Contains(err.Error(), "-ledger-sizes") {
		t.Errorf("checkSpace of 4 EiB = %v, want a refusal that says what to do", err)
	}
	if err := checkSpace(t.TempDir(), 0); err != nil {
		t.Errorf("checkSpace of nothing = %v", err)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10_000_000: "10,000,000"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestGeneratedRecords: the generator's records are taken by the ledger, about 1.5 KB a line,
// with distinct serials and UUID object UIDs, and found again by serial.
func TestGeneratedRecords(t *testing.T) {
	pool, err := makePool(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := pool.lineBytes()
	if err != nil || n < 1400 || n > 2000 {
		t.Errorf("lineBytes = %d, %v; want about 1.6 KB", n, err)
	}
	g := newRecordGen(pool)
	seen := map[string]bool{}
	for range 1000 {
		r := g.next()
		if seen[r.Serial] || !uuidV4.MatchString(r.ObjectUID) || r.IdempotencyKey != r.ObjectUID+"/"+r.RequestHash || len(r.Serial) != 32 {
			t.Fatalf("bad record: serial %q (seen %v), uid %q, key %q", r.Serial, seen[r.Serial], r.ObjectUID, r.IdempotencyKey)
		}
		seen[r.Serial] = true
	}
	work := t.TempDir()
	dir := filepath.Join(work, "ledger")
	smp := newSampler()
	res, err := growLedger(context.Background(), dir, pool, 300, smp)
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 300 || res.Records != 300 || len(smp.keep) != 298 {
		t.Fatalf("grown to seq %d with %d records, %d sampled; want 300, 300 and 298", res.Seq, res.Records, len(smp.keep))
	}
	if res, err := growLedger(context.Background(), dir, pool, 310, smp); err != nil || res.Seq != 310 || res.Records != 10 {
		t.Fatalf("grown again to seq %d with %d records (%v), want 310 and 10", res.Seq, res.Records, err)
	}
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := smp.keep[len(smp.keep)/2]
	recs, err := l.Find("", s.Serial)
	if err != nil || len(recs) != 1 || recs[0].Seq != s.Seq || recs[0].Decision != ledger.Issued {
		t.Errorf("Find(%q) = %d records, %v; want record %d", s.Serial, len(recs), err, s.Seq)
	}
}

// TestSampler: the reservoir keeps sampleSize records drawn from all it was offered.
func TestSampler(t *testing.T) {
	smp := newSampler()
	for i := range uint64(10 * sampleSize) {
		smp.add(i+1, "x")
	}
	if len(smp.keep) != sampleSize {
		t.Fatalf("kept %d, want %d", len(smp.keep), sampleSize)
	}
	late := 0
	for _, s := range smp.keep {
		if s.Seq > sampleSize {
			late++
		}
	}
	if late < sampleSize*8/10 { // 90 % expected
		t.Errorf("%d of %d sampled after the first %d records: not uniform", late, sampleSize, sampleSize)
	}
}

// TestChild runs the child's protocol on a small ledger: what Open read, checked lookups and
// proofs, then one append measurement.
func TestChild(t *testing.T) {
	pool, err := makePool(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := pool.write(filepath.Join(work, poolFile)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "ledger")
	smp := newSampler()
	if _, err := growLedger(context.Background(), dir, pool, 500, smp); err != nil {
		t.Fatal(err)
	}
	if err := smp.write(filepath.Join(work, samplesFile)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runLedgerChild(dir, strings.NewReader("append 4 100ms\n"), &out); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	var open openResult
	var app appendResult
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &open) != nil || !sc.Scan() || json.Unmarshal(sc.Bytes(), &app) != nil {
		t.Fatalf("child's output: %q", out.String())
	}
	if open.Seq != 500 || open.Replayed != 2+len(poolSigners) || open.ReadAtOpen == 0 || open.ReadAtOpen > 300 || open.Mem.RSS == 0 {
		t.Errorf("open: seq %d, replayed %d, read %d, RSS %d KiB", open.Seq, open.Replayed, open.ReadAtOpen, open.Mem.RSS)
	}
	if len(open.FindNs) != 498 || len(open.ProveNs) != lookupsPerRun {
		t.Errorf("%d lookups and %d proofs, want 498 and %d", len(open.FindNs), len(open.ProveNs), lookupsPerRun)
	}
	if app.Records == 0 || app.Batches == 0 || app.CPUNs == 0 || app.Ns < int64(100*time.Millisecond) {
		t.Errorf("append: %+v", app)
	}
}

// TestAnchorSourceParses: the anchor's program, built only against the tag, is Go.
func TestAnchorSourceParses(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", anchorSource, parser.AllErrors)
	if err != nil || f.Name.Name != "main" {
		t.Fatalf("anchorSource: %v", err)
	}
}

// TestLedgerReport renders a two-size run and judges its targets.
func TestLedgerReport(t *testing.T) {
	open := func(ns int64, rss int64, seq uint64) openResult {
		return openResult{OpenNs: ns, Seq: seq, ReadAtOpen: 200, Replayed: 4, Mem: procStatus{RSS: rss, Anon: rss / 4, File: rss * 3 / 4},
			MemAfter: procStatus{RSS: rss + 1024}, FindNs: []int64{1e5, 2e5, 3e5}, ProveNs: []int64{1e5, 2e5}}
	}
	apps := func(rate float64) [][]appendResult {
		r := appendResult{Records: int64(rate), Ns: int64(time.Second), CPUNs: 5e8, Batches: int64(rate / 10)}
		return [][]appendResult{{r, r}, {r, r}}
	}
	step := func(size int, rate float64) ledgerStep {
		return ledgerStep{size: size, anchorSize: size, disk: diskUsage{segments: int64(size) * 1700, index: int64(size) * 90, tiles: int64(size) * 33, segmentFiles: 1},
			grow: growResult{Records: int64(size), Ns: int64(time.Second)}, anchorGrow: &growResult{Records: int64(size), Ns: int64(time.Second)},
			cold: open(4e7, 70_000, uint64(size)), warm: []openResult{open(2e7, 70_000, uint64(size)), open(3e7, 71_000, uint64(size))},
			anchorOpen: open(int64(size)*25_000, 100_000, uint64(size)), appends: apps(rate), anchorAppends: apps(rate / 0.9)}
	}
	run := ledgerRun{opts: ledgerScaleOpts{rounds: 2, appendTime: time.Second, anchorTag: "v0.1.0", appendCalls: []int{1, 64}, anchorMax: 1_000_000},
		steps: []ledgerStep{step(0, 1000), step(1_000_000, 900)}, lineBytes: 1666, fs: "ext4", elapsed: time.Minute}
	got := ledgerReport(run)
	for _, want := range []string{"# Ledger at scale", "| 1,000,000 | 0.025 s | 0.040 s | 200 | 4 |", "judged there, not at 10,000,000",
		"✓ start ≤ 2s", "✓ RSS ≤ 150 MiB", "✓ lookup by serial", "✗ appends with 1 caller ≥ 0.95× v0.1.0 at the same size: 0.90×", "## Model"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
