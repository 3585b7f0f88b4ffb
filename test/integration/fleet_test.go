package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/watcher"
)

// TestFleetUnderFaults runs two, then three signet-server processes on one PostgreSQL database
// (the last through a proxy that can cut it off), and the watcher failing over between them
// while CSRs keep coming. In turn: the server holding claims is SIGKILLed mid-issuance, the
// integrator is SIGKILLed, the database restarts, and the last server is cut off from it.
// After each: no object issued twice, every certificate a CSR received recorded as its
// issuance, every checkpoint a prefix of the journal's one tree and consistent with the one
// before, and the cluster's witness, which asks the servers in turn, never alarms.
func TestFleetUnderFaults(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) { fleetUnderFaults(t, n) })
	}
}

func fleetUnderFaults(t *testing.T, n int) {
	pg := pgtest.Start(t)
	const db = "fleet"
	if err := pg.CreateDatabase(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	pool := fleetDB(t, pg, db)
	s := newSignet(t, fmt.Sprintf("it.signet.dev/fleet-%d", n), time.Hour)

	// One checkpoint key for the fleet, its public key for the witness.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	keyPEM, _ := pemfile.MarshalPrivateKeyPEM(priv)
	keyPath := filepath.Join(s.state, "fleet-checkpoint.pem")
	pubPEM, _ := ledgerproof.MarshalPublicKeyPEM(pub)
	pubPath := filepath.Join(s.state, "fleet-checkpoint.pub")
	for path, data := range map[string][]byte{keyPath: keyPEM, pubPath: pubPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	verifier, err := ledgerproof.NewNoteVerifier(fleetITOrigin, pub)
	if err != nil {
		t.Fatal(err)
	}

	proxy := startCutProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port))
	_, proxyPort, _ := strings.Cut(proxy.addr(), ":")
	proxyDSN := strings.Replace(pg.DSN(db), ":"+strconv.Itoa(pg.Port)+"/", ":"+proxyPort+"/", 1)
	bin, logDir := buildCrashServer(t), t.TempDir()
	base := filepath.Join(s.state, devpki.ConfigFile)
	members := []*fleetMember{{name: "A"}, {name: "B"}, {name: "C"}}[:n]
	cut := members[n-1] // reaches the database through the proxy
	for _, m := range members {
		dsn := pg.DSN(db)
		if m == cut {
			dsn = proxyDSN
		}
		m.grpcAddr = freeAddress(t)
		m.config = writeFleetConfig(t, base, s.state, m.grpcAddr, dsn, pg.PasswordFile, keyPath)
		m.start(t, bin, logDir, 0)
		t.Logf("server %s: pid %d on %s, member %s, claims as %s", m.name, m.cmd.Process.Pid, m.grpcAddr, m.member, m.claimsAs)
	}
	starts := map[string]int{}
	restart := func(m *fleetMember) {
		starts[m.name]++
		m.start(t, bin, logDir, starts[m.name])
	}

	// The watcher fails over between the three; its witness asks them in turn.
	u, err := cluster.AddWatcher(fmt.Sprintf("watcher-fleet-%d", n), []string{s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	cmName := fmt.Sprintf("it-fleet-witness-%d", n)
	grantWitnessConfigMap(t, u.Name, cmName)
	wcfg := s.watcherConfig(members[0].grpcAddr)
	for _, m := range members[1:] {
		wcfg.Server.Addresses = append(wcfg.Server.Addresses, m.grpcAddr)
	}
	disabled := false
	wcfg.LeaderElection.Enabled = &disabled
	wcfg.LedgerWitness = watcher.LedgerWitnessConfig{PublicKeyFiles: []string{pubPath}, Period: metav1.Duration{Duration: time.Second},
		ConfigMapName: cmName, Namespace: metav1.NamespaceDefault}
	wcfg.Default()
	wcfg.RPCTimeout.Duration = 5 * time.Second
	runWatcher(t, wcfg, u.Client())

	requester, err := cluster.AddRequester(fmt.Sprintf("fleet-requester-%d", n), nil)
	if err != nil {
		t.Fatal(err)
	}
	load := startFleetLoad(t, requester, s.signerName)
	check := func(phase string) {
		t.Helper()
		load.waitSigned(t, u, 20, phase)
		records, cp := checkFleetLedger(t, pool, nil, verifier)
		if alarms := witnessAlarms(t, cmName); len(alarms) > 0 {
			t.Fatalf("after %s the witness alarmed: %v", phase, alarms)
		}
		t.Logf("after %s: %d records, latest checkpoint %d, %d CSRs submitted", phase, records, cp, load.count())
	}
	check("the start")

	// 1. The server holding claims is killed mid-issuance: its claims are orphaned, and taken
	// over by the others once their lease runs out.
	struck := false
	for attempt := 0; attempt < 10 && !struck; attempt++ {
		var victim *fleetMember
		queryRetry(t, "finding a claim in flight", func(ctx context.Context) error {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
				var holder string
				err := pool.QueryRow(ctx, `SELECT holder FROM answers WHERE chain IS NULL AND holder IS NOT NULL LIMIT 1`).Scan(&holder)
				if err != nil {
					continue
				}
				for _, m := range members {
					if m.claimsAs == holder {
						victim = m
						m.kill(t)
						return nil
					}
				}
			}
			return fmt.Errorf("no claim in flight for 10 s")
		})
		var orphans int
		queryRetry(t, "counting orphaned claims", func(ctx context.Context) error {
			return pool.QueryRow(ctx, `SELECT count(*) FROM answers WHERE holder = $1 AND chain IS NULL`, victim.claimsAs).Scan(&orphans)
		})
		t.Logf("attempt %d: killed server %s holding %d claims in flight", attempt, victim.name, orphans)
		struck = orphans > 0
		if struck {
			queryRetry(t, "waiting for the orphaned claims to be taken over", func(ctx context.Context) error {
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM answers WHERE holder = $1`, victim.claimsAs).Scan(&orphans); err != nil {
					return err
				}
				if orphans > 0 {
					return fmt.Errorf("%d claims still the killed server's", orphans)
				}
				return nil
			})
		}
		restart(victim)
	}
	if !struck {
		t.Fatal("no kill struck a server while it held a claim")
	}
	check("the claim holder's SIGKILL")

	// 2. The integrator is killed: its lease is not released, another server takes it over
	// once it runs out and signs the next checkpoint under a new fence.
	var holder string
	var fence int64
	queryRetry(t, "reading the integrator's lease", func(ctx context.Context) error {
		return pool.QueryRow(ctx, `SELECT holder, fence FROM integrator_lease WHERE expires > now()`).Scan(&holder, &fence)
	})
	var integrator *fleetMember
	for _, m := range members {
		if m.member == holder {
			integrator = m
		}
	}
	if integrator == nil {
		t.Fatalf("the integrator %q is none of the servers", holder)
	}
	integrator.kill(t)
	killed := time.Now()
	var still string
	queryRetry(t, "reading the lease after the kill", func(ctx context.Context) error {
		return pool.QueryRow(ctx, `SELECT holder FROM integrator_lease`).Scan(&still)
	})
	if still != holder {
		t.Fatalf("the lease passed from %s to %s at once: the kill did not strike the integrator", holder, still)
	}
	queryRetry(t, "waiting for a checkpoint under a new fence", func(ctx context.Context) error {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE fence > $1`, fence).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no checkpoint under a fence above %d", fence)
		}
		return nil
	})
	failover := time.Since(killed)
	t.Logf("integrator %s killed; the next checkpoint under a new fence after %s", integrator.name, failover.Round(time.Millisecond))
	if failover > 10*time.Second {
		t.Errorf("integrator failover took %s, want ≤ 10 s", failover)
	}
	restart(integrator)
	check("the integrator's SIGKILL")

	// 3. The database restarts: the servers refuse to sign meanwhile (readyz), and recover.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, members[0], false, "while the database is down")
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(scrape(t, members[0]), `signet_server_ledger_state{state="unavailable"} 1`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("with the database down, server A's metrics do not show the ledger unavailable (the alert's input) within 5 s")
		}
	}
	time.Sleep(time.Second)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		waitReadyz(t, m, true, "after the database restarted")
	}
	check("the database's restart")

	// 4. The last server is cut off from the database: it reports not ready, the watcher goes
	// to the others, and it comes back once the link does.
	proxy.Cut()
	waitReadyz(t, cut, false, "cut off from the database")
	time.Sleep(6 * time.Second) // past the session timeout that frees what it held
	load.waitSigned(t, u, 20, cut.name+" cut off")
	proxy.Restore()
	waitReadyz(t, cut, true, "once its link is back")
	check(cut.name + "'s cut")

	// The end: every CSR signed once, with its record.
	names := load.stop()
	received := map[string]string{}
	for _, name := range names {
		csr := waitFor(t, u.Client(), name, 60*time.Second, "signed", signed)
		cert := parseChain(t, csr.Status.Certificate)[0]
		serial, _ := record.NormalizeSerial(hex.EncodeToString(cert.SerialNumber.Bytes()))
		received[string(csr.UID)] = serial
	}
	_, cp := checkFleetLedger(t, pool, received, verifier)
	waitWitnessed(t, cmName, 1)
	if alarms := witnessAlarms(t, cmName); len(alarms) > 0 {
		t.Fatalf("the witness alarmed: %v", alarms)
	}
	t.Logf("%d CSRs signed once each, latest checkpoint %d", len(received), cp)
}

// scrape returns m's /metrics.
func scrape(t *testing.T, m *fleetMember) string {
	t.Helper()
	resp, err := http.Get("http://" + m.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// waitReadyz waits up to 15 s for m's /readyz to be (or not be) 200.
func waitReadyz(t *testing.T, m *fleetMember, ready bool, when string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get("http://" + m.httpAddr + "/readyz")
		ok := err == nil && resp.StatusCode == http.StatusOK
		if resp != nil {
			resp.Body.Close()
		}
		if ok == ready {
			return
		}
	}
	t.Fatalf("server %s: /readyz ready=%v not reached %s within 15 s", m.name, ready, when)
}

// fleetLoad submits and approves CSRs from a few workers until stop.
type fleetLoad struct {
	mu    sync.Mutex
	names []string
	done  chan struct{}
	wg    sync.WaitGroup
}

func startFleetLoad(t *testing.T, requester *controlplane.User, signerName string) *fleetLoad {
	l := &fleetLoad{done: make(chan struct{})}
	for w := range 3 {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				case <-time.After(50 * time.Millisecond):
				}
				key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				if err != nil {
					t.Error(err)
					return
				}
				csr, err := trySubmit(requester, signerName, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: fmt.Sprintf("fleet-%d-%d", w, i)}}, nil)
				if err != nil {
					t.Errorf("submitting a CSR: %v", err)
					return
				}
				if err := cluster.Approve(context.Background(), csr.Name); err != nil {
					t.Errorf("approving %s: %v", csr.Name, err)
					return
				}
				l.mu.Lock()
				l.names = append(l.names, csr.Name)
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *fleetLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

// waitSigned waits until n CSRs submitted from now on are signed: the fleet signs again.
func (l *fleetLoad) waitSigned(t *testing.T, u *controlplane.User, n int, phase string) {
	t.Helper()
	from := l.count()
	for deadline := time.Now().Add(60 * time.Second); l.count() < from+n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d CSRs submitted in 60 s, want %d", phase, l.count()-from, n)
		}
	}
	l.mu.Lock()
	names := slices.Clone(l.names[from : from+n])
	l.mu.Unlock()
	for _, name := range names {
		waitFor(t, u.Client(), name, 60*time.Second, "signed after "+phase, signed)
	}
}

// stop ends the load and returns every CSR it submitted.
func (l *fleetLoad) stop() []string {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names)
}
