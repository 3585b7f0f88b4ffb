package main

// The ledger's timings of -fleet: record to covering checkpoint, integrator failover, and the
// cold start with a long history in the database.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/server/pgstate"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

// lagRow is the record-to-checkpoint lag with n servers under callers.
type lagRow struct {
	servers, callers int
	lags             []time.Duration // sorted
	uncovered        int             // issuances no checkpoint covered within the wait
	rate             float64         // issuances per second meanwhile
	poll             time.Duration   // the mean time between two GetCheckpoint answers
}

// checkpointLag measures, for the smallest and the largest fleet, under 1 and the most
// callers, the time from each answer of servers[0] to the first GetCheckpoint answer of
// servers[0] (polled back to back, one call in flight) whose size covers the issuance's record.
func (b *fleetBench) checkpointLag(ctx context.Context, o fleetOpts) ([]lagRow, error) {
	var out []lagRow
	for _, n := range []int{o.sizes[0], o.sizes[len(o.sizes)-1]} {
		if len(out) > 0 && out[0].servers == n {
			break
		}
		db := fmt.Sprintf("lag%d", n)
		servers, err := b.startFleet(ctx, db, "", n, "shared")
		if err != nil {
			return nil, err
		}
		for _, callers := range []int{1, slices.Max(o.callers)} {
			row, err := b.lagOnce(ctx, servers, db, callers, o.lagTime)
			if err != nil {
				stopAll(servers)
				return nil, err
			}
			fmt.Fprintf(os.Stderr, "fleet: record to covering checkpoint, %d servers, %d callers (%.0f issuances/s): p50 %s, p99 %s, max %s over %d issuances; %d not covered\n",
				n, callers, row.rate, quantile(row.lags, 0.5).Round(time.Millisecond), quantile(row.lags, 0.99).Round(time.Millisecond),
				quantile(row.lags, 1).Round(time.Millisecond), len(row.lags), row.uncovered)
			out = append(out, row)
		}
		stopAll(servers)
	}
	return out, nil
}

// lagPoll is the pause between two GetCheckpoint calls of the lag measurement: each call
// reads the database (the server brings its proofs up to date before it answers), so polling
// back to back would load it.
const lagPoll = 10 * time.Millisecond

// answered is an issuance's answer as the client received it.
type answered struct {
	at     time.Time
	serial string
}

// sizeSeen is a checkpoint size first seen at a time.
type sizeSeen struct {
	at   time.Time
	size int64
}

func (b *fleetBench) lagOnce(ctx context.Context, servers []*fleetServer, db string, callers int, d time.Duration) (lagRow, error) {
	row := lagRow{servers: len(servers), callers: callers}
	var (
		mu      sync.Mutex
		answers []answered
		seen    []sizeSeen
		polls   atomic.Int64
		next    atomic.Int64
		failed  atomic.Pointer[error]
		wg      sync.WaitGroup
	)
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		last := int64(-1)
		for ; pollCtx.Err() == nil; time.Sleep(lagPoll) {
			signed, err := servers[0].client.LedgerCheckpoint(pollCtx)
			at := time.Now()
			if err != nil {
				continue
			}
			polls.Add(1)
			if size := noteSize(signed); size > last {
				last = size
				seen = append(seen, sizeSeen{at, size})
			}
		}
	}()
	start := time.Now()
	deadline := start.Add(d)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) && failed.Load() == nil {
				s := servers[int(next.Add(1))%len(servers)]
				serial, err := b.sign(ctx, s)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if s == servers[0] {
					at := time.Now()
					mu.Lock()
					answers = append(answers, answered{at, serial})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	row.rate = float64(next.Load()) / time.Since(start).Seconds()
	// Wait for the last answers to be covered (or 10 s).
	head := b.journalHead(ctx, db)
	for t := time.Now(); time.Since(t) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		if p := failed.Load(); p != nil {
			break
		}
		signed, err := servers[0].client.LedgerCheckpoint(ctx)
		if err == nil && noteSize(signed) >= head {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	stopPolling()
	<-polled
	if p := failed.Load(); p != nil {
		return row, *p
	}
	row.poll = time.Since(start) / time.Duration(max(polls.Load(), 1))
	seqs, err := b.seqsOf(ctx, db, answers)
	if err != nil {
		return row, err
	}
	for _, a := range answers {
		seq, ok := seqs[a.serial]
		if !ok {
			return row, fmt.Errorf("fleet: the issuance of serial %s is not in the journal", a.serial)
		}
		i := slices.IndexFunc(seen, func(s sizeSeen) bool { return s.size >= seq })
		if i < 0 {
			row.uncovered++
			continue
		}
		row.lags = append(row.lags, max(seen[i].at.Sub(a.at), 0))
	}
	slices.Sort(row.lags)
	return row, nil
}

// seqsOf maps the serials of answers to their records' seqs.
func (b *fleetBench) seqsOf(ctx context.Context, db string, answers []answered) (map[string]int64, error) {
	p, err := b.pool(ctx, db)
	if err != nil {
		return nil, err
	}
	byNorm := map[string]string{}
	var norms []string
	for _, a := range answers {
		n, err := record.NormalizeSerial(a.serial)
		if err != nil {
			return nil, fmt.Errorf("fleet: serial %q: %w", a.serial, err)
		}
		byNorm[n] = a.serial
		norms = append(norms, n)
	}
	rows, err := p.Query(ctx, `SELECT serial, seq FROM ledger_records WHERE serial = ANY($1)`, norms)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var n string
		var seq int64
		if err := rows.Scan(&n, &seq); err != nil {
			rows.Close()
			return nil, err
		}
		out[byNorm[n]] = seq
	}
	rows.Close()
	return out, rows.Err()
}

// noteSize is the tree size line of a signed checkpoint (-1 if it has none).
func noteSize(signed []byte) int64 {
	lines := strings.SplitN(string(signed), "\n", 3)
	if len(lines) < 2 {
		return -1
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// failover is one SIGKILL of the integrator: until a checkpoint under a higher fence.
type failover struct {
	took       time.Duration
	fence      int64 // the killed holder's
	next       int64 // the first higher fence stored
	issuedMean float64
}

// failovers kills the integrator of a fleet of the largest size o.kills times, under a light
// load on the other servers (2 callers), and times each until a checkpoint is stored under a
// higher fence; the killed server is started again before the next.
func (b *fleetBench) failovers(ctx context.Context, o fleetOpts) ([]failover, time.Duration, error) {
	n := max(slices.Max(o.sizes), 2)
	const db = "failover"
	servers, err := b.startFleet(ctx, db, "", n, "shared")
	if err != nil {
		return nil, 0, err
	}
	defer func() { stopAll(servers) }()
	p, err := b.pool(ctx, db)
	if err != nil {
		return nil, 0, err
	}
	var out []failover
	for k := range o.kills {
		var holder string
		var fence int64
		if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			var h *string
			if err := p.QueryRow(ctx, `SELECT holder, fence FROM integrator_lease WHERE id`).Scan(&h, &fence); err != nil {
				return false, err
			}
			var stored bool
			if err := p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE fence = $1)`, fence).Scan(&stored); err != nil {
				return false, err
			}
			if h != nil {
				holder = *h
			}
			return h != nil && stored, nil
		}); err != nil {
			return nil, 0, fmt.Errorf("fleet: waiting for an integrator: %w", err)
		}
		victim := slices.IndexFunc(servers, func(s *fleetServer) bool { return strings.HasSuffix(holder, "/"+strconv.Itoa(s.pid())) })
		if victim < 0 {
			return nil, 0, fmt.Errorf("fleet: the integrator %q is none of the bench's servers", holder)
		}
		others := slices.Delete(slices.Clone(servers), victim, victim+1)
		stopLoad := b.background(ctx, others, 2)
		time.Sleep(time.Second)
		t0 := time.Now()
		_ = syscall.Kill(servers[victim].pid(), syscall.SIGKILL)
		var next int64
		err := waitFor(ctx, 60*time.Second, func() (bool, error) {
			err := p.QueryRow(ctx, `SELECT coalesce(min(fence), 0) FROM checkpoints WHERE fence > $1`, fence).Scan(&next)
			return next > 0, err
		})
		took := time.Since(t0)
		issued := stopLoad()
		<-servers[victim].exited
		if err != nil {
			return nil, 0, fmt.Errorf("fleet: after killing the integrator: %w", err)
		}
		f := failover{took: took, fence: fence, next: next, issuedMean: issued}
		fmt.Fprintf(os.Stderr, "fleet: failover %d: integrator (fence %d) SIGKILLed, checkpoint under fence %d after %s\n", k+1, fence, next, took.Round(time.Millisecond))
		out = append(out, f)
		s, err := startFleetServer(ctx, b.bin, servers[victim].name, servers[victim].config, b.pkiDir, filepath.Join(b.work, "logs"), "", time.Minute)
		if err != nil {
			return nil, 0, err
		}
		servers[victim] = s
	}
	return out, config.DefaultIntegratorLease, nil
}

// background issues from callers goroutines on servers until the returned function is
// called, which returns the issuances per second.
func (b *fleetBench) background(ctx context.Context, servers []*fleetServer, callers int) func() float64 {
	var (
		stop atomic.Bool
		n    atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for i := range callers {
		wg.Go(func() {
			for j := i; !stop.Load(); j++ {
				if _, err := b.sign(ctx, servers[j%len(servers)]); err == nil {
					n.Add(1)
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return func() float64 {
		stop.Store(true)
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
}

// waitFor polls cond every 10 ms until it holds, fails, or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("not within %s (last error: %v)", limit, last)
}

// migrate brings database db to the fleet's schema, as a server does when it opens it.
func (b *fleetBench) migrate(ctx context.Context, db string) error {
	if !b.dbs[db] {
		if err := b.pg.CreateDatabase(ctx, db); err != nil {
			return err
		}
		b.dbs[db] = true
	}
	p, err := b.pool(ctx, db)
	if err != nil {
		return err
	}
	ms, err := pgstate.Migrations()
	if err != nil {
		return err
	}
	_, err = pgstate.Migrate(ctx, p, ms)
	return err
}

// fill imports n generated issuance records (ledgerscale_gen.go's, sealed into one chain)
// into the empty database db, through the importer signetctl ledger import uses.
func (b *fleetBench) fill(ctx context.Context, db string, n int) error {
	p, err := b.pool(ctx, db)
	if err != nil {
		return err
	}
	lp, err := makePool(time.Now())
	if err != nil {
		return err
	}
	lines := make(chan [][]byte, 8)
	genErr := make(chan error, 1)
	go func() {
		defer close(lines)
		g := newRecordGen(lp)
		prev := record.ZeroHash
		chunk := make([][]byte, 0, 1024)
		for i := range n {
			r := g.next()
			r.Seq, r.Time, r.PrevHash = uint64(i+1), lp.Clock.Add(time.Duration(i)*time.Millisecond), prev
			r.Normalize()
			line, err := r.Seal()
			if err != nil {
				genErr <- err
				return
			}
			prev = r.Hash
			chunk = append(chunk, line[:len(line)-1])
			if len(chunk) == cap(chunk) || i == n-1 {
				select {
				case lines <- chunk:
				case <-ctx.Done():
					genErr <- ctx.Err()
					return
				}
				chunk = make([][]byte, 0, 1024)
			}
		}
		genErr <- nil
	}()
	im, err := ledgertable.BeginImport(ctx, p)
	if err != nil {
		return err
	}
	for chunk := range lines {
		for _, line := range chunk {
			if err := im.Add(ctx, line); err != nil {
				im.Rollback(ctx)
				return err
			}
		}
	}
	if err := <-genErr; err != nil {
		im.Rollback(ctx)
		return err
	}
	_, err = im.Commit(ctx)
	return err
}
