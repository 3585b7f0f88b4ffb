package main

// The report of -fleet (docs/benchmarks-fleet.md).

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// fleetReport is everything a -fleet run measured.
type fleetReport struct {
	opts        fleetOpts
	cores       int
	pgVersion   string
	busyAtStart float64
	elapsed     time.Duration
	rows        []fleetRow
	trips       []tripRow
	lags        []lagRow
	failovers   []failover
	lease       time.Duration
	cold        [2]coldRow
}

// Targets of issue 43.
const (
	fleetTargetRatio    = 0.7
	fleetTargetLagP99   = time.Second
	fleetTargetFailover = 10 * time.Second
	fleetTargetCold     = 5 * time.Second
)

func fleetVerdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "BELOW"
}

func (r fleetReport) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "# signet-server on a fleet's PostgreSQL against the file ledger\n\n")
	fmt.Fprintf(&b, "`go run ./hack/bench -fleet -bin bin -out docs/benchmarks-fleet.md` (hack/bench/fleet*.go; `make bench` runs it) wrote this file: issue 43's Speed section, in one run of %s on %d cores (%s), PostgreSQL %s from the distribution's packages (internal/pgtest: its own data directory, fsync and synchronous_commit on, default settings), the machine %.0f%% busy before the run.\n\n",
		r.elapsed.Round(time.Second), r.cores, cpuModel(), r.pgVersion, 100*r.busyAtStart)
	fmt.Fprintf(&b, "Every server is the real signet-server binary, started fresh for each measurement: the dev PKI, one P-256 CA, the kube-apiserver-client profile, the lint gate %s, idempotency and the ledger as configured by default; on PostgreSQL `state.backend: postgres` with the default claim lease (%s) and integrator lease (%s), one shared Ed25519 checkpoint key. The client is the server-alone bench's: signerclient (mutual TLS, one connection per server), each call a CSR with a new object UID, the calls spread over the servers in turn.\n\n",
		map[bool]string{false: "off (it costs milliseconds per certificate and would hide the state's cost)", true: "on"}[o.lint], "30s", r.lease)

	r.writeThroughput(&b)
	r.writeWaits(&b)
	r.writeTrips(&b)
	r.writeModel(&b)
	r.writeLag(&b)
	r.writeFailover(&b)
	r.writeCold(&b)
	r.writeAnalysis(&b)
	return b.String()
}

func (r fleetReport) writeThroughput(b *strings.Builder) {
	o := r.opts
	fmt.Fprintf(b, "## Issuances per second\n\n")
	fmt.Fprintf(b, "%d s per measurement, %d interleaved rounds (each round starts every shape's servers fresh and warms them up for 0.5 s); the medians, and the ratio to the file ledger taken within each round (its median and range). CPU per issuance is utime+stime from /proc over the measurement: of the signet-server processes, of PostgreSQL (postmaster and backends, exited ones included) and of the client (this process). Records per batch: the journal's records over its transactions (a batch stamps its records with one time).\n\n",
		int(o.d.Seconds()), o.rounds)
	fmt.Fprintf(b, "Layouts: **shared**, every process on both cores, as the server-alone bench runs; **pinned**, the servers and PostgreSQL on core %d, the client on core 0 (`taskset`/`sched_setaffinity`, inherited by the processes' threads and PostgreSQL's backends): one server host with one core, the client elsewhere.\n\n", r.cores-1)
	fmt.Fprintf(b, "| layout | state | callers | issuances/s | ratio to the file ledger | rounds' ratios | servers' CPU per issuance | PostgreSQL's CPU per issuance | client's CPU per issuance | records per batch | target |\n")
	fmt.Fprintf(b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.rows {
		rates, srv, db, cli, batch := []float64{}, []float64{}, []float64{}, []float64{}, []float64{}
		for _, res := range row.runs {
			rates = append(rates, res.rate())
			srv, db, cli = append(srv, res.perOp(res.server)), append(db, res.perOp(res.db)), append(cli, res.perOp(res.client))
			if res.batches > 0 {
				batch = append(batch, float64(res.records)/float64(res.batches))
			}
		}
		target, batchCell, dbCell := "", "–", "–"
		if row.shape.unlogged {
			target = "diagnostic"
		}
		if row.shape.db != "" {
			batchCell = fmt.Sprintf("%.1f", median(batch))
			dbCell = fmt.Sprintf("%.0f µs", median(db))
			if row.shape.n == 1 && !row.shape.unlogged {
				meeting := 0
				for _, x := range row.ratios {
					if x >= fleetTargetRatio {
						meeting++
					}
				}
				target = fmt.Sprintf("≥ %.2f %s (%d of %d rounds)", fleetTargetRatio, fleetVerdict(median(row.ratios) >= fleetTargetRatio), meeting, len(row.ratios))
			}
		} else {
			target = "anchor"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.0f | %.2f | %.2f–%.2f | %.0f µs | %s | %.0f µs | %s | %s |\n",
			row.layout, row.shape.label(), row.callers, median(rates), median(row.ratios), slices.Min(row.ratios), slices.Max(row.ratios),
			median(srv), dbCell, median(cli), batchCell, target)
	}
	b.WriteString("\n")
}

// writeWaits gives what PostgreSQL's active backends were doing during the throughput runs of
// one server at the most callers, summed over the rounds, for the database and the diagnostic.
func (r fleetReport) writeWaits(b *strings.Builder) {
	hi := slices.Max(r.opts.callers)
	layout := r.opts.layouts[0]
	fmt.Fprintf(b, "### What PostgreSQL's busy backends were doing\n\n")
	fmt.Fprintf(b, "pg_stat_activity sampled every 50 ms during the throughput runs of one server at %d callers (%s layout, all rounds): the active backends of the database, by wait event and statement (\"running\": no wait).\n\n", hi, layout)
	fmt.Fprintf(b, "| state | wait and statement | samples | share |\n|---|---|---|---|\n")
	for _, db := range []string{fmt.Sprintf("fleet%d", r.opts.sizes[0]), "diagunlogged"} {
		row, ok := r.row(layout, db, hi)
		if !ok {
			continue
		}
		tally := map[string]int{}
		total := 0
		for _, res := range row.runs {
			for k, v := range res.waits {
				tally[k] += v
				total += v
			}
		}
		keys := slices.SortedFunc(maps.Keys(tally), func(a, c string) int { return tally[c] - tally[a] })
		for i, k := range keys {
			if i == 6 {
				break
			}
			fmt.Fprintf(b, "| %s | `%s` | %d | %.0f%% |\n", row.shape.label(), k, tally[k], 100*float64(tally[k])/float64(max(total, 1)))
		}
	}
	b.WriteString("\n")
}

func (r fleetReport) writeTrips(b *strings.Builder) {
	if len(r.trips) == 0 {
		return
	}
	fmt.Fprintf(b, "## Round trips to PostgreSQL per issuance\n\n")
	fmt.Fprintf(b, "Counted in runs of their own (shared layout, %d s each), through a loopback proxy between the servers and PostgreSQL: a round trip is a flight of bytes from a server that follows bytes from PostgreSQL (the server waited for an answer); messages are the frontend protocol's, by type (P parse, B bind, E execute, S sync, Q simple query, d copy data); a transaction is a ReadyForQuery back to idle. Per issuance, after taking out the background measured over 3 s idle (the integrator's rounds, each server's checkpoint refresh and database probe), given in round trips per second of the whole fleet.\n\n", int(r.opts.d.Seconds()))
	fmt.Fprintf(b, "| servers | callers | issuances | round trips | transactions | P | B | E | S | Q | d | records per batch | background round trips/s |\n")
	fmt.Fprintf(b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.trips {
		m := func(c byte) string { return fmt.Sprintf("%.2f", float64(t.perOp.msgs[c])/1000) }
		fmt.Fprintf(b, "| %d | %d | %d | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %.1f | %.0f |\n",
			t.servers, t.callers, t.ops, float64(t.perOp.trips)/1000, float64(t.perOp.xacts)/1000,
			m('P'), m('B'), m('E'), m('S'), m('Q'), m('d'), t.batch, t.background)
	}
	b.WriteString("\n")
}

// cpuAt is the median CPU per issuance (µs) of servers and PostgreSQL, and the rate, of a
// shape in a layout at callers.
func (r fleetReport) cpuAt(layout string, db string, callers int) (server, pg, rate float64, ok bool) {
	for _, row := range r.rows {
		if row.layout == layout && row.shape.db == db && row.callers == callers {
			var s, d, q []float64
			for _, res := range row.runs {
				s, d, q = append(s, res.perOp(res.server)), append(d, res.perOp(res.db)), append(q, res.rate())
			}
			return median(s), median(d), median(q), true
		}
	}
	return 0, 0, 0, false
}

func (r fleetReport) writeModel(b *strings.Builder) {
	callers := slices.Max(r.opts.callers)
	layout := "pinned"
	if !slices.Contains(r.opts.layouts, layout) {
		layout = r.opts.layouts[0]
	}
	fileS, _, fileRate, ok := r.cpuAt(layout, "", callers)
	if !ok {
		return
	}
	fmt.Fprintf(b, "## Scaling model: what separate hosts would do\n\n")
	fmt.Fprintf(b, "On this box every server and PostgreSQL share the cores, so more servers cannot add CPU; the figures above measure cost, not scale. The model takes the CPU time per issuance measured in the %s layout at %d callers (servers and PostgreSQL on one core, where the time they take is the time they use) and predicts hosts of one such core each: N servers on N hosts sign at most N / (server CPU per issuance), and one PostgreSQL host at most 1 / (its CPU per issuance); the smaller bound limits. The client's CPU (on its own core here) is the load generator's, not the fleet's. The check of the model is the first row: with the servers and PostgreSQL on one core, it predicts 1 / (server + PostgreSQL CPU per issuance).\n\n", layout, callers)
	fmt.Fprintf(b, "| state | servers | measured on one core | the core busy (measured × CPU per issuance) | model on one core | servers' bound on their own hosts | PostgreSQL's bound on its own host | predicted, separate hosts | bound that limits | predicted ratio to one file-ledger host |\n")
	fmt.Fprintf(b, "|---|---|---|---|---|---|---|---|---|---|\n")
	fileBound := 1e6 / fileS
	fmt.Fprintf(b, "| file ledger | 1 | %.0f/s | %.0f%% | %.0f/s | %.0f/s | – | %.0f/s | the server's CPU | 1.00 |\n", fileRate, fileRate*fileS/1e4, 1e6/fileS, fileBound, fileBound)
	for _, n := range r.opts.sizes {
		s, d, rate, ok := r.cpuAt(layout, fmt.Sprintf("fleet%d", n), callers)
		if !ok || s <= 0 || d <= 0 {
			continue
		}
		perServer := s // µs per issuance, all servers together: each server does its share
		srvBound := float64(n) * 1e6 / perServer
		dbBound := 1e6 / d
		pred, limit := srvBound, "the servers' CPU"
		if dbBound < srvBound {
			pred, limit = dbBound, "PostgreSQL's CPU"
		}
		fmt.Fprintf(b, "| PostgreSQL | %d | %.0f/s | %.0f%% | %.0f/s | %.0f/s | %.0f/s | %.0f/s | %s | %.2f |\n",
			n, rate, rate*(s+d)/1e4, 1e6/(s+d), srvBound, dbBound, pred, limit, pred/fileBound)
	}
	b.WriteString("\nWhere the core is not fully busy, the measured rate is bounded by waiting (fsyncs, the write-ahead log, round trips), not by CPU, and the model over-predicts that row: the prediction for separate hosts is then an upper bound. The file ledger's row is the case in point when its core is well below 100 %: its fsyncs, not its CPU, bound it on one core, so the predicted ratios to it are pessimistic for the fleet by as much.\n\n")
}

func (r fleetReport) writeLag(b *strings.Builder) {
	if len(r.lags) == 0 {
		return
	}
	fmt.Fprintf(b, "## Record to covering checkpoint\n\n")
	fmt.Fprintf(b, "For %d s under load (shared layout), every answer of the first server is timed against that server's GetCheckpoint, polled every %s (one call in flight; each reads the database): the lag is the time from the answer to the first GetCheckpoint answer whose tree size covers the issuance's record (its seq, read from the journal afterwards). The poll's period (the pause and the call) adds up to one period to each lag.\n\n", int(r.opts.lagTime.Seconds()), lagPoll)
	fmt.Fprintf(b, "| servers | callers | issuances/s | issuances timed | GetCheckpoint period | p50 | p90 | p99 | max | not covered within 10 s | target p99 ≤ 1 s |\n")
	fmt.Fprintf(b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range r.lags {
		p99 := quantile(l.lags, 0.99)
		fmt.Fprintf(b, "| %d | %d | %.0f | %d | %s | %s | %s | %s | %s | %d | %s |\n", l.servers, l.callers, l.rate, len(l.lags),
			l.poll.Round(100*time.Microsecond), fleetMs(quantile(l.lags, 0.5)), fleetMs(quantile(l.lags, 0.9)), fleetMs(p99), fleetMs(quantile(l.lags, 1)), l.uncovered,
			fleetVerdict(p99 <= fleetTargetLagP99 && l.uncovered == 0))
	}
	b.WriteString("\n")
}

func fleetMs(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func (r fleetReport) writeFailover(b *strings.Builder) {
	if len(r.failovers) == 0 {
		return
	}
	fmt.Fprintf(b, "## Integrator failover\n\n")
	fmt.Fprintf(b, "%d servers on one database, 2 callers issuing on the others throughout; the server holding `integrator_lease` (holder host/pid) is SIGKILLed (its lease is not released), and the time runs until `checkpoints` holds a row under a higher fence. The killed server is started again before the next kill. Integrator lease: %s (state.postgres.integratorLease, the default).\n\n", max(slices.Max(r.opts.sizes), 2), r.lease)
	fmt.Fprintf(b, "| kill | killed integrator's fence | next checkpoint's fence | time to a checkpoint under it | issuances/s meanwhile | target ≤ 10 s |\n|---|---|---|---|---|---|\n")
	for i, f := range r.failovers {
		fmt.Fprintf(b, "| %d | %d | %d | %.2f s | %.0f | %s |\n", i+1, f.fence, f.next, f.took.Seconds(), f.issuedMean, fleetVerdict(f.took <= fleetTargetFailover))
	}
	b.WriteString("\n")
}

func (r fleetReport) writeCold(b *strings.Builder) {
	if len(r.cold[1].starts) == 0 {
		return
	}
	fmt.Fprintf(b, "## Cold start\n\n")
	fmt.Fprintf(b, "A server process from exec to its first `/readyz` 200 (polled every 5 ms), on a database holding %d issuance records (generated as the ledger-scale bench's, sealed into one chain and loaded with the importer `signetctl ledger import` uses, in %s), after one server had integrated them (tiles in tree_tiles, a checkpoint covering them), against the same start on an empty database; %d starts of each, alternating, stopped with SIGTERM. PostgreSQL's caches are warm (it keeps running).\n\n",
		r.cold[1].records, r.cold[1].fill.Round(time.Second), len(r.cold[1].starts))
	fmt.Fprintf(b, "| database | records | size | start, median | starts | ratio to the empty database | first start (no checkpoint yet) | integrator to a covering checkpoint, after that start | target ≤ 5 s |\n|---|---|---|---|---|---|---|---|---|\n")
	base := median(durationsF(r.cold[0].starts))
	for i, c := range r.cold {
		name := []string{"empty", "filled"}[i]
		starts := durationsF(c.starts)
		var list []string
		for _, s := range c.starts {
			list = append(list, fmt.Sprintf("%.2f", s.Seconds()))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %.2f s | %s s | %.2f | %.2f s | %.1f s | %s |\n", name, c.records, gib(c.dbBytes), median(starts),
			strings.Join(list, ", "), median(starts)/base, c.first.Seconds(), c.integrate.Seconds(), fleetVerdict(median(starts) <= fleetTargetCold.Seconds() && slices.Max(starts) <= fleetTargetCold.Seconds()))
	}
	b.WriteString("\n")
}

func durationsF(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// row returns the row of a shape (by database; "" the file ledger) in a layout at callers.
func (r fleetReport) row(layout, db string, callers int) (fleetRow, bool) {
	for _, row := range r.rows {
		if row.layout == layout && row.shape.db == db && row.callers == callers {
			return row, true
		}
	}
	return fleetRow{}, false
}

// writeAnalysis explains what bounds each figure, with the run's own numbers.
func (r fleetReport) writeAnalysis(b *strings.Builder) {
	fmt.Fprintf(b, "## What bounds each figure on this box\n\n")
	lo, hi := slices.Min(r.opts.callers), slices.Max(r.opts.callers)
	db1 := fmt.Sprintf("fleet%d", r.opts.sizes[0])
	for _, layout := range r.opts.layouts {
		one, ok1 := r.row(layout, db1, lo)
		many, ok2 := r.row(layout, db1, hi)
		if !ok1 || !ok2 {
			continue
		}
		fmt.Fprintf(b, "- **One server on PostgreSQL, %s layout: %.2f× the file ledger at %d caller, %.2f× at %d.**", layout, median(one.ratios), lo, median(many.ratios), hi)
		if diag, ok := r.row(layout, "diagunlogged", hi); ok {
			fmt.Fprintf(b, " With the answers table UNLOGGED (the diagnostic row: the claims write no write-ahead log at all) the same server reaches %.2f× at %d callers", median(diag.ratios), hi)
			if d1, ok := r.row(layout, "diagunlogged", lo); ok {
				fmt.Fprintf(b, " and %.2f× at %d", median(d1.ratios), lo)
			}
			b.WriteString(".")
		}
		b.WriteString("\n")
	}
	if len(r.trips) > 0 {
		var one, many tripRow
		for _, t := range r.trips {
			if t.servers == r.trips[0].servers && t.callers == lo {
				one = t
			}
			if t.servers == r.trips[0].servers && t.callers == hi {
				many = t
			}
		}
		fmt.Fprintf(b, "- **Why, at %d callers:** an issuance costs PostgreSQL two things: its claim (an `INSERT … ON CONFLICT` before it is signed) and its record (the journal's batch, after). Both are batched across the calls in flight: the claims waiting are inserted by one multi-row statement in one transaction, which commits with `synchronous_commit` off (a claim lost in a crash is safe: the journal re-checks it under a row lock in its durable commit), and the journal's batches hold %.0f records; PostgreSQL ends %.2f transactions per issuance. What is left of the gap is CPU: the statements PostgreSQL parses, plans and executes (its CPU per issuance, below) and the server's protocol work for them, on the same two cores as the file ledger's one fsync per batch. The UNLOGGED diagnostic row, which takes the claims' write-ahead log away altogether, shows what the log still costs.\n",
			hi, many.batch, float64(many.perOp.xacts)/1000)
		fmt.Fprintf(b, "- **Why, at %d caller:** latency. An issuance waits for %.1f round trips and %.1f transactions (the table above): the claim (one round trip, no flush of its own; a batch of one), then the journal's batch of one (two round trips and a durable commit: the log flush the file ledger's fsync stands for); PostgreSQL's CPU per issuance is of the order of the server's own.\n",
			lo, float64(one.perOp.trips)/1000, float64(one.perOp.xacts)/1000)
	}
	if fs, _, _, ok := r.cpuAt("pinned", "", hi); ok {
		if s, d, _, ok := r.cpuAt("pinned", db1, hi); ok {
			fmt.Fprintf(b, "- **CPU, pinned layout at %d callers:** a server on the file ledger spends %.0f µs per issuance; on PostgreSQL %.0f µs (+%.0f µs: the pgx protocol, the claim, the journal's transaction), and PostgreSQL %.0f µs more. With the servers and PostgreSQL on one core the issuances/s are near 1 / (their sum), which the model's first rows check; on separate hosts the server's own cost is what limits one server, and PostgreSQL's (which grows with the servers: each server's claims and records are batched only with its own calls, and each server's proofs read the database before every answer and reopen the tree at each new checkpoint) what limits a fleet.\n", hi, fs, s, s-fs, d)
		}
	}
	if row, ok := r.row("pinned", "", hi); ok {
		var pg []float64
		for _, res := range row.runs {
			pg = append(pg, res.perOp(res.db))
		}
		fmt.Fprintf(b, "- **The pinned layout's anchor is the noisiest figure:** the file-ledger server shares its core with PostgreSQL, which sits idle for it but still runs its background work on the databases of the other shapes (autovacuum, the checkpointer; up to %.0f µs per file-ledger issuance in these rounds, though a CHECKPOINT precedes every measurement), and its core is not CPU-bound (the model's table), so the pinned ratios vary most from round to round; the shared layout's are the steadier comparison.\n", slices.Max(pg))
	}
	b.WriteString("- **Two and three servers on this box** share the same two cores, so they add contention, not CPU: their rates above measure the cost of a fleet (more connections, smaller batches per server, every server following the checkpoints), and the scaling model gives what separate hosts would do.\n")
	if len(r.lags) > 0 {
		worst := slices.MaxFunc(r.lags, func(a, c lagRow) int { return int(quantile(a.lags, 0.99) - quantile(c.lags, 0.99)) })
		fmt.Fprintf(b, "- **Record to covering checkpoint** (worst p99 %s): bounded by the integrator's period (ledger.checkpoint.interval, 250 ms by default: a record waits up to one period for the next round), then its round (renew the lease, read the new records, hash them into the tree, sign, store under the fence), then the server's own proofs catching up before it answers GetCheckpoint (each answer reads the database first), plus the poll's %s.\n",
			fleetMs(quantile(worst.lags, 0.99)), lagPoll)
	}
	if len(r.failovers) > 0 {
		var ts []float64
		for _, f := range r.failovers {
			ts = append(ts, f.took.Seconds())
		}
		fmt.Fprintf(b, "- **Integrator failover** (%.2f–%.2f s): bounded by the integrator lease (%s): the killed holder's lease must run out (it was renewed at most one round before the kill), then the next round of a survivor (every 250 ms) takes it under a new fence, opens the tree at the latest checkpoint (its tiles and at most 255 records) and stores the next checkpoint. A shorter lease fails over faster and renews more often.\n",
			slices.Min(ts), slices.Max(ts), r.lease)
	}
	if len(r.cold[1].starts) > 0 {
		full, empty := median(durationsF(r.cold[1].starts)), median(durationsF(r.cold[0].starts))
		fmt.Fprintf(b, "- **Cold start** (%.2f s with %d records, %.2f s empty): no replay of the history. A fleet server reads the rotation records (by their index), the journal's head, the latest checkpoint and the tree's right edge (tiles and at most 255 records), whatever the history's length; the rest is the process's start and its database connections. What does grow with the history is the first integration after an import, which checks each record as the next of the hash chain: %.1f s for %d records, done in the background while the servers already sign (the records are not covered by a checkpoint until then).\n",
			full, r.cold[1].records, empty, r.cold[1].integrate.Seconds(), r.cold[1].records)
	}
	b.WriteString("- **Not measured here:** the 10,000-CSR storm with CPU affinity (control plane and KCM or the watcher on one core, the signing servers and PostgreSQL on the other) beside today's shared-core figure in docs/benchmarks-storm.md; this run models separate hosts for the server alone (the pinned layout).\n")
}
