package main

// The cold start of -fleet: a server process from exec to /readyz 200 on a database holding a
// long history (-fleet-cold-records), against the same start on an empty database, in
// alternating runs.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/signet-pki/signet/server/pgstate"
)

// coldRow is one database of the cold-start measurement.
type coldRow struct {
	records   int64 // in the journal at the measured starts
	dbBytes   int64 // pg_database_size
	fill      time.Duration
	first     time.Duration   // the first start, which found no checkpoint covering the history
	integrate time.Duration   // from that start's readiness to a checkpoint covering the journal
	starts    []time.Duration // exec → /readyz 200, sorted
}

// coldStart fills a database with o.coldRecords records, has a server integrate them once,
// and then times o.coldRuns starts of a fresh server process on it and on an empty database,
// alternately.
func (b *fleetBench) coldStart(ctx context.Context, o fleetOpts) ([2]coldRow, error) {
	var rows [2]coldRow
	dbs := [2]string{"coldempty", "cold"}
	sizes := [2]int{0, o.coldRecords}
	for i, db := range dbs {
		if err := b.migrate(ctx, db); err != nil {
			return rows, err
		}
		if sizes[i] > 0 {
			fmt.Fprintf(os.Stderr, "fleet: importing %d records into %s\n", sizes[i], db)
			t := time.Now()
			if err := b.fill(ctx, db, sizes[i]); err != nil {
				return rows, fmt.Errorf("fleet: filling %s: %w", db, err)
			}
			rows[i].fill = time.Since(t)
			fmt.Fprintf(os.Stderr, "fleet: %d records imported in %s\n", sizes[i], rows[i].fill.Round(time.Second))
		}
		servers, err := b.startFleet(ctx, db, "", 1, "shared")
		if err != nil {
			return rows, err
		}
		s := servers[0]
		rows[i].first = s.ready.Sub(s.started)
		p, err := b.pool(ctx, db)
		if err != nil {
			stopAll(servers)
			return rows, err
		}
		head := b.journalHead(ctx, db)
		err = waitFor(ctx, 10*time.Minute, func() (bool, error) {
			size, _, err := pgstate.LatestCheckpoint(ctx, p)
			return size >= head, err
		})
		rows[i].integrate = time.Since(s.ready)
		stopAll(servers)
		if err != nil {
			return rows, fmt.Errorf("fleet: integrating %s: %w", db, err)
		}
		fmt.Fprintf(os.Stderr, "fleet: %s: first start %s, its integrator covered %d records %s after it was ready\n",
			db, rows[i].first.Round(time.Millisecond), head, rows[i].integrate.Round(time.Millisecond))
	}
	for run := range o.coldRuns {
		for _, i := range roundOrder(2, run) {
			servers, err := b.startFleet(ctx, dbs[i], "", 1, "shared")
			if err != nil {
				return rows, err
			}
			s := servers[0]
			rows[i].starts = append(rows[i].starts, s.ready.Sub(s.started))
			stopAll(servers)
			fmt.Fprintf(os.Stderr, "fleet: cold start on %s: %s\n", dbs[i], s.ready.Sub(s.started).Round(time.Millisecond))
		}
	}
	for i, db := range dbs {
		rows[i].records = b.journalHead(ctx, db)
		p, err := b.pool(ctx, db)
		if err != nil {
			return rows, err
		}
		_ = p.QueryRow(ctx, `SELECT pg_database_size($1)`, db).Scan(&rows[i].dbBytes)
		slices.Sort(rows[i].starts)
	}
	return rows, nil
}
