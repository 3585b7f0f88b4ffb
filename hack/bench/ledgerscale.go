package main

// -ledger-scale: the ledger (server/ledger) as its history grows (issue 42). One directory
// grows from 0 through each of -ledger-sizes records, written through the real ledger API by
// the bench's own generator (ledgerscale_gen.go: records shaped like real issuances, 72 h
// old, so outside the idempotency window). At each size:
//
//   - start time and RSS: a fresh child process (this binary again, -ledger-open DIR) opens
//     the ledger as the server does (ReplayFrom the start of the 24 h window, a Replay that
//     counts) and reports Open's duration, Stats().ReadAtOpen and its VmRSS just after Open;
//     one first run with the ledger's pages dropped from the page cache (cold), then
//     -ledger-rounds runs (warm), of which the report gives the median;
//   - in those children, lookups by serial (Find) of random records of the history and
//     inclusion proofs (Tree().ProveInclusion and Line) of random leaves at the full size,
//     each checked;
//   - append throughput at 1 and 64 callers against the anchor, the ledger of the previous
//     release (the -ledger-anchor git tag, v0.1.0) at the same size, written by its own code
//     into its own directory (ledgerscale_anchor.go), both in fresh processes, in interleaved
//     rounds.
//
// The report (ledgerscale_report.go) gives the tables, the disk used, the targets of the
// issue and a model of how each figure grows.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The flags of -ledger-scale, registered here so that main.go holds only -ledger-scale and
// its dispatch.
var (
	ledgerSizesFlag  = flag.String("ledger-sizes", "0,1000000,10000000", "with -ledger-scale, the ledger sizes in records to measure at, increasing (0 is always measured: the anchor of RSS); one directory grows through them")
	ledgerDirFlag    = flag.String("ledger-dir", "", "with -ledger-scale, grow the ledgers in a new directory under this one (default $TMPDIR), removed afterwards unless -keep; 10 M records need about 35 GB")
	ledgerKeepFlag   = flag.Bool("keep", false, "with -ledger-scale, keep the ledgers afterwards")
	ledgerRoundsFlag = flag.Int("ledger-rounds", 3, "with -ledger-scale, warm starts measured per size, and interleaved rounds of append measurements")
	ledgerAppendFlag = flag.Duration("ledger-append-time", 5*time.Second, "with -ledger-scale, time per append-throughput measurement")
	ledgerAnchorFlag = flag.String("ledger-anchor", "v0.1.0", "with -ledger-scale, the git tag whose ledger appends are compared with (built from a worktree of it)")
	ledgerAnchorMax  = flag.Int("ledger-anchor-max", 0, "with -ledger-scale, grow the anchor's ledger only to sizes up to this many records (0: every size); larger sizes are compared with it at the largest")
	ledgerOpenFlag   = flag.String("ledger-open", "", "internal: the child process of -ledger-scale, which opens the ledger in this directory and measures it")
)

// Sizes of the generator.
const (
	// growCallers append concurrently while a ledger grows, so that batches fill up to the
	// ledger's MaxBatch (512).
	growCallers = 1024
	// lookupsPerRun lookups by serial, and as many inclusion proofs, are timed per child.
	lookupsPerRun = 1000
	// spaceHeadroom is left free on the ledgers' file system beyond what the run needs.
	spaceHeadroom = 2 << 30
	// indexBytesGuess is what a record costs in index.db and tiles/ before a size has been
	// measured (measured at 1 M: about 170, index.db 139 and tiles/ 32; the guess errs high).
	indexBytesGuess = 200
)

// ledgerScaleOpts is what a scale run measures.
type ledgerScaleOpts struct {
	sizes       []int // increasing, from 0
	anchorMax   int   // the largest size the anchor's ledger grows to
	rounds      int
	appendTime  time.Duration
	anchorTag   string
	parent      string // the directory the work directory is made in
	keep        bool
	out         string
	appendCalls []int // callers of the append measurements
}

// runLedgerScale runs -ledger-scale, or, with -ledger-open, its child.
func runLedgerScale(ctx context.Context, out string) error {
	if *ledgerOpenFlag != "" {
		return runLedgerChild(*ledgerOpenFlag, os.Stdin, os.Stdout)
	}
	sizes, err := parseLedgerSizes(*ledgerSizesFlag)
	if err != nil {
		return fmt.Errorf("-ledger-sizes: %w", err)
	}
	if *ledgerRoundsFlag < 1 {
		return fmt.Errorf("-ledger-rounds %d: want at least 1", *ledgerRoundsFlag)
	}
	o := ledgerScaleOpts{sizes: sizes, anchorMax: *ledgerAnchorMax, rounds: *ledgerRoundsFlag, appendTime: *ledgerAppendFlag,
		anchorTag: *ledgerAnchorFlag, parent: *ledgerDirFlag, keep: *ledgerKeepFlag, out: out, appendCalls: []int{1, 64}}
	if o.anchorMax <= 0 {
		o.anchorMax = slices.Max(sizes)
	}
	if o.parent == "" {
		o.parent = os.TempDir()
	}
	// An interrupt ends the run through its cleanup: the ledgers take tens of GB.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ledgerScale(ctx, o)
}

// parseLedgerSizes parses -ledger-sizes: increasing counts of records, 0 put first when
// missing.
func parseLedgerSizes(list string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad size %q in %q: want a count of records", f, list)
		}
		if len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			return nil, fmt.Errorf("sizes %q: want them increasing (one ledger grows through them)", list)
		}
		sizes = append(sizes, n)
	}
	if sizes[0] != 0 {
		sizes = append([]int{0}, sizes...)
	}
	return sizes, nil
}

// ledgerScale makes the work directory, checks that its file system has room, builds the
// anchor, measures every size and writes the report.
func ledgerScale(ctx context.Context, o ledgerScaleOpts) (err error) {
	work, err := os.MkdirTemp(o.parent, "signet-ledgerscale-")
	if err != nil {
		return fmt.Errorf("ledger scale: making the work directory: %w", err)
	}
	defer func() {
		if o.keep {
			fmt.Fprintf(os.Stderr, "ledger scale: ledgers kept in %s\n", work)
			return
		}
		if rerr := os.RemoveAll(work); rerr != nil && err == nil {
			err = fmt.Errorf("ledger scale: removing %s: %w", work, rerr)
		}
	}()
	pool, err := makePool(time.Now())
	if err != nil {
		return err
	}
	if err := pool.write(filepath.Join(work, poolFile)); err != nil {
		return err
	}
	lineBytes, err := pool.lineBytes()
	if err != nil {
		return err
	}
	top := slices.Max(o.sizes)
	need := spaceNeed(0, top, lineBytes+indexBytesGuess) + spaceNeed(0, min(top, o.anchorMax), lineBytes)
	if err := checkSpace(work, need); err != nil {
		return err
	}
	anchor, err := buildAnchor(ctx, o.anchorTag, work)
	if err != nil {
		return err
	}
	defer anchor.cleanup()

	run := ledgerRun{opts: o, lineBytes: lineBytes, fs: fileSystemOf(work), freeAtStart: freeBytes(work), commit: anchor.measured(ctx)}
	run.busyAtStart = waitQuiet(30 * time.Second)
	busy0, total0 := cpuTotals()
	start := time.Now()
	s := &scaleState{o: o, pool: pool, work: work, anchor: anchor, lineBytes: lineBytes, samples: newSampler()}
	for _, n := range o.sizes {
		step, err := s.measure(ctx, n)
		if err != nil {
			return err
		}
		run.steps = append(run.steps, step)
		fmt.Fprintf(os.Stderr, "ledger scale: %d records measured (%s so far)\n", n, time.Since(start).Round(time.Second))
	}
	run.elapsed = time.Since(start)
	if busy1, total1 := cpuTotals(); total1 > total0 {
		run.busyDuring = (busy1 - busy0) / (total1 - total0)
	}
	report := ledgerReport(run)
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("ledger scale: writing the report: %w", err)
		}
	}
	return nil
}

// scaleState is what the sizes of a run share: the directories, the records, the anchor,
// and what the ledgers hold so far.
type scaleState struct {
	o         ledgerScaleOpts
	pool      *ledgerPool
	work      string
	anchor    *anchorBuild
	lineBytes int
	samples   *sampler
	// perRecord and anchorPerRecord are the disk bytes per record measured at the last
	// size, 0 before.
	perRecord, anchorPerRecord float64
	grownTo, anchorSize        int // the sizes the ledger and the anchor's were last grown to
}

func (s *scaleState) dir() string       { return filepath.Join(s.work, "ledger") }
func (s *scaleState) anchorDir() string { return filepath.Join(s.work, "anchor-ledger") }

// measure grows both ledgers to n records and measures them.
func (s *scaleState) measure(ctx context.Context, n int) (ledgerStep, error) {
	step := ledgerStep{size: n}
	growAnchor := n <= s.o.anchorMax
	if err := s.checkRoom(n, growAnchor); err != nil {
		return step, err
	}
	var err error
	fmt.Fprintf(os.Stderr, "ledger scale: growing the ledger to %d records\n", n)
	if step.grow, err = growLedger(ctx, s.dir(), s.pool, n, s.samples); err != nil {
		return step, err
	}
	s.grownTo = n
	if err := s.samples.write(filepath.Join(s.work, samplesFile)); err != nil {
		return step, err
	}
	if growAnchor {
		fmt.Fprintf(os.Stderr, "ledger scale: growing %s's ledger to %d records\n", s.o.anchorTag, n)
		g, err := s.anchor.grow(ctx, s.anchorDir(), filepath.Join(s.work, poolFile), n)
		if err != nil {
			return step, err
		}
		step.anchorGrow = &g
		s.anchorSize = n
	}
	step.anchorSize = s.anchorSize
	if step.disk, err = diskUse(s.dir()); err != nil {
		return step, err
	}
	if step.anchorDisk, err = diskUse(s.anchorDir()); err != nil {
		return step, err
	}
	fmt.Fprintf(os.Stderr, "ledger scale: disk at %d records: segments %s (%d files), index.db %s, tiles/ %s; %s's ledger %s\n", n,
		gib(step.disk.segments), step.disk.segmentFiles, gib(step.disk.index), gib(step.disk.tiles), s.o.anchorTag, gib(step.anchorDisk.total()))
	if n > 0 {
		s.perRecord = float64(step.disk.total()) / float64(n)
	}
	if s.anchorSize > 0 {
		s.anchorPerRecord = float64(step.anchorDisk.total()) / float64(s.anchorSize)
	}
	if step.index, err = indexStats(s.dir()); err != nil {
		return step, err
	}
	if err := s.opens(ctx, &step); err != nil {
		return step, err
	}
	return step, nil
}

// indexFile is what index.db holds, as bbolt counts it.
type indexFile struct {
	size      int64 // bytes
	freePages int   // pages freed by earlier transactions, kept for reuse
	pageSize  int
}

// freeShare is the share of the file that is free pages.
func (f indexFile) freeShare() float64 {
	if f.size == 0 {
		return 0
	}
	return float64(f.freePages*f.pageSize) / float64(f.size)
}

// indexStats reads index.db of the (closed) ledger in dir read-only, its free-page list
// included (which index.Open does not load read-only).
func indexStats(dir string) (indexFile, error) {
	path := filepath.Join(dir, "index.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true, FreelistType: bolt.FreelistMapType, Timeout: time.Second})
	if err != nil {
		return indexFile{}, fmt.Errorf("ledger scale: reading the sizes of %s: %w", path, err)
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return indexFile{}, fmt.Errorf("ledger scale: reading the sizes of %s: %w", path, err)
	}
	st := db.Stats()
	return indexFile{size: fi.Size(), freePages: st.FreePageN + st.PendingPageN, pageSize: db.Info().PageSize}, nil
}

// checkRoom refuses to grow the ledgers to n records when their file system has not the room
// (with spaceHeadroom to spare), by the bytes per record measured so far or, before any, the
// estimate.
func (s *scaleState) checkRoom(n int, growAnchor bool) error {
	per := max(s.perRecord, float64(s.lineBytes+indexBytesGuess))
	need := spaceNeed(s.grownTo, n, int(per))
	if growAnchor {
		need += spaceNeed(s.anchorSize, n, int(max(s.anchorPerRecord, float64(s.lineBytes))))
	}
	return checkSpace(s.work, need)
}

// spaceNeed is the room growing a ledger from `from` to `to` records of perRecord bytes
// takes, plus the append measurements' records (at most a few hundred thousand).
func spaceNeed(from, to, perRecord int) uint64 {
	if to <= from {
		return 0
	}
	const measuring = 300_000
	return uint64(to-from+measuring) * uint64(perRecord)
}

// checkSpace fails when the file system of dir has less than need bytes free beyond
// spaceHeadroom, with what to do about it.
func checkSpace(dir string, need uint64) error {
	free := freeBytes(dir)
	if free == 0 {
		return fmt.Errorf("ledger scale: cannot read the free space of %s", dir)
	}
	if free < need+spaceHeadroom {
		return fmt.Errorf("ledger scale: %s has %s free, and this run needs about %s more (the ledgers plus %s kept free): "+
			"choose smaller -ledger-sizes (e.g. 0,1000000), a -ledger-anchor-max that grows the anchor's ledger less far, or a -ledger-dir on a bigger disk",
			dir, gib(free), gib(need), gib(spaceHeadroom))
	}
	return nil
}

// freeBytes is what the file system of dir has free for an unprivileged writer, 0 if unknown.
func freeBytes(dir string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return st.Bavail * uint64(st.Bsize)
}

// fileSystemOf names the type of the file system of dir.
func fileSystemOf(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch st.Type {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("file system type %#x", st.Type)
}

// diskUsage is what a ledger directory takes on disk (allocated blocks), by part.
type diskUsage struct {
	segments, index, tiles, other int64
	segmentFiles                  int
}

func (d diskUsage) total() int64 { return d.segments + d.index + d.tiles + d.other }

// diskUse adds up the blocks allocated to the files of ledger directory dir: its segments,
// index.db, tiles/ and the rest (LOCK, FORMAT, a checkpoint); a missing dir uses none.
func diskUse(dir string) (diskUsage, error) {
	var d diskUsage
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && path == dir {
				return filepath.SkipDir
			}
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("no block count for %s", path)
		}
		used := st.Blocks * 512
		rel, _ := filepath.Rel(dir, path)
		switch {
		case rel == "tiles" || strings.HasPrefix(rel, "tiles"+string(filepath.Separator)):
			d.tiles += used
		case rel == "index.db":
			d.index += used
		case strings.HasPrefix(rel, "ledger-") && strings.HasSuffix(rel, ".jsonl"):
			d.segments += used
			d.segmentFiles++
		default:
			d.other += used
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("measuring the disk used by %s: %w", dir, err)
	}
	return d, nil
}

// gib formats bytes in GiB (MiB under one GiB).
func gib[T int | int64 | uint64 | float64](b T) string {
	if float64(b) < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
