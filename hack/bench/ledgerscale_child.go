package main

// The child of -ledger-scale (-ledger-open DIR): a fresh process that opens the ledger in DIR
// as signet-server does, reports what that took, times lookups and proofs, and then appends
// on command. Its protocol, which v0.1.0's anchor (ledgerscale_anchor.go) speaks too: one
// JSON line on stdout with the openResult; then, for each line "append CALLERS DURATION" on
// stdin, one JSON line with the appendResult; at the end of stdin it closes the ledger and
// exits. Logs go to stderr.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// openResult is what a process that opened a ledger reports.
type openResult struct {
	OpenNs int64  `json:"openNs"` // ledger.Open's duration
	Seq    uint64 `json:"seq"`    // the last record's seq
	// ReadAtOpen is Stats().ReadAtOpen; the anchor, which has no such count, reports every
	// record (its Open reads them all).
	ReadAtOpen uint64 `json:"readAtOpen"`
	Replayed   int    `json:"replayed"` // records Open passed to Replay
	// Mem is the process's memory just after Open, MemAfter after the lookups.
	Mem      procStatus `json:"mem"`
	MemAfter procStatus `json:"memAfter"`
	// FindNs and ProveNs are the durations of the lookups by serial and of the inclusion
	// proofs (the anchor makes none).
	FindNs  []int64 `json:"findNs,omitempty"`
	ProveNs []int64 `json:"proveNs,omitempty"`
}

// procStatus is a process's memory from /proc/PID/status, in KiB.
type procStatus struct {
	RSS  int64 `json:"rssKiB"`  // VmRSS: resident, anonymous and file-backed (mmap) pages
	Anon int64 `json:"anonKiB"` // RssAnon: the heap, stacks and the runtime's own
	File int64 `json:"fileKiB"` // RssFile: mapped files (the binary, index.db)
	HWM  int64 `json:"hwmKiB"`  // VmHWM: the peak VmRSS so far
}

// appendResult is what one append measurement of a process did.
type appendResult struct {
	Records int64 `json:"records"`
	Ns      int64 `json:"ns"`
	// CPUNs is the process's user and system time from the first append until the index
	// held every record appended (the indexer's work included).
	CPUNs   int64 `json:"cpuNs"`
	Batches int64 `json:"batches"` // fsynced writes of records
	// DrainNs is how long after the last append the index took to hold every record (0 for
	// the anchor, which has no index).
	DrainNs int64 `json:"drainNs"`
}

// drainLimit bounds the wait for the index to catch up after an append measurement.
const drainLimit = 2 * time.Minute

// runLedgerChild is the child: it opens the ledger in dir as the server does, writes the
// openResult to out, and serves the append commands read from in.
func runLedgerChild(dir string, in io.Reader, out io.Writer) (err error) {
	pool, err := readPool(filepath.Join(filepath.Dir(dir), poolFile))
	if err != nil {
		return err
	}
	var res openResult
	opts := ledger.Options{Clock: testclock.NewFakePassiveClock(pool.Clock), ReplayFrom: time.Now().Add(-24 * time.Hour),
		Replay: func(ledger.Record) error { res.Replayed++; return nil }}
	t0 := time.Now()
	l, err := ledger.Open(dir, opts)
	res.OpenNs = int64(time.Since(t0))
	if err != nil {
		return fmt.Errorf("ledger scale child: %w", err)
	}
	defer func() {
		if cerr := l.Close(); err == nil {
			err = cerr
		}
	}()
	if res.Mem, err = readProcStatus(); err != nil {
		return err
	}
	res.ReadAtOpen, res.Seq = l.Stats().ReadAtOpen, mustSeq(l)
	targets, err := readSamples(filepath.Join(filepath.Dir(dir), samplesFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(targets) > 0 {
		if res.FindNs, res.ProveNs, err = lookups(l, targets, lookupsPerRun); err != nil {
			return err
		}
	}
	if res.MemAfter, err = readProcStatus(); err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("ledger scale child: %w", err)
	}
	return serveAppends(in, enc, func(callers int, d time.Duration) (appendResult, error) { return childAppend(l, pool, callers, d) })
}

func mustSeq(l *ledger.Ledger) uint64 {
	seq, _ := l.Last()
	return seq
}

// lookups times n lookups by serial (Find) of records drawn from targets, each of which must
// find exactly that record, and n inclusion proofs of random leaves at the tree's full size
// with the leaf's record (ProveInclusion and Line), each checked against the root.
func lookups(l *ledger.Ledger, targets []sample, n int) (find, prove []int64, err error) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	for _, t := range targets[:min(n, len(targets))] {
		t0 := time.Now()
		recs, err := l.Find("", t.Serial)
		d := time.Since(t0)
		if err != nil {
			return nil, nil, fmt.Errorf("ledger scale child: %w", err)
		}
		if len(recs) != 1 || recs[0].Seq != t.Seq {
			return nil, nil, fmt.Errorf("ledger scale child: looking up serial %s found %d records, want record %d", t.Serial, len(recs), t.Seq)
		}
		find = append(find, int64(d))
	}
	tree := l.Tree()
	size := tree.Size()
	root, err := tree.Root()
	if err != nil {
		return nil, nil, fmt.Errorf("ledger scale child: %w", err)
	}
	for range n {
		i := rng.Int64N(size)
		t0 := time.Now()
		p, err := tree.ProveInclusion(i, size)
		var line []byte
		if err == nil {
			line, err = l.Line(uint64(i) + 1)
		}
		d := time.Since(t0)
		if err == nil {
			err = tlog.CheckRecord(p, size, root, i, ledgerproof.LeafHash(line))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ledger scale child: proving record %d at size %d: %w", i+1, size, err)
		}
		prove = append(prove, int64(d))
	}
	return find, prove, nil
}

// serveAppends runs the append commands read from in, writing each result to enc, until in
// ends.
func serveAppends(in io.Reader, enc *json.Encoder, run func(callers int, d time.Duration) (appendResult, error)) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		callers, d, err := parseAppendCommand(sc.Text())
		if err != nil {
			return err
		}
		res, err := run(callers, d)
		if err != nil {
			return err
		}
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("ledger scale child: %w", err)
		}
	}
	return sc.Err()
}

// parseAppendCommand parses "append CALLERS DURATION".
func parseAppendCommand(line string) (int, time.Duration, error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "append" {
		return 0, 0, fmt.Errorf("ledger scale child: command %q: want \"append CALLERS DURATION\"", line)
	}
	callers, err := strconv.Atoi(f[1])
	if err != nil || callers < 1 {
		return 0, 0, fmt.Errorf("ledger scale child: command %q: bad number of callers", line)
	}
	d, err := time.ParseDuration(f[2])
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("ledger scale child: command %q: bad duration", line)
	}
	return callers, d, nil
}

// childAppend appends generated records to l from callers goroutines for d, then waits for
// the index to hold them all.
func childAppend(l *ledger.Ledger, pool *ledgerPool, callers int, d time.Duration) (appendResult, error) {
	st0, cpu0 := l.Stats(), cpuTime()
	t0 := time.Now()
	deadline := t0.Add(d)
	n, err := appendLoop(pool, callers, func() bool { return time.Now().Before(deadline) }, func(r ledger.Record) error {
		_, err := l.Append(context.Background(), r)
		return err
	})
	res := appendResult{Records: n, Ns: int64(time.Since(t0))}
	if err != nil {
		return res, fmt.Errorf("ledger scale child: %w", err)
	}
	t1 := time.Now()
	for l.Stats().Unindexed > 0 {
		if time.Since(t1) > drainLimit {
			return res, fmt.Errorf("ledger scale child: the index still lacks %d records %s after the appends", l.Stats().Unindexed, drainLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.DrainNs = int64(time.Since(t1))
	res.CPUNs = int64(cpuTime() - cpu0)
	res.Batches = int64(l.Stats().Batches - st0.Batches)
	return res, nil
}

// readProcStatus reads this process's memory.
func readProcStatus() (procStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return procStatus{}, fmt.Errorf("reading the process's memory: %w", err)
	}
	return parseProcStatus(b)
}

// parseProcStatus reads VmRSS, RssAnon, RssFile and VmHWM (kB) from the text of
// /proc/PID/status.
func parseProcStatus(b []byte) (procStatus, error) {
	var st procStatus
	fields := map[string]*int64{"VmRSS": &st.RSS, "RssAnon": &st.Anon, "RssFile": &st.File, "VmHWM": &st.HWM}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		dst, want := fields[k]
		if !ok || !want {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return st, fmt.Errorf("reading the process's memory: bad line %q", line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return st, fmt.Errorf("reading the process's memory: bad line %q", line)
		}
		*dst = n
		found = found || k == "VmRSS"
	}
	if !found {
		return st, errors.New("reading the process's memory: no VmRSS line")
	}
	return st, nil
}
