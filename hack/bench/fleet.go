package main

// -fleet: signet-server on a fleet's PostgreSQL (state.backend postgres, issue 43) against
// the file ledger, in one run. Every server is the real signet-server binary (-bin), started
// fresh for each measurement on the dev PKI, one P-256 CA and the kube-apiserver-client
// profile with the lint gate off (the gate costs milliseconds and would hide the state's
// cost); PostgreSQL is the distribution's (internal/pgtest), its data directory under the
// work directory, fsync and synchronous_commit on.
//
//   - issuances per second over gRPC + mTLS with 1 and 64 callers (the server-alone bench's
//     client, signerclient): one server on the file ledger (the anchor), then one, two and
//     three servers on one database, the callers' calls spread over them in turn; each
//     measured -fleet-rounds times in interleaved rounds, the ratio to the file ledger taken
//     within each round. With the CPU time per issuance of the servers, of PostgreSQL and of
//     the client (/proc), and the records per journal batch. Two layouts: "shared" (every
//     process on both cores) and "pinned" (the servers and PostgreSQL on core 1, the client
//     on core 0: a server host and a client host), from which the scaling model predicts
//     separate hosts (fleet_report.go);
//   - round trips to PostgreSQL per issuance, the messages and transactions, counted by a
//     proxy in the path (fleet_proxy.go) in runs of their own;
//   - record to covering checkpoint: the time from an issuance's answer to the first
//     GetCheckpoint of that server whose size covers the record's seq (fleet_ledger.go);
//   - integrator failover: SIGKILL of the server holding integrator_lease, until a checkpoint
//     under a higher fence is stored;
//   - cold start with -fleet-cold-records records (1 M) in the database: exec to /readyz 200,
//     against the same start on an empty database.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/server/config"
)

// The flags of -fleet, registered here so that main.go holds only -fleet and its dispatch.
var (
	fleetRoundsFlag  = flag.Int("fleet-rounds", 3, "with -fleet, interleaved rounds of the throughput measurements (the medians are reported)")
	fleetTimeFlag    = flag.Duration("fleet-time", 3*time.Second, "with -fleet, time per throughput measurement")
	fleetCallersFlag = flag.String("fleet-callers", "1,64", "with -fleet, comma-separated numbers of concurrent callers")
	fleetSizesFlag   = flag.String("fleet-servers", "1,2,3", "with -fleet, comma-separated numbers of servers on one database")
	fleetLayoutsFlag = flag.String("fleet-layouts", "shared,pinned", "with -fleet, the CPU layouts: shared (every process on every core), pinned (servers and PostgreSQL on the last core, the client on the others)")
	fleetLagFlag     = flag.Duration("fleet-lag-time", 10*time.Second, "with -fleet, time of each record-to-checkpoint measurement")
	fleetKillsFlag   = flag.Int("fleet-failovers", 3, "with -fleet, integrator failovers (SIGKILL) to time")
	fleetColdFlag    = flag.Int("fleet-cold-records", 1_000_000, "with -fleet, records in the database of the cold start (0 to skip it)")
	fleetColdRuns    = flag.Int("fleet-cold-runs", 3, "with -fleet, cold starts measured at each size")
	fleetDirFlag     = flag.String("fleet-dir", "", "with -fleet, make the work directory (PostgreSQL's data, the servers' files) under this one (default $TMPDIR); removed afterwards")
	fleetLintFlag    = flag.Bool("fleet-lint", false, "with -fleet, run the servers with the default lint gate on")
	fleetDiagFlag    = flag.Bool("fleet-diagnostic", true, "with -fleet, also measure one server on a database whose answers table is UNLOGGED (not durable): what a claim's own commit costs")
)

// fleetOrigin is the checkpoints' origin in the bench's fleets.
const fleetOrigin = "bench.signet.dev/fleet"

// fleetBench is what the parts of a -fleet run share.
type fleetBench struct {
	bin     string // folder holding signet-server
	work    string
	pkiDir  string          // the dev PKI, the CA and the checkpoint key, shared by every server
	base    *config.Config  // the servers' configuration before the state is set
	pg      *pgtest.Server  // the fleet's PostgreSQL
	csr     []byte          // the CSR every call sends
	tag     string          // makes this run's object UIDs unique
	uid     atomic.Int64    //
	dbs     map[string]bool // databases created
	configs atomic.Int64    // configuration files written
	pools   map[string]*pgxpool.Pool
}

// runFleet runs -fleet with the servers of bin and writes the report to out.
func runFleet(ctx context.Context, bin, out string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := fleetOptions()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bin, "signet-server")); err != nil {
		return fmt.Errorf("fleet: %w (make build puts signet-server in bin/; -bin names another folder)", err)
	}
	parent := *fleetDirFlag
	if parent == "" {
		parent = os.TempDir()
	}
	work, err := os.MkdirTemp(parent, "signet-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b, err := newFleetBench(bin, work)
	if err != nil {
		return err
	}
	defer func() { _ = b.pg.Stop() }()
	rep := fleetReport{opts: o, cores: numCPU(), pgVersion: filepath.Base(filepath.Dir(b.pg.Bin()))}
	rep.busyAtStart = waitQuiet(30 * time.Second)
	start := time.Now()
	for _, layout := range o.layouts {
		rows, err := b.throughput(ctx, o, layout)
		if err != nil {
			return err
		}
		rep.rows = append(rep.rows, rows...)
	}
	if err := b.setLayout("shared"); err != nil {
		return err
	}
	if rep.trips, err = b.roundTrips(ctx, o); err != nil {
		return err
	}
	if rep.lags, err = b.checkpointLag(ctx, o); err != nil {
		return err
	}
	if rep.failovers, rep.lease, err = b.failovers(ctx, o); err != nil {
		return err
	}
	if o.coldRecords > 0 {
		if rep.cold, err = b.coldStart(ctx, o); err != nil {
			return err
		}
	}
	rep.elapsed = time.Since(start)
	report := rep.markdown()
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("fleet: writing the report: %w", err)
		}
	}
	return nil
}

// fleetOpts is what a -fleet run measures.
type fleetOpts struct {
	rounds      int
	d           time.Duration
	callers     []int
	sizes       []int // servers on one database
	layouts     []string
	lagTime     time.Duration
	kills       int
	coldRecords int
	coldRuns    int
	lint        bool
	diagnostic  bool
}

func fleetOptions() (fleetOpts, error) {
	o := fleetOpts{rounds: *fleetRoundsFlag, d: *fleetTimeFlag, lagTime: *fleetLagFlag, kills: *fleetKillsFlag,
		coldRecords: *fleetColdFlag, coldRuns: max(*fleetColdRuns, 1), lint: *fleetLintFlag, diagnostic: *fleetDiagFlag}
	var err error
	if o.callers, err = parseInts(*fleetCallersFlag); err != nil || len(o.callers) == 0 {
		return o, fmt.Errorf("-fleet-callers %q: want counts", *fleetCallersFlag)
	}
	if o.sizes, err = parseInts(*fleetSizesFlag); err != nil || len(o.sizes) == 0 {
		return o, fmt.Errorf("-fleet-servers %q: want counts", *fleetSizesFlag)
	}
	for _, l := range strings.Split(*fleetLayoutsFlag, ",") {
		switch l = strings.TrimSpace(l); l {
		case "shared", "pinned":
			o.layouts = append(o.layouts, l)
		default:
			return o, fmt.Errorf("-fleet-layouts: bad layout %q (accepted: shared, pinned)", l)
		}
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("-fleet-rounds %d: want at least 1", o.rounds)
	}
	return o, nil
}

// newFleetBench writes the shared files (dev PKI, CA, checkpoint key) and starts PostgreSQL.
func newFleetBench(bin, work string) (*fleetBench, error) {
	b := &fleetBench{bin: bin, work: work, pkiDir: filepath.Join(work, "pki"), dbs: map[string]bool{}}
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	b.tag = hex.EncodeToString(tag)
	for _, d := range []string{b.pkiDir, filepath.Join(work, "logs"), filepath.Join(work, "ledgers"), filepath.Join(work, "pg")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	ca, err := newCA("P-256")
	if err != nil {
		return nil, err
	}
	if b.csr, err = newCSR("bench-client"); err != nil {
		return nil, err
	}
	if b.base, err = benchServerConfig(b.pkiDir, ca, *fleetLintFlag); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(priv)
	if err != nil {
		return nil, err
	}
	b.base.Ledger.Checkpoint.Key = filepath.Join(b.pkiDir, "fleet-checkpoint.pem")
	if err := os.WriteFile(b.base.Ledger.Checkpoint.Key, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if b.pg, err = pgtest.StartDir(filepath.Join(work, "pg")); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "fleet: PostgreSQL %s on port %d\n", filepath.Base(filepath.Dir(b.pg.Bin())), b.pg.Port)
	return b, nil
}

// writeConfig writes a server's configuration: the file ledger in a directory of its own when
// db is empty, otherwise the fleet's database db at addr (PostgreSQL's, or a proxy's).
func (b *fleetBench) writeConfig(ctx context.Context, db, addr string) (string, error) {
	n := b.configs.Add(1)
	cfg := *b.base
	cfg.Ledger.Dir = filepath.Join(b.work, "ledgers", fmt.Sprintf("ledger-%d", n))
	cfg.Ledger.Checkpoint.Origin = ""
	cfg.State = config.State{}
	if db != "" {
		if !b.dbs[db] {
			if err := b.pg.CreateDatabase(ctx, db); err != nil {
				return "", err
			}
			b.dbs[db] = true
		}
		if addr == "" {
			addr = fmt.Sprintf("127.0.0.1:%d", b.pg.Port)
		}
		cfg.Ledger.Checkpoint.Origin = fleetOrigin
		cfg.State = config.State{Backend: config.BackendPostgres, Postgres: config.Postgres{
			DSN: fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgtest.User, addr, db), PasswordFile: b.pg.PasswordFile,
			ClaimLease: metav1.Duration{Duration: config.DefaultClaimLease}, IntegratorLease: metav1.Duration{Duration: config.DefaultIntegratorLease}}}
	} else {
		cfg.Ledger.Checkpoint.Key = ""
	}
	raw, err := yaml.Marshal(&cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(b.pkiDir, fmt.Sprintf("server-%d.yaml", n))
	return path, os.WriteFile(path, raw, 0o600)
}

// startFleet starts n servers on database db (the file ledger, n = 1, when db is empty),
// through addr (see writeConfig), each on the CPUs of the layout.
func (b *fleetBench) startFleet(ctx context.Context, db, addr string, n int, layout string) ([]*fleetServer, error) {
	var servers []*fleetServer
	for i := range n {
		path, err := b.writeConfig(ctx, db, addr)
		if err != nil {
			stopAll(servers)
			return nil, err
		}
		s, err := startFleetServer(ctx, b.bin, fmt.Sprintf("%s-%d", cmpOr(db, "file"), i), path, b.pkiDir,
			filepath.Join(b.work, "logs"), b.serverCPUs(layout), time.Minute)
		if err != nil {
			stopAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func stopAll(servers []*fleetServer) {
	for _, s := range servers {
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		}
	}
}

// serverCPUs is the taskset list of the servers' CPUs in layout ("" for all).
func (b *fleetBench) serverCPUs(layout string) string {
	if layout == "pinned" {
		return strconv.Itoa(numCPU() - 1)
	}
	return ""
}

// setLayout pins this process (the client) and PostgreSQL as layout says: in "pinned" the
// client on every core but the last, PostgreSQL on the last; in "shared" both on every core.
func (b *fleetBench) setLayout(layout string) error {
	n := numCPU()
	var client, server []int
	if layout == "pinned" {
		if n < 2 {
			return fmt.Errorf("fleet: the pinned layout needs 2 cores, this machine has %d", n)
		}
		for c := range n - 1 {
			client = append(client, c)
		}
		server = []int{n - 1}
		runtime.GOMAXPROCS(n - 1)
	} else {
		runtime.GOMAXPROCS(n)
	}
	if err := setAffinity(os.Getpid(), client); err != nil {
		return err
	}
	return setTreeAffinity(b.pg.PID(), server)
}

// sign issues one certificate on s for a new object UID of this run.
func (b *fleetBench) sign(ctx context.Context, s *fleetServer) (string, error) {
	uid := fmt.Sprintf("fleet-%s-%d", b.tag, b.uid.Add(1))
	issued, err := s.client.SignCSR(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: signerName, Request: b.csr, Username: "bench",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	})
	if err != nil {
		return "", fmt.Errorf("signing on %s: %w", s.name, err)
	}
	return issued.Serial, nil
}

// loadResult is one throughput measurement.
type loadResult struct {
	ops                int64
	wall               time.Duration
	server, db, client time.Duration // CPU time over the measurement
	records, batches   int64         // journal records and batches (0 on the file ledger)
	// waits tallies what PostgreSQL's active backends of the database were doing, sampled
	// every 50 ms: "wait event type:wait event in statement" ("running" for no wait).
	waits map[string]int
}

func (r loadResult) rate() float64 { return float64(r.ops) / r.wall.Seconds() }

// perOp is a CPU time per issuance in µs.
func (r loadResult) perOp(t time.Duration) float64 {
	return float64(t.Microseconds()) / float64(max(r.ops, 1))
}

// load issues from callers goroutines for d, the calls spread over servers in turn; every
// issuance must succeed.
func (b *fleetBench) load(ctx context.Context, servers []*fleetServer, callers int, d time.Duration, db string) (loadResult, error) {
	var (
		res    loadResult
		next   atomic.Int64
		ops    atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	head0 := b.journalHead(ctx, db)
	stopSampling := b.sampleWaits(ctx, db, &res)
	srv0, db0, cli0 := serversCPU(servers), postgresCPU(b.pg.PID()), cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) && failed.Load() == nil {
				s := servers[int(next.Add(1))%len(servers)]
				if _, err := b.sign(ctx, s); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.server, res.db, res.client = serversCPU(servers)-srv0, postgresCPU(b.pg.PID())-db0, cpuTime()-cli0
	res.ops = ops.Load()
	stopSampling()
	if p := failed.Load(); p != nil {
		return res, *p
	}
	if db != "" {
		head1 := b.journalHead(ctx, db)
		res.records = head1 - head0
		res.batches = b.batches(ctx, db, head0, head1)
	}
	return res, nil
}

// sampleWaits samples, every 50 ms until the returned function is called, the active
// backends of database db (none for the file ledger) into res.waits.
func (b *fleetBench) sampleWaits(ctx context.Context, db string, res *loadResult) func() {
	if db == "" {
		return func() {}
	}
	p, err := b.pool(ctx, db)
	if err != nil {
		return func() {}
	}
	res.waits = map[string]int{}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for t := time.NewTicker(50 * time.Millisecond); ; {
			select {
			case <-sctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			rows, err := p.Query(sctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'running'), left(regexp_replace(query, '\s+', ' ', 'g'), 24)
				FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()`, db)
			if err != nil {
				continue
			}
			for rows.Next() {
				var wait, stmt string
				if rows.Scan(&wait, &stmt) == nil {
					res.waits[wait+" in "+strings.TrimSpace(stmt)]++
				}
			}
			rows.Close()
		}
	}()
	return func() { cancel(); <-done }
}
