package main

// The throughput and round-trip runs of -fleet.

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
)

// fleetShape is a set of servers measured together: n servers on database db, or the file
// ledger (db empty).
type fleetShape struct {
	db string
	n  int
	// unlogged: the answers table is UNLOGGED (a diagnostic, not durable): a claim then commits
	// without flushing PostgreSQL's write-ahead log, which shows what the claim's own durable
	// commit costs each issuance.
	unlogged bool
}

func (s fleetShape) label() string {
	if s.unlogged {
		return "PostgreSQL, 1 server, answers UNLOGGED (diagnostic, not durable)"
	}
	if s.db == "" {
		return "file ledger, 1 server"
	}
	if s.n == 1 {
		return "PostgreSQL, 1 server"
	}
	return fmt.Sprintf("PostgreSQL, %d servers", s.n)
}

// fleetRow is one shape at one caller count in one layout, one result per round.
type fleetRow struct {
	layout  string
	shape   fleetShape
	callers int
	runs    []loadResult
	ratios  []float64 // each round's rate over the file ledger's in the same round
}

// shapes are the file ledger and each size of o on a database of its own.
func (o fleetOpts) shapes() []fleetShape {
	out := []fleetShape{{n: 1}}
	for _, n := range o.sizes {
		out = append(out, fleetShape{db: fmt.Sprintf("fleet%d", n), n: n})
	}
	if o.diagnostic {
		out = append(out, fleetShape{db: "diagunlogged", n: 1, unlogged: true})
	}
	return out
}

// throughput measures every shape of o at every caller count in layout, in interleaved
// rounds; each measurement starts its servers fresh and warms them up first.
func (b *fleetBench) throughput(ctx context.Context, o fleetOpts, layout string) ([]fleetRow, error) {
	if err := b.setLayout(layout); err != nil {
		return nil, err
	}
	shapes := o.shapes()
	rows := make([][]*fleetRow, len(shapes))
	for i, sh := range shapes {
		for _, c := range o.callers {
			rows[i] = append(rows[i], &fleetRow{layout: layout, shape: sh, callers: c})
		}
	}
	for round := range o.rounds {
		for _, i := range roundOrder(len(shapes), round) {
			sh := shapes[i]
			if sh.unlogged {
				if err := b.unlogAnswers(ctx, sh.db); err != nil {
					return nil, err
				}
			}
			if err := b.checkpoint(ctx); err != nil {
				return nil, err
			}
			servers, err := b.startFleet(ctx, sh.db, "", sh.n, layout)
			if err != nil {
				return nil, err
			}
			if _, err := b.load(ctx, servers, 64, 500*time.Millisecond, ""); err != nil { // warm-up: connections, pools
				stopAll(servers)
				return nil, err
			}
			for j, c := range o.callers {
				res, err := b.load(ctx, servers, c, o.d, sh.db)
				if err != nil {
					stopAll(servers)
					return nil, err
				}
				rows[i][j].runs = append(rows[i][j].runs, res)
				fmt.Fprintf(os.Stderr, "fleet: %s round %d, %s, %d callers: %.0f issuances/s; CPU per issuance: servers %.0f µs, PostgreSQL %.0f µs, client %.0f µs; %.1f records per batch\n",
					layout, round+1, sh.label(), c, res.rate(), res.perOp(res.server), res.perOp(res.db), res.perOp(res.client),
					float64(res.records)/float64(max(res.batches, 1)))
			}
			stopAll(servers)
		}
	}
	var out []fleetRow
	for i := range shapes {
		for j := range o.callers {
			r := rows[i][j]
			for k, res := range r.runs {
				r.ratios = append(r.ratios, res.rate()/rows[0][j].runs[k].rate())
			}
			out = append(out, *r)
		}
	}
	return out, nil
}

// checkpoint has PostgreSQL write its dirty pages now (CHECKPOINT), so that the writes of the
// measurement before are not flushed during the next.
func (b *fleetBench) checkpoint(ctx context.Context) error {
	p, err := b.pool(ctx, "postgres")
	if err != nil {
		return err
	}
	if _, err := p.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("fleet: CHECKPOINT: %w", err)
	}
	return nil
}

// unlogAnswers migrates db and makes its answers table UNLOGGED (once).
func (b *fleetBench) unlogAnswers(ctx context.Context, db string) error {
	if b.dbs[db] {
		return nil
	}
	if err := b.migrate(ctx, db); err != nil {
		return err
	}
	p, err := b.pool(ctx, db)
	if err != nil {
		return err
	}
	if _, err := p.Exec(ctx, `ALTER TABLE answers SET UNLOGGED`); err != nil {
		return fmt.Errorf("fleet: making %s's answers unlogged: %w", db, err)
	}
	return nil
}

// tripRow is what the counting proxy saw per issuance for n servers at callers.
type tripRow struct {
	servers, callers int
	ops              int64
	perOp            pgCounts // counts per 1000 issuances, background taken out
	background       float64  // round trips per second while idle, all servers
	batch            float64  // records per journal batch
}

// roundTrips counts, through a proxy, what each size of the fleet sends PostgreSQL per
// issuance: first the background (the integrator, the proofs, the probe) over 3 s idle, then
// each caller count for o.d.
func (b *fleetBench) roundTrips(ctx context.Context, o fleetOpts) ([]tripRow, error) {
	var out []tripRow
	for _, n := range []int{o.sizes[0], o.sizes[len(o.sizes)-1]} {
		if len(out) > 0 && out[0].servers == n {
			break
		}
		proxy, err := startPGProxy(fmt.Sprintf("127.0.0.1:%d", b.pg.Port))
		if err != nil {
			return nil, err
		}
		db := fmt.Sprintf("trips%d", n)
		servers, err := b.startFleet(ctx, db, proxy.addr(), n, "shared")
		if err != nil {
			proxy.close()
			return nil, err
		}
		rows, err := b.countTrips(ctx, o, proxy, servers, db)
		stopAll(servers)
		proxy.close()
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

func (b *fleetBench) countTrips(ctx context.Context, o fleetOpts, proxy *pgProxy, servers []*fleetServer, db string) ([]tripRow, error) {
	if _, err := b.load(ctx, servers, 64, 500*time.Millisecond, ""); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	c0, t0 := proxy.counts(), time.Now()
	time.Sleep(3 * time.Second)
	idle := proxy.counts().minus(c0)
	idleSecs := time.Since(t0).Seconds()
	var out []tripRow
	for _, callers := range o.callers {
		c0 := proxy.counts()
		res, err := b.load(ctx, servers, callers, o.d, db)
		if err != nil {
			return nil, err
		}
		d := proxy.counts().minus(c0)
		scale := res.wall.Seconds() / idleSecs // the background over the run
		per := pgCounts{msgs: map[byte]int64{}}
		k := func(all, bg int64) int64 {
			return int64((float64(all) - float64(bg)*scale) * 1000 / float64(max(res.ops, 1)))
		}
		per.trips, per.xacts = k(d.trips, idle.trips), k(d.xacts, idle.xacts)
		for t, v := range d.msgs {
			per.msgs[t] = k(v, idle.msgs[t])
		}
		row := tripRow{servers: len(servers), callers: callers, ops: res.ops, perOp: per, background: float64(idle.trips) / idleSecs,
			batch: float64(res.records) / float64(max(res.batches, 1))}
		fmt.Fprintf(os.Stderr, "fleet: %d servers, %d callers through the counting proxy: %.2f round trips, %.2f transactions per issuance (%.0f round trips/s in the background)\n",
			row.servers, callers, float64(per.trips)/1000, float64(per.xacts)/1000, row.background)
		out = append(out, row)
	}
	return out, nil
}

// pool returns a connection pool on database db (kept for the run).
func (b *fleetBench) pool(ctx context.Context, db string) (*pgxpool.Pool, error) {
	if p, ok := b.pools[db]; ok {
		return p, nil
	}
	cfg, err := pgxpool.ParseConfig(b.pg.DSN(db))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Password = pgtest.Password
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if b.pools == nil {
		b.pools = map[string]*pgxpool.Pool{}
	}
	b.pools[db] = p
	return p, nil
}

// journalHead is the seq of db's last record (0 when it cannot be read).
func (b *fleetBench) journalHead(ctx context.Context, db string) int64 {
	if db == "" {
		return 0
	}
	p, err := b.pool(ctx, db)
	if err != nil {
		return 0
	}
	var seq int64
	_ = p.QueryRow(ctx, `SELECT seq FROM ledger_head WHERE id`).Scan(&seq)
	return seq
}

// batches counts the journal batches that stored records (from, to]: a batch stamps its
// records with one time.
func (b *fleetBench) batches(ctx context.Context, db string, from, to int64) int64 {
	p, err := b.pool(ctx, db)
	if err != nil {
		return 0
	}
	var n int64
	_ = p.QueryRow(ctx, `SELECT count(DISTINCT at) FROM ledger_records WHERE seq > $1 AND seq <= $2`, from, to).Scan(&n)
	return n
}
