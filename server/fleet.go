package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/pgstate"
)

// fleetPoolConns bounds a server's connections to the fleet's database: the journal's batch
// writer, the answers' claims and the background loops. Three servers stay far below
// PostgreSQL's default max_connections (100).
const fleetPoolConns = 16

// fleetIdleInTransaction is how long PostgreSQL lets one of the server's sessions sit idle in
// a transaction (holding the journal's head, say, when the server was cut off) before it ends it.
const fleetIdleInTransaction = 5 * time.Second

// fleetPruneInterval is how often a fleet server deletes answers past the retention and old
// checkpoints (pgstate.Prune).
const fleetPruneInterval = time.Minute

// fleetProbeInterval is how often a fleet server checks that its database answers (readyz).
const fleetProbeInterval = time.Second

// fleet is the state of a server of a fleet (state.backend postgres): the journal, the answers
// and the CA rotation in one PostgreSQL database, shared with the other servers; the
// integrator loop, which this server runs while it holds the fleet's lease; and the proofs,
// which follow the integrator's checkpoints.
type fleet struct {
	pool    *pgxpool.Pool
	journal *pgstate.Journal
	answers *pgstate.Answers
	proofs  *pgstate.Proofs
	loop    *pgstate.IntegratorLoop

	// down is why the database does not answer (nil when it does), as the last probe saw.
	down atomic.Pointer[error]
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// openFleet connects to the fleet's database, migrates its schema, and follows its CA
// rotation records (the fleet's equivalent of a file ledger's replay: the rotation records
// alone, never the issuances). Nothing is written to disk.
func (s *Server) openFleet(ctx context.Context) (*state, error) {
	pc := s.cfg.State.Postgres
	pcfg, err := pgxpool.ParseConfig(pc.DSN)
	if err != nil {
		return nil, fmt.Errorf("state.postgres.dsn: %w", err)
	}
	if pc.PasswordFile != "" {
		raw, err := os.ReadFile(pc.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("reading state.postgres.passwordFile: %w", err)
		}
		pcfg.ConnConfig.Password = strings.TrimRight(strings.SplitN(string(raw), "\n", 2)[0], "\r")
	}
	pcfg.MaxConns = fleetPoolConns
	// A server cut off from the database mid-transaction must not hold the journal's head
	// (and every other server's appends) for longer than this: PostgreSQL ends the session.
	pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.Itoa(int(fleetIdleInTransaction.Milliseconds()))
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the fleet's database: %w", err)
	}
	f := &fleet{pool: pool}
	s.fleet = f
	where := fmt.Sprintf("%s:%d/%s", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database)
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ms, err := pgstate.Migrations()
	if err != nil {
		return nil, err
	}
	applied, err := pgstate.Migrate(mctx, pool, ms)
	if err != nil {
		return nil, fmt.Errorf("preparing the fleet's database %s: %w", where, err)
	}
	f.journal = pgstate.NewJournal(pool, pgstate.JournalOptions{Logger: s.log, ReplayUntil: decision.ReplayUntil})
	if f.answers, err = pgstate.NewAnswers(pool, pgstate.AnswersOptions{Lease: pc.ClaimLease.Duration, Retention: s.cfg.Idempotency.Retention.Duration}); err != nil {
		return nil, err
	}
	origin, signer, verifier, err := s.openCheckpointKey(ctx)
	if err != nil {
		return nil, err
	}
	f.proofs = pgstate.NewProofs(pool, origin, verifier)
	f.loop = &pgstate.IntegratorLoop{
		Integrator: pgstate.NewIntegrator(pool, fleetMember(), pc.IntegratorLease.Duration),
		Origin:     origin,
		Sign:       func(c ledgerproof.Checkpoint) ([]byte, error) { return ledgerproof.SignCheckpoint(c, signer) },
		Verifier:   verifier,
		Interval:   s.cfg.Ledger.Checkpoint.Interval.Duration,
		Log:        s.log,
	}
	if s.attest != nil {
		s.attest.UseState(pgstate.NewAttestState(pool))
	}
	s.rotation.SetLedger(f.journal)
	s.rotation.SetShared(f.journal)
	if err := s.rotation.Sync(mctx); err != nil {
		return nil, fmt.Errorf("opening the fleet's database %s: %w", where, err)
	}
	head, _, err := f.journal.Head(mctx)
	if err != nil {
		return nil, err
	}
	size, err := f.proofs.Refresh(mctx)
	if err != nil {
		s.log.Error("the fleet's latest checkpoint is not served", "error", err.Error())
	}
	s.metrics.ObserveCheckpointSize(size)
	// From now on (not for the checkpoint found at start): how long each record waited for the
	// first checkpoint that covers it, as this server serves it.
	f.proofs.Published = func(before, size int64) { s.metrics.ObserveCheckpoint(size, f.lag(before+1)) }
	s.log.Info("fleet database opened", "database", where, "migrations_applied", applied, "last_seq", head,
		"member", fleetMember(), "claims_as", f.answers.Holder(),
		"rotation_records_to", s.rotation.Cursor(), "checkpoint_size", size)
	return &state{answers: f.answers, journal: f.journal}, nil
}

// start runs the fleet's background loops until close, once the server is built (its signers
// adopted from the rotation records openFleet read, its installer and decision core in place,
// so that a set another server records meanwhile is installed, not overwritten): the integrator (while this server holds
// the lease), the proofs following its checkpoints, the CA rotation following the journal
// (at once on the database's announcement, and every few seconds should one be missed), the
// pruning of answers past the retention and of old checkpoints, and the probe of the database
// that readiness reports.
func (f *fleet) start(s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	f.wg.Go(func() { f.loop.Run(ctx) })
	f.wg.Go(func() {
		every(ctx, 200*time.Millisecond, func() {
			if _, err := f.proofs.Refresh(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, pgstate.ErrUnavailable) {
				s.log.Error("the fleet's latest checkpoint is not served", "error", err.Error())
			}
		})
	})
	sync := make(chan struct{}, 1)
	poke := func(string) {
		select {
		case sync <- struct{}{}:
		default:
		}
	}
	f.wg.Go(func() {
		_ = pgstate.Listen(ctx, f.pool, pgstate.RotationChannel, poke, nil)
	})
	f.wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sync:
			case <-t.C:
			}
			if err := s.rotation.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("following the fleet's CA rotation", "error", err.Error())
			}
		}
	})
	f.wg.Go(func() {
		every(ctx, fleetPruneInterval, func() {
			before := time.Now().Add(-s.cfg.Idempotency.Retention.Duration)
			answers, checkpoints, err := pgstate.Prune(ctx, f.pool, before)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("pruning the fleet's database", "error", err.Error())
			case answers+checkpoints > 0:
				s.log.Debug("pruned the fleet's database", "answers", answers, "checkpoints", checkpoints)
			}
		})
	})
	f.wg.Go(func() {
		every(ctx, fleetProbeInterval, func() {
			pctx, cancel := context.WithTimeout(ctx, fleetProbeInterval)
			defer cancel()
			if err := f.pool.Ping(pctx); err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w: %w", pgstate.ErrUnavailable, err)
				f.down.Store(&err)
				return
			}
			f.down.Store(nil)
		})
	})
}

// lag is how long ago record seq was appended (0 if it cannot be read).
func (f *fleet) lag(seq int64) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var at time.Time
	if err := f.pool.QueryRow(ctx, `SELECT at FROM ledger_records WHERE seq = $1`, seq).Scan(&at); err != nil {
		return 0
	}
	return time.Since(at)
}

// Err is why the fleet's database cannot record (nil when it can).
func (f *fleet) Err() error {
	if p := f.down.Load(); p != nil {
		return *p
	}
	return nil
}

// close stops the loops (the integrator releases its lease) and closes the pool.
func (f *fleet) close() {
	if f.stop != nil {
		f.stop()
		f.wg.Wait()
	}
	f.pool.Close()
}

// every calls fn at once and then every interval, until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fleetMember names this server in the fleet's leases: its host and process.
func fleetMember() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}
