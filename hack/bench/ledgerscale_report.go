package main

// The report of -ledger-scale: what was measured and how, the tables, the targets
// judged at the largest size, and a model of how each figure grows with the history.

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Targets of issue 42, at targetSize records.
const (
	targetSize      = 10_000_000
	targetStart     = 2 * time.Second
	targetRSSMiB    = 150.0
	targetLookup    = 10 * time.Millisecond
	targetAppendMin = 0.95
)

// Workloads of the issue, for the model.
const (
	clusterPerYear = 7_000_000 // a 10,000-node cluster: a client and a serving certificate per node per day
	podsPerDay     = 2_400_000 // 100,000 pods renewing hourly
)

// ledgerStep is what one size measured.
type ledgerStep struct {
	size       int
	grow       growResult  // growing the ledger to size
	index      indexFile   // the ledger's index.db once grown
	anchorGrow *growResult // growing the anchor's ledger to size; nil when it was not
	anchorSize int         // the size the anchor's ledger was grown to
	disk       diskUsage
	anchorDisk diskUsage
	cold       openResult
	warm       []openResult
	anchorOpen openResult
	// appends and anchorAppends hold, per opts.appendCalls, one result per round.
	appends, anchorAppends [][]appendResult
}

// ledgerRun is a whole run.
type ledgerRun struct {
	opts                    ledgerScaleOpts
	steps                   []ledgerStep
	lineBytes               int
	fs                      string
	freeAtStart             uint64
	busyAtStart, busyDuring float64
	elapsed                 time.Duration
	commit                  string // the code measured
}

// warmMedian is the median over the warm starts of f.
func (s ledgerStep) warmMedian(f func(openResult) float64) float64 {
	xs := make([]float64, len(s.warm))
	for i, o := range s.warm {
		xs[i] = f(o)
	}
	return median(xs)
}

// warmLookups pools the warm starts' durations of f.
func (s ledgerStep) warmLookups(f func(openResult) []int64) []int64 {
	var out []int64
	for _, o := range s.warm {
		out = append(out, f(o)...)
	}
	return out
}

func openSeconds(o openResult) float64 { return time.Duration(o.OpenNs).Seconds() }
func rssMiB(o openResult) float64      { return float64(o.Mem.RSS) / 1024 }
func anonMiB(o openResult) float64     { return float64(o.Mem.Anon) / 1024 }
func fileMiB(o openResult) float64     { return float64(o.Mem.File) / 1024 }
func findNs(o openResult) []int64      { return o.FindNs }
func proveNs(o openResult) []int64     { return o.ProveNs }

// rateRatios are the rounds' ratios of the ledger's append rate to the anchor's, for
// opts.appendCalls[i].
func (s ledgerStep) rateRatios(i int) []float64 {
	var out []float64
	for r := range min(len(s.appends[i]), len(s.anchorAppends[i])) {
		out = append(out, s.appends[i][r].rate()/s.anchorAppends[i][r].rate())
	}
	return out
}

// appendMedian is the median over the rounds of f.
func appendMedian(rs []appendResult, f func(appendResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// count formats n with thousands separators.
func count[T int | int64 | uint64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// ledgerReport renders the run.
func ledgerReport(run ledgerRun) string {
	var sb strings.Builder
	o := run.opts
	fmt.Fprintf(&sb, "# Ledger at scale\n\nRun %s on %s, %d cores (GOMAXPROCS %d), %s; whole run %s; the machine was %.0f %% busy (one-second sample) when the measurements began, after waiting up to 30 s for < 15 %%, and %.0f %% busy over them (all cores, this run's processes included). "+
		"Ledgers on %s (%s free at the start), in a directory the run made and removed. Sizes %s records; the ledger of %s, against the anchor: the ledger of %s, built from a git worktree of the tag in the same run.\n\n",
		time.Now().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), run.elapsed.Round(time.Second),
		100*run.busyAtStart, 100*run.busyDuring, run.fs, gib(run.freeAtStart), sizesText(run.steps), run.commit, o.anchorTag)
	writeMethod(&sb, run)
	writeStartTable(&sb, run)
	writeLookupTable(&sb, run)
	writeAppendTable(&sb, run)
	writeDiskTable(&sb, run)
	writeTargets(&sb, run)
	writeModel(&sb, run)
	return sb.String()
}

// sizeLabel is the step's size, and the seq its starts found when the measurements of the size
// before had already taken the ledger past it.
func sizeLabel(s ledgerStep) string {
	if len(s.warm) > 0 && s.warm[0].Seq > uint64(s.size) {
		return fmt.Sprintf("%s (seq %s)", count(s.size), count(s.warm[0].Seq))
	}
	return count(s.size)
}

func sizesText(steps []ledgerStep) string {
	var out []string
	for _, s := range steps {
		out = append(out, count(s.size))
	}
	return strings.Join(out, ", ")
}

func writeMethod(sb *strings.Builder, run ledgerRun) {
	o := run.opts
	fmt.Fprintf(sb, "- **Records**: one directory grows from 0 through each size, through the real ledger API (ledger.Open, then Append from %d goroutines, so that they are group-committed, up to 512 per fsync): two Rotated records first (one per signer), then issued records shaped like the kubelet signers' (a real P-256 leaf PEM from a pool of %d, a fresh 128-bit serial, a UUID object UID, request hash and idempotency key, signer, requester, client, CA fingerprint), %d bytes per line on average, stamped by a clock 72 h in the past, so that all lie outside the 24 h idempotency window (hack/bench/ledgerscale_gen.go).\n",
		growCallers, poolChains, run.lineBytes)
	fmt.Fprintf(sb, "- **Start and RSS**: at each size a fresh child process (the bench binary again) opens the ledger as signet-server does (ledger.Options{ReplayFrom: now − 24 h, Replay: a counter}) and reports Open's duration, Stats().ReadAtOpen and its VmRSS just after Open (RssAnon: heap and runtime; RssFile: mapped files, the binary and index.db). "+
		"*Cold*: the first start, after posix_fadvise(DONTNEED) on every file of the ledger (its pages leave this kernel's page cache, as after a reboot; a virtual disk's host may still cache them). *Warm*: the median of the %d starts that follow. RSS − RSS at 0 is the anchor the target counts from.\n", o.rounds)
	fmt.Fprintf(sb, "- **Lookups**: in each child, Find(\"\", serial) of %d records drawn uniformly from the generated history (a reservoir sample kept while generating, so nothing is read beforehand), each of which must return exactly that record; and as many inclusion proofs: Tree().ProveInclusion(i, size) and Line(i+1) for a uniformly random leaf i at the full size, each checked against the root afterwards (not timed). Warm figures pool the warm children's.\n", lookupsPerRun)
	fmt.Fprintf(sb, "- **Appends**: the last warm child and the anchor each append for %s with 1 and with 64 callers, the same pool's records; %d interleaved rounds (the order changes every round). Records/s; the ratio is each round's own ledger ÷ %s, median and range. After each of its measurements the child waits until the index holds every record (not timed, reported as *index caught up*). CPU = the process's user+sys time per record, until the index caught up.\n",
		o.appendTime, o.rounds, o.anchorTag)
	fmt.Fprintf(sb, "- **Anchor**: `git worktree add` of %s, a small main package written into it (not committed) and built against its server/ledger, which kept the tree and every record's offset in memory and read the whole history at Open. Its ledger is its own directory, grown by its own code to the same sizes (%s); it is opened once per size.\n\n",
		o.anchorTag, anchorSizesText(run))
}

func anchorSizesText(run ledgerRun) string {
	var out []string
	for _, s := range run.steps {
		if s.anchorGrow != nil {
			out = append(out, count(s.size))
		}
	}
	text := strings.Join(out, ", ") + " records"
	if last := run.steps[len(run.steps)-1]; last.anchorGrow == nil {
		text += fmt.Sprintf("; above %s records (-ledger-anchor-max) it stays at %s and the larger sizes are compared with it there", count(run.opts.anchorMax), count(last.anchorSize))
	}
	return text
}

func writeStartTable(sb *strings.Builder, run ledgerRun) {
	sb.WriteString("## Start and memory\n\n| records | start, warm (median) | start, cold | records read at Open | replayed | RSS after Open | RSS − RSS at 0 | RssAnon / RssFile | " + run.opts.anchorTag + " start | " + run.opts.anchorTag + " RSS after Open |\n|---|---|---|---|---|---|---|---|---|---|\n")
	base := run.steps[0].warmMedian(rssMiB)
	for _, s := range run.steps {
		fmt.Fprintf(sb, "| %s | %.3f s | %.3f s | %s | %d | %.1f MiB | %+.1f MiB | %.1f / %.1f MiB | %.2f s | %.1f MiB |\n",
			sizeLabel(s), s.warmMedian(openSeconds), openSeconds(s.cold), count(s.warm[0].ReadAtOpen), s.warm[0].Replayed,
			s.warmMedian(rssMiB), s.warmMedian(rssMiB)-base, s.warmMedian(anonMiB), s.warmMedian(fileMiB),
			openSeconds(s.anchorOpen), rssMiB(s.anchorOpen))
	}
	sb.WriteString("\n")
}

func writeLookupTable(sb *strings.Builder, run ledgerRun) {
	sb.WriteString("## Lookups\n\n| records | lookup by serial p50 / p99 / max, warm | cold p50 / p99 | inclusion proof + record p50 / p99 / max, warm | cold p50 / p99 | RSS after the lookups |\n|---|---|---|---|---|---|\n")
	for _, s := range run.steps {
		if len(s.cold.FindNs) == 0 {
			fmt.Fprintf(sb, "| %s | – | – | – | – | %.1f MiB |\n", count(s.size), s.warmMedian(func(o openResult) float64 { return float64(o.MemAfter.RSS) / 1024 }))
			continue
		}
		f, p := s.warmLookups(findNs), s.warmLookups(proveNs)
		fmt.Fprintf(sb, "| %s | %s / %s / %s | %s / %s | %s / %s / %s | %s / %s | %.1f MiB |\n", count(s.size),
			fmtNs(pct(f, 0.5)), fmtNs(pct(f, 0.99)), fmtNs(pct(f, 1)), fmtNs(pct(s.cold.FindNs, 0.5)), fmtNs(pct(s.cold.FindNs, 0.99)),
			fmtNs(pct(p, 0.5)), fmtNs(pct(p, 0.99)), fmtNs(pct(p, 1)), fmtNs(pct(s.cold.ProveNs, 0.5)), fmtNs(pct(s.cold.ProveNs, 0.99)),
			s.warmMedian(func(o openResult) float64 { return float64(o.MemAfter.RSS) / 1024 }))
	}
	sb.WriteString("\n")
}

func writeAppendTable(sb *strings.Builder, run ledgerRun) {
	tag := run.opts.anchorTag
	sb.WriteString("## Appends\n\n| records | callers | ledger records/s | " + tag + " records/s | ratio | rounds' ratios | records per fsync, ledger / " + tag + " | CPU µs per record, ledger / " + tag + " | index caught up after (max) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range run.steps {
		at := ""
		if s.anchorSize != s.size {
			at = fmt.Sprintf(" (at %s)", count(s.anchorSize))
		}
		for i, c := range run.opts.appendCalls {
			rs, as, ratios := s.appends[i], s.anchorAppends[i], s.rateRatios(i)
			drain := slices.MaxFunc(rs, func(a, b appendResult) int { return int(a.DrainNs - b.DrainNs) }).DrainNs
			fmt.Fprintf(sb, "| %s | %d | %.0f | %.0f%s | %.2f | %.2f–%.2f | %.1f / %.1f | %.0f / %.0f | %s |\n", count(s.size), c,
				appendMedian(rs, appendResult.rate), appendMedian(as, appendResult.rate), at, median(ratios), slices.Min(ratios), slices.Max(ratios),
				appendMedian(rs, appendResult.perBatch), appendMedian(as, appendResult.perBatch),
				appendMedian(rs, appendResult.cpuPerRecord), appendMedian(as, appendResult.cpuPerRecord), time.Duration(drain).Round(time.Millisecond))
		}
	}
	sb.WriteString("\n")
}

func writeDiskTable(sb *strings.Builder, run ledgerRun) {
	tag := run.opts.anchorTag
	sb.WriteString("## Disk and growth\n\nDisk = blocks allocated (segments include their zero-filled free space, up to 4 MiB). Growth = the generator's appends from the size before (" +
		strconv.Itoa(growCallers) + " callers), the index backlog the most records acknowledged and not yet indexed seen (sampled every 250 ms), the close writing what was left.\n\n")
	last := run.steps[len(run.steps)-1]
	fmt.Fprintf(sb, "At %s records the run held %s on disk: the ledger %s and %s's %s.\n\n", count(last.size), gib(last.disk.total()+last.anchorDisk.total()),
		gib(last.disk.total()), tag, gib(last.anchorDisk.total()))
	sb.WriteString("| records | segments | index.db (free pages) | tiles/ | total | per record | " + tag + " (one segment) | growth: records/s | " + tag + " records/s | index backlog max | close | peak RSS growing, ledger / " + tag + " |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range run.steps {
		per, anchorRate, anchorPeak := "–", "–", "–"
		if s.size > 0 {
			per = fmt.Sprintf("%.0f B", float64(s.disk.total())/float64(s.size))
		}
		if s.anchorGrow != nil && s.anchorGrow.Ns > 0 && s.size > 0 {
			anchorRate = fmt.Sprintf("%.0f", float64(s.anchorGrow.Records)/time.Duration(s.anchorGrow.Ns).Seconds())
		}
		if s.anchorGrow != nil {
			anchorPeak = fmt.Sprintf("%.0f MiB", float64(s.anchorGrow.PeakRSSKiB)/1024)
		}
		rate := "–"
		if s.size > 0 && s.grow.Ns > 0 {
			rate = fmt.Sprintf("%.0f", float64(s.grow.Records)/time.Duration(s.grow.Ns).Seconds())
		}
		fmt.Fprintf(sb, "| %s | %s (%d files) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f MiB / %s |\n", count(s.size),
			gib(s.disk.segments), s.disk.segmentFiles, indexText(s), gib(s.disk.tiles), gib(s.disk.total()), per, gib(s.anchorDisk.total()),
			rate, anchorRate, count(s.grow.MaxBacklog), time.Duration(s.grow.CloseNs).Round(time.Millisecond), float64(s.grow.PeakRSSKiB)/1024, anchorPeak)
	}
	sb.WriteString("\n")
}

// indexText is the size of index.db and the share of it that is free pages (bbolt keeps
// the pages its copy-on-write transactions freed, for reuse).
func indexText(s ledgerStep) string {
	if s.index.size == 0 {
		return gib(s.disk.index)
	}
	return fmt.Sprintf("%s (%.0f %%)", gib(s.disk.index), 100*s.index.freeShare())
}

// writeTargets judges the targets at the largest size measured.
func writeTargets(sb *strings.Builder, run ledgerRun) {
	s, base := run.steps[len(run.steps)-1], run.steps[0]
	tag := run.opts.anchorTag
	fmt.Fprintf(sb, "## Targets (issue 42, at %s records)\n\n", count(targetSize))
	if s.size < targetSize {
		fmt.Fprintf(sb, "This run's largest size is %s records, so the targets are judged there, not at %s.\n\n", count(s.size), count(targetSize))
	}
	warm, cold := s.warmMedian(openSeconds), openSeconds(s.cold)
	fmt.Fprintf(sb, "- %s start ≤ %s: %.3f s warm, %.3f s cold (at 0 records %.3f s; %s took %.1f s at %s). Open read %s records (the last indexed record, the tree's right edge of at most 255, the state records and the window's, here none) and replayed %d: what it reads does not grow with the history.\n",
		mark(warm <= targetStart.Seconds()), targetStart, warm, cold, base.warmMedian(openSeconds), tag, openSeconds(s.anchorOpen), count(s.anchorSize), count(s.warm[0].ReadAtOpen), s.warm[0].Replayed)
	dRSS := s.warmMedian(rssMiB) - base.warmMedian(rssMiB)
	fmt.Fprintf(sb, "- %s RSS ≤ %.0f MiB beyond an empty ledger's: %+.1f MiB (RssAnon %+.1f, RssFile %+.1f: the mapped pages of index.db that Open touched); %s held %.0f MiB after its Open at %s.\n",
		mark(dRSS <= targetRSSMiB), targetRSSMiB, dRSS, s.warmMedian(anonMiB)-base.warmMedian(anonMiB), s.warmMedian(fileMiB)-base.warmMedian(fileMiB), tag, rssMiB(s.anchorOpen), count(s.anchorSize))
	if f := s.warmLookups(findNs); len(f) > 0 {
		p99, cold := pct(f, 0.99), pct(s.cold.FindNs, 0.99)
		fmt.Fprintf(sb, "- %s lookup by serial ≤ %s (judged at p99): warm p99 %s, cold p99 %s (%s): one block in each of the index's runs of serials, the record's line and its leaf's tile.\n",
			mark(p99 <= targetLookup), targetLookup, fmtNs(p99), fmtNs(cold), coldVerdict(cold))
	}
	for i, c := range run.opts.appendCalls {
		ratios := s.rateRatios(i)
		rs, as := s.appends[i], s.anchorAppends[i]
		fmt.Fprintf(sb, "- %s appends with %d caller%s ≥ %.2f× %s at the same size: %.2f× (rounds %.2f–%.2f; %.0f against %.0f records/s%s). Per record the ledger spent %.0f µs of CPU against %.0f, at %.1f records per fsync against %.1f%s.\n",
			mark(median(ratios) >= targetAppendMin), c, plural(c), targetAppendMin, tag, median(ratios), slices.Min(ratios), slices.Max(ratios),
			appendMedian(rs, appendResult.rate), appendMedian(as, appendResult.rate), anchorAt(s), appendMedian(rs, appendResult.cpuPerRecord), appendMedian(as, appendResult.cpuPerRecord),
			appendMedian(rs, appendResult.perBatch), appendMedian(as, appendResult.perBatch), appendBound(c, rs, as))
	}
	sb.WriteString("\n")
}

func coldVerdict(d time.Duration) string {
	if d <= targetLookup {
		return "within the target too"
	}
	return "over the target: the pages come from the disk"
}

func anchorAt(s ledgerStep) string {
	if s.anchorSize == s.size {
		return ""
	}
	return fmt.Sprintf("; %s measured at %s records", "the anchor", count(s.anchorSize))
}

// appendBound says what bounds the ledger's append rate against the anchor's. Both write a
// batch per fsync, so a rate is batches per second times records per batch: with one caller
// each record waits for its own fsync; with many, the figures say which of the two differs.
func appendBound(callers int, rs, as []appendResult) string {
	rate, arate := appendMedian(rs, appendResult.rate), appendMedian(as, appendResult.rate)
	per, aper := appendMedian(rs, appendResult.perBatch), appendMedian(as, appendResult.perBatch)
	if callers == 1 {
		return fmt.Sprintf(": one caller waits for its own fsync, %.0f µs per append against %.0f", 1e6/rate, 1e6/arate)
	}
	batches, abatches := rate/per, arate/aper
	text := fmt.Sprintf(": %.0f batches/s of %.1f records against %.0f of %.1f", batches, per, abatches, aper)
	switch {
	case batches > 0.85*abatches && per < 0.85*aper:
		text += "; the fsyncs come as fast, but fewer callers are back in the queue when a batch begins: on these cores the indexer's work (a bbolt transaction and the full tiles every second, or sooner past 65,536 waiting records) and the extra CPU per record slow the answered callers' return"
	case per >= 0.85*aper && batches < 0.85*abatches:
		text += "; the batches are as full, but each takes longer to write and sync"
	}
	return text
}

// maxRead is the most records a warm start read at any size.
func maxRead(steps []ledgerStep) uint64 {
	var n uint64
	for _, s := range steps {
		for _, o := range s.warm {
			n = max(n, o.ReadAtOpen)
		}
	}
	return n
}

// writeModel says how each figure grows, from the measured sizes, and what that means for the
// issue's two workloads.
func writeModel(sb *strings.Builder, run ledgerRun) {
	s := run.steps[len(run.steps)-1]
	if s.size == 0 {
		return
	}
	sb.WriteString("## Model\n\n")
	n := float64(s.size)
	seg, idx, tiles := float64(s.disk.segments)/n, float64(s.disk.index)/n, float64(s.disk.tiles)/n
	per := seg + idx + tiles
	fmt.Fprintf(sb, "- Disk grows linearly: %.0f B per record at %s records (segments %.0f, index.db %.0f, tiles/ %.0f). A 10,000-node cluster's year (%s records) takes %s; a pod signer for 100,000 pods renewing hourly (%s records a day) writes %s a day, %s a month, %.1f segments of 1 GiB a day.\n",
		per, count(s.size), seg, idx, tiles, count(clusterPerYear), gib(per*clusterPerYear), count(podsPerDay), gib(per*podsPerDay), gib(per*podsPerDay*30), seg*podsPerDay/float64(1<<30))
	base := run.steps[0]
	dStart := s.warmMedian(openSeconds) - base.warmMedian(openSeconds)
	dRSS := s.warmMedian(rssMiB) - base.warmMedian(rssMiB)
	fmt.Fprintf(sb, "- Start and RSS: from 0 to %s records the warm start changed by %+.3f s and RSS by %+.1f MiB (%s: %+.1f s and %+.0f MiB), while Open read at most %s records at any size. What remains grows with the tree's levels and the index file, not with the records: OpenTiles reads and hashes the full tiles of the tree's right edge (up to 255 a level, so it varies with the size's position in its tiles), and bbolt loads index.db's list of free pages. What a start reads grows with the idempotency window's traffic instead: every record of the last 24 h is read and replayed.",
		count(s.size), dStart, dRSS, run.opts.anchorTag, openSeconds(s.anchorOpen)-openSeconds(base.anchorOpen), rssMiB(s.anchorOpen)-rssMiB(base.anchorOpen), count(maxRead(run.steps)))
	if s.anchorOpen.OpenNs > 0 && s.anchorSize > 0 {
		readRate := float64(s.anchorSize) / openSeconds(s.anchorOpen)
		fmt.Fprintf(sb, " At the rate %s read its whole ledger here (%.0f records/s; the ledger's window read checks each record against the tree too, so take it as a floor), the pod signer's window of %s records would take about %.0f s to read at each start, and a 10,000-node cluster's (%s) %.1f s: that window, not the history, is what bounds their starts now.",
			run.opts.anchorTag, readRate, count(podsPerDay), podsPerDay/readRate, count(clusterPerYear/365), float64(clusterPerYear/365)/readRate)
	}
	sb.WriteString("\n")
	if f := s.warmLookups(findNs); len(f) > 0 {
		fmt.Fprintf(sb, "- Lookups read one block in each of the index's sorted runs of serials (a few runs a level, levels growing with the logarithm of the history), then one line and one leaf tile: warm p50 %s at %s records", fmtNs(pct(f, 0.5)), count(s.size))
		for _, st := range run.steps[1 : len(run.steps)-1] {
			fmt.Fprintf(sb, ", %s at %s", fmtNs(pct(st.warmLookups(findNs), 0.5)), count(st.size))
		}
		sb.WriteString(".\n")
	}
	sb.WriteString("- Appends pay, beside the fsync that bounds them, the leaf hash into the tree's right edge and an index entry queued for the indexer, which writes the full tiles and one bbolt transaction every second (sooner past 65,536 waiting records) off the append path: the batch's serials and object UIDs go into index.db as one new sorted run, which a background merge later folds into larger ones (each id is rewritten about once a level). The batch writer itself does less than the anchor's: callers encode their records' fields before joining a batch, and the writer splices in seq, time and prevHash. The CPU column shows what the background work costs per record against " + run.opts.anchorTag + ".\n")
}
