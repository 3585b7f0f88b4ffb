package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/record"
)

// cutProxy forwards loopback TCP connections to a target until Cut: then it stops forwarding
// (bytes are read and held, connections stay open, new ones are accepted and held), as a
// network partition looks to both ends. Restore closes what it held and forwards again.
type cutProxy struct {
	lis    net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target}
	t.Cleanup(func() { _ = lis.Close(); p.closeAll() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.lis.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.cut.Load() {
			continue // held: never forwarded
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				return
			}
			p.track(up)
			go p.pipe(up, c)
			p.pipe(c, up)
		}()
	}
}

// pipe copies src to dst while not cut; once cut it reads and drops, holding both open.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.cut.Load() {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *cutProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) Cut() { p.cut.Store(true) }

func (p *cutProxy) Restore() {
	p.closeAll()
	p.cut.Store(false)
}

// fleetMember is one signet-server process of the fleet test, on fixed addresses so that it
// can be started again where the watcher expects it.
type fleetMember struct {
	name, config, grpcAddr string
	*crashServer
	member, claimsAs string // from its "fleet database opened" log line
}

// writeFleetConfig writes base's configuration with the fleet's state and the member's gRPC
// address into dir, and returns its path.
func writeFleetConfig(t *testing.T, base, dir, grpcAddr, dsn, passwordFile, checkpointKey string) string {
	t.Helper()
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["grpc"] = map[string]any{"address": grpcAddr}
	cfg["http"] = map[string]any{"address": "127.0.0.1:0"}
	cfg["state"] = map[string]any{"backend": "postgres", "postgres": map[string]any{
		"dsn": dsn, "passwordFile": passwordFile, "claimLease": "2s", "integratorLease": "2s"}}
	ledgerCfg, _ := cfg["ledger"].(map[string]any)
	ledgerCfg["checkpoint"] = map[string]any{"key": checkpointKey, "origin": fleetITOrigin}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(strings.TrimSuffix(base, ".yaml"))+"-"+strings.ReplaceAll(grpcAddr, ":", "-")+".yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const fleetITOrigin = "signet.it/fleet"

// start runs the member's process and waits until it is ready and has named itself.
func (m *fleetMember) start(t *testing.T, bin, logDir string, n int) {
	t.Helper()
	m.crashServer = startCrashServer(t, bin, m.config, m.grpcAddr, filepath.Join(logDir, fmt.Sprintf("%s-%d.log", m.name, n)))
	m.waitReady(t)
	data, _ := os.ReadFile(m.logPath)
	for line := range bytes.Lines(data) {
		var e struct{ Msg, Member, Claims_as string }
		if json.Unmarshal(line, &e) == nil && e.Msg == "fleet database opened" {
			m.member, m.claimsAs = e.Member, e.Claims_as
		}
	}
	if m.claimsAs == "" {
		t.Fatalf("server %s did not log how it claims", m.name)
	}
}

func (m *fleetMember) kill(t *testing.T) {
	t.Helper()
	m.signal(t, syscall.SIGKILL)
	<-m.exited
}

// fleetDB opens a pool on the fleet's database for the test's own checks.
func fleetDB(t *testing.T, pg *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	return pg.Pool(t, db)
}

// queryRetry runs fn until it succeeds (the database may be restarting), for up to 30 s.
func queryRetry(t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// checkFleetLedger checks the fleet's journal as an auditor would: no object issued twice,
// every certificate a CSR received (uid → serial) recorded as that object's issuance, and every
// stored checkpoint signed by the fleet's key over a prefix of one tree, each consistent with
// the one before it. It returns the journal's size and the latest checkpoint's.
func checkFleetLedger(t *testing.T, pool *pgxpool.Pool, received map[string]string, verifier note.Verifier) (records, checkpointed int64) {
	t.Helper()
	// The checkpoints first: each covers records committed before it was stored, so the
	// records read after them hold every record any of them covers, whatever the load adds.
	type stored struct {
		size   int64
		signed []byte
	}
	var cps []stored
	queryRetry(t, "reading the checkpoints", func(ctx context.Context) error {
		cps = nil
		rows, err := pool.Query(ctx, `SELECT size, signed FROM checkpoints ORDER BY size`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c stored
			if err := rows.Scan(&c.size, &c.signed); err != nil {
				return err
			}
			cps = append(cps, c)
		}
		return rows.Err()
	})
	var lines [][]byte
	issuedBy := map[string][]string{} // object uid → serials issued
	queryRetry(t, "reading the journal", func(ctx context.Context) error {
		lines, issuedBy = nil, map[string][]string{}
		rows, err := pool.Query(ctx, `SELECT seq, line FROM ledger_records ORDER BY seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var line []byte
			if err := rows.Scan(&seq, &line); err != nil {
				return err
			}
			if seq != int64(len(lines))+1 {
				return fmt.Errorf("record %d follows %d", seq, len(lines))
			}
			lines = append(lines, line)
			r, _, err := record.Decode(line)
			if err != nil {
				return fmt.Errorf("record %d: %w", seq, err)
			}
			if r.Decision == record.Issued {
				s, _ := record.NormalizeSerial(r.Serial)
				issuedBy[r.ObjectUID] = append(issuedBy[r.ObjectUID], s)
			}
		}
		return rows.Err()
	})
	for uid, serials := range issuedBy {
		if len(serials) > 1 {
			t.Errorf("object %s issued %d times: serials %v", uid, len(serials), serials)
		}
	}
	for uid, serial := range received {
		if s := issuedBy[uid]; len(s) != 1 || s[0] != serial {
			t.Errorf("CSR %s received the certificate with serial %s; the journal records %v for it", uid, serial, s)
		}
	}
	tree := &ledgerproof.Tree{}
	for _, line := range lines {
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	}
	var prev *ledgerproof.Checkpoint
	for _, c := range cps {
		cp, err := ledgerproof.OpenCheckpoint(c.signed, fleetITOrigin, verifier)
		if err != nil || cp.Size != c.size {
			t.Fatalf("checkpoint of size %d: %v (size %d)", c.size, err, cp.Size)
		}
		if cp.Size > int64(len(lines)) {
			t.Fatalf("checkpoint of size %d, beyond the journal's %d records", cp.Size, len(lines))
		}
		if prev == nil {
			proof, err := tree.ProveConsistency(cp.Size, tree.Size())
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := tree.Checkpoint(fleetITOrigin)
			if err := ledgerproof.VerifyConsistency(cp, whole, proof); err != nil {
				t.Fatalf("checkpoint of size %d is not a prefix of the journal's tree: %v", cp.Size, err)
			}
		} else {
			proof, err := tree.ProveConsistency(prev.Size, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			if err := ledgerproof.VerifyConsistency(*prev, cp, proof); err != nil {
				t.Fatalf("checkpoints %d → %d: %v", prev.Size, cp.Size, err)
			}
		}
		prev = &cp
	}
	if prev == nil {
		return int64(len(lines)), 0
	}
	return int64(len(lines)), prev.Size
}

// witnessAlarms lists the Warning Events on the witness ConfigMap.
func witnessAlarms(t *testing.T, cmName string) []string {
	t.Helper()
	_, admin := cluster.Admin()
	events, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + cmName})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}
