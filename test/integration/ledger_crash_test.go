package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
)

// The crash test's shape: rounds of load, concurrent sign callers, and the window after a
// round's first acknowledged certificate in which the server is killed.
const (
	crashRounds       = 15
	crashCallers      = 16
	crashMaxKillDelay = time.Second
	crashPollEvery    = 20 * time.Millisecond
	crashDeadline     = 30 * time.Second // a start, readiness, an exit, a first certificate
	crashCallTimeout  = 10 * time.Second
)

// crashSeedEnv, set to an unsigned integer, replays the kill moments of a logged run.
const crashSeedEnv = "SIGNET_CRASH_SEED"

// TestLedgerCrashUnderLoad runs the real signet-server binary on one ledger, round after
// round: 16 callers sign CSRs (distinct object UIDs) while a poller fetches checkpoints and
// consistency proofs from the last checkpoint it saw, and the server is SIGKILLed at a random
// moment (seeded, logged) after the round's first certificate. Every restart must succeed: a
// crash never leaves the ledger shorter than its checkpoint. After a last start and a clean
// stop, offline: the ledger verifies, every acknowledged certificate has its issued record
// (no certificate without a durable record), and every checkpoint seen verifies, is a prefix
// of the final tree and is consistent with the next one seen.
func TestLedgerCrashUnderLoad(t *testing.T) {
	began := time.Now()
	r := &crashRun{t: t, bin: buildCrashServer(t), state: t.TempDir(), logs: t.TempDir(), acked: map[string]string{}}
	var err error
	if r.config, err = devpki.Ensure(devpki.Options{Dir: r.state, Address: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if r.tls, err = devpki.ClientTLSConfig(r.state); err != nil {
		t.Fatal(err)
	}
	segmentsRotate(t, r.config)
	ledgerDir := filepath.Join(r.state, "ledger")
	seed := crashSeed(t)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	torn := 0
	for round := 1; round <= crashRounds+1; round++ {
		s := startCrashServer(t, r.bin, r.config, "127.0.0.1:0", filepath.Join(r.logs, fmt.Sprintf("round-%02d.log", round)))
		s.waitReady(t)
		if round == 1 {
			r.loadVerifier(t, ledgerDir)
		}
		if s.tornTail {
			torn++
		}
		if round > crashRounds {
			// A last start, proved consistent with the last checkpoint seen before the last
			// kill, then a clean stop, which leaves the whole ledger's checkpoint on disk.
			r.finalProof(t, s)
			s.signal(t, syscall.SIGTERM)
		} else {
			delay := time.Duration(rng.Int64N(int64(crashMaxKillDelay)))
			t.Logf("round %d: server pid %d ready on %s; SIGKILL %v after the round's first certificate", round, s.cmd.Process.Pid, s.grpcAddr, delay)
			r.round(t, round, s, delay)
		}
		r.disk = append(r.disk, r.onDisk(t, ledgerDir, round))
	}
	size, issued := r.audit(t, ledgerDir)
	if last := r.disk[len(r.disk)-1]; last.cp.Size != size {
		t.Errorf("after a clean stop the checkpoint file covers %d records, the ledger holds %d", last.cp.Size, size)
	}
	leftovers, _ := filepath.Glob(filepath.Join(ledgerDir, "."+checkpoint.FileName+"-*"))
	t.Logf("totals: seed %d, %d rounds (%d starts truncated a torn tail), %d certificates acknowledged, %d sign calls failed with the server, "+
		"%d issued records (%d never acknowledged), %d distinct checkpoints seen, %d consistency proofs verified live, final tree size %d, "+
		"%d temporary checkpoint files left by kills, %v",
		seed, crashRounds, torn, len(r.acked), r.failed.Load(), issued, issued-len(r.acked), len(r.seen), r.proofs.Load(), size,
		len(leftovers), time.Since(began).Round(time.Millisecond))
}

// buildCrashServer builds cmd/signet-server into the test's temp folder.
func buildCrashServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "signet-server")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/signet-pki/signet/cmd/signet-server").CombinedOutput()
	if err != nil {
		t.Fatalf("building signet-server: %v\n%s", err, out)
	}
	return bin
}

// crashSeed is crashSeedEnv's value, or a new seed; it is logged either way.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(crashSeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, v, err)
		}
	}
	t.Logf("seed %d (set %s=%d to replay the kill moments)", seed, crashSeedEnv, seed)
	return seed
}

// seenCheckpoint is a signed checkpoint as the server returned it, and where.
type seenCheckpoint struct {
	signed []byte
	cp     ledgerproof.Checkpoint
	round  int
	via    string
}

func (s seenCheckpoint) String() string {
	return fmt.Sprintf("size %d (round %d, %s)", s.cp.Size, s.round, s.via)
}

// crashRun is the server's files, what the rounds saw and what the audit checks.
type crashRun struct {
	t                        *testing.T
	bin, state, logs, config string
	tls                      *tls.Config
	origin                   string
	verifier                 note.Verifier

	mu    sync.Mutex
	acked map[string]string // serial (hex, as the ledger has it) → object UID
	seen  []seenCheckpoint  // distinct checkpoints from the RPCs, in the order seen
	disk  []seenCheckpoint  // the checkpoint file after each kill, and after the clean stop

	failed     atomic.Int64 // sign calls that failed because the server was killed
	proofs     atomic.Int64 // consistency proofs verified when they were returned
	unexpected atomic.Int64 // RPC errors the kill does not explain
}

// loadVerifier builds the verifier of the checkpoint key the server created in the ledger
// directory; the origin is the first line of its checkpoint file.
func (r *crashRun) loadVerifier(t *testing.T, dir string) {
	t.Helper()
	key, err := keystore.Open(context.Background(), filepath.Join(dir, "checkpoint-key.pem"), keystore.Options{})
	if err != nil {
		t.Fatalf("the server's checkpoint key: %v", err)
	}
	defer key.Close()
	signed, err := os.ReadFile(filepath.Join(dir, checkpoint.FileName))
	if err != nil {
		t.Fatalf("the server's checkpoint file after its start: %v", err)
	}
	r.origin, _, _ = strings.Cut(string(signed), "\n")
	if r.verifier, err = ledgerproof.NewNoteVerifier(r.origin, key.Public()); err != nil {
		t.Fatal(err)
	}
}

// dial connects to s with the dev client certificate.
func (r *crashRun) dial(t *testing.T, s *crashServer) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(r.tls)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// round loads the server s until delay after the round's first acknowledged certificate,
// SIGKILLs it, and stops the callers and the poller.
func (r *crashRun) round(t *testing.T, n int, s *crashServer, delay time.Duration) {
	t.Helper()
	conn := r.dial(t, s)
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: no goroutine reports once the round has returned
	defer cancel()
	var acks atomic.Int64
	signer := signetv1.NewSignerServiceClient(conn)
	for w := range crashCallers {
		wg.Go(func() { r.sign(ctx, signer, n, w, &acks) })
	}
	proofs := signetv1.NewLedgerServiceClient(conn)
	wg.Go(func() {
		for ctx.Err() == nil {
			r.pollOnce(ctx, proofs, n)
			crashPause(ctx, crashPollEvery)
		}
	})
	crashPollUntil(t, crashDeadline, fmt.Sprintf("a certificate acknowledged in round %d", n), s, func() bool { return acks.Load() > 0 })
	time.Sleep(delay) // the random moment of the kill, not a wait for anything
	s.signal(t, syscall.SIGKILL)
	cancel()
	wg.Wait()
	t.Logf("round %d: %d certificates acknowledged before the kill", n, acks.Load())
}

// sign calls SignCertificateSigningRequest with a new key and object UID until ctx ends,
// recording every certificate returned.
func (r *crashRun) sign(ctx context.Context, client signetv1.SignerServiceClient, round, worker int, acks *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		uid := fmt.Sprintf("crash-%02d-%02d-%06d", round, worker, i)
		req, err := crashRequest(uid)
		if err != nil {
			r.t.Errorf("building the request of %s: %v", uid, err)
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, crashCallTimeout)
		resp, err := client.SignCertificateSigningRequest(callCtx, req)
		cancel()
		if err != nil {
			r.rpcFailed(ctx, "sign "+uid, err)
			continue
		}
		serial, err := crashLeafSerial(resp.GetCertificateChainPem())
		if err != nil {
			r.t.Errorf("the certificate of %s: %v", uid, err)
			continue
		}
		r.mu.Lock()
		r.acked[serial] = uid
		r.mu.Unlock()
		acks.Add(1)
	}
}

// rpcFailed counts an error the kill explains (Unavailable, or Canceled once the round
// ends) and pauses briefly; any other error fails the test.
func (r *crashRun) rpcFailed(ctx context.Context, what string, err error) {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		r.failed.Add(1)
		crashPause(ctx, 5*time.Millisecond)
	default:
		if r.unexpected.Add(1) <= 10 {
			r.t.Errorf("%s: %v (only Unavailable is expected, from the kill)", what, err)
		}
	}
}

// pollOnce asks for the proof that the latest checkpoint extends the last one seen, checks
// it, then fetches the latest checkpoint; both are recorded. It reports whether a proof was
// verified.
func (r *crashRun) pollOnce(ctx context.Context, client signetv1.LedgerServiceClient, round int) bool {
	callCtx, cancel := context.WithTimeout(ctx, crashCallTimeout)
	defer cancel()
	verified := false
	if prev, ok := r.latest(); ok {
		resp, err := client.ProveConsistency(callCtx, &signetv1.ProveConsistencyRequest{OldSize: prev.cp.Size})
		switch {
		case status.Code(err) == codes.FailedPrecondition:
			r.t.Errorf("round %d: the server is behind checkpoint %v it signed: %v", round, prev, err)
		case err != nil:
			r.rpcFailed(ctx, "ProveConsistency", err)
		default:
			verified = r.checkProof(prev, resp, round)
		}
	}
	resp, err := client.GetCheckpoint(callCtx, &signetv1.GetCheckpointRequest{})
	if err != nil {
		r.rpcFailed(ctx, "GetCheckpoint", err)
		return verified
	}
	if cp, ok := r.saw(resp.GetSignedCheckpoint(), round, "GetCheckpoint"); ok && resp.GetSize() != cp.Size {
		r.t.Errorf("round %d: GetCheckpoint says size %d, its signed checkpoint %d", round, resp.GetSize(), cp.Size)
	}
	return verified
}

// checkProof verifies a ProveConsistency answer from prev, as it arrives.
func (r *crashRun) checkProof(prev seenCheckpoint, resp *signetv1.ProveConsistencyResponse, round int) bool {
	newer, ok := r.saw(resp.GetSignedCheckpoint(), round, "ProveConsistency")
	if !ok {
		return false
	}
	proof := make(tlog.TreeProof, len(resp.GetProof()))
	for i, h := range resp.GetProof() {
		if len(h) != len(tlog.Hash{}) {
			r.t.Errorf("round %d: consistency proof element %d is %d bytes", round, i, len(h))
			return false
		}
		copy(proof[i][:], h)
	}
	if err := ledgerproof.VerifyConsistency(prev.cp, newer, proof); err != nil {
		r.t.Errorf("round %d: the server's consistency proof from %v: %v", round, prev, err)
		return false
	}
	r.proofs.Add(1)
	return true
}

// saw opens a signed checkpoint and records it unless its body is the last one seen.
func (r *crashRun) saw(signed []byte, round int, via string) (ledgerproof.Checkpoint, bool) {
	cp, err := ledgerproof.OpenCheckpoint(signed, r.origin, r.verifier)
	if err != nil {
		r.t.Errorf("round %d: %s returned a checkpoint that does not verify: %v", round, via, err)
		return cp, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.seen); n == 0 || !bytes.Equal(r.seen[n-1].cp.Marshal(), cp.Marshal()) {
		r.seen = append(r.seen, seenCheckpoint{signed: bytes.Clone(signed), cp: cp, round: round, via: via})
	}
	return cp, true
}

func (r *crashRun) latest() (seenCheckpoint, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return seenCheckpoint{}, false
	}
	return r.seen[len(r.seen)-1], true
}

// finalProof waits until the restarted server proves its checkpoint extends the last one
// seen before the last kill.
func (r *crashRun) finalProof(t *testing.T, s *crashServer) {
	t.Helper()
	conn := r.dial(t, s)
	defer conn.Close()
	client := signetv1.NewLedgerServiceClient(conn)
	crashPollUntil(t, crashDeadline, "a consistency proof after the last restart", s, func() bool {
		return r.pollOnce(context.Background(), client, crashRounds+1)
	})
}

// onDisk reads and verifies the checkpoint file a stopped server left.
func (r *crashRun) onDisk(t *testing.T, dir string, round int) seenCheckpoint {
	t.Helper()
	signed, err := os.ReadFile(filepath.Join(dir, checkpoint.FileName))
	if err != nil {
		t.Fatalf("after round %d: %v", round, err)
	}
	cp, err := ledgerproof.OpenCheckpoint(signed, r.origin, r.verifier)
	if err != nil {
		t.Fatalf("after round %d the checkpoint file does not verify: %v", round, err)
	}
	return seenCheckpoint{signed: signed, cp: cp, round: round, via: "checkpoint file"}
}

// audit checks the stopped server's ledger offline against everything recorded, and returns
// its size and its number of issued records.
func (r *crashRun) audit(t *testing.T, dir string) (int64, int) {
	t.Helper()
	rep, err := ledger.Verify(dir)
	if err != nil {
		t.Fatalf("ledger.Verify after %d kills: %v", crashRounds, err)
	}
	if rep.Segments < 2 {
		t.Errorf("the ledger has %d segment after %d records: no kill struck near a rotation", rep.Segments, rep.Records)
	}
	t.Logf("offline: %d records in %d segments", rep.Records, rep.Segments)
	tree := &ledgerproof.Tree{}
	issued := map[string]ledger.Record{} // by serial
	perUID := map[string]int{}
	var seq uint64
	if _, err := ledger.Leaves(dir, func(rec ledger.Record, line []byte) {
		seq++
		if _, err := tree.Append(line); err != nil {
			t.Errorf("leaf %d: %v", seq, err)
		}
		var stored ledger.Record
		if err := json.Unmarshal(line, &stored); err != nil || rec.Seq != seq || stored.Seq != seq {
			t.Errorf("leaf %d holds seq %d, its line seq %d (%v)", seq, rec.Seq, stored.Seq, err)
		}
		if rec.Decision == ledger.Issued {
			issued[rec.Serial] = rec
			perUID[rec.ObjectUID]++
		}
	}); err != nil {
		t.Fatalf("ledger.Leaves: %v", err)
	}
	if tree.Size() != int64(rep.Records) {
		t.Fatalf("ledger.Leaves gave %d leaves, ledger.Verify counts %d records", tree.Size(), rep.Records)
	}
	missing := 0
	for serial, uid := range r.acked {
		rec, ok := issued[serial]
		switch {
		case !ok:
			if missing++; missing <= 10 {
				t.Errorf("certificate %s (object %s) was acknowledged but the ledger has no record of it", serial, uid)
			}
		case rec.ObjectUID != uid:
			t.Errorf("certificate %s was acknowledged for object %s; its record names object %s", serial, uid, rec.ObjectUID)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged certificates have no durable record", missing, len(r.acked))
	}
	for uid, n := range perUID {
		if n > 1 {
			t.Errorf("object %s, asked once, has %d issued records", uid, n)
		}
	}
	r.checkChain(t, tree, "checkpoint seen", r.seen)
	r.checkChain(t, tree, "checkpoint file", r.disk)
	return tree.Size(), len(issued)
}

// checkChain checks that every checkpoint of list verifies and is a prefix of tree, and that
// each is consistent with the next (proved from tree): none went backwards.
func (r *crashRun) checkChain(t *testing.T, tree *ledgerproof.Tree, what string, list []seenCheckpoint) {
	t.Helper()
	if len(list) == 0 {
		t.Errorf("no %s to check", what)
	}
	for i, s := range list {
		if _, err := ledgerproof.OpenCheckpoint(s.signed, r.origin, r.verifier); err != nil {
			t.Errorf("%s %v does not verify: %v", what, s, err)
			continue
		}
		if s.cp.Size > tree.Size() {
			t.Errorf("%s %v covers more records than the final ledger's %d", what, s, tree.Size())
			continue
		}
		if root, err := tree.RootAt(s.cp.Size); err != nil || root != s.cp.Hash {
			t.Errorf("%s %v is not a prefix of the final tree: root %v, checkpoint %v (%v)", what, s, root, s.cp.Hash, err)
		}
		if i == 0 {
			continue
		}
		prev := list[i-1]
		proof, err := tree.ProveConsistency(prev.cp.Size, s.cp.Size)
		if err != nil {
			t.Errorf("%s %v then %v: went backwards: %v", what, prev, s, err)
			continue
		}
		if err := ledgerproof.VerifyConsistency(prev.cp, s.cp, proof); err != nil {
			t.Errorf("%s %v then %v: %v", what, prev, s, err)
		}
	}
}

// crashRequest is a request for the dev signer with a new P-256 key, for object uid.
func crashRequest(uid string) (*signetv1.SignCertificateSigningRequestRequest, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: uid}, DNSNames: []string{uid + ".crash.test"},
	}, key)
	if err != nil {
		return nil, err
	}
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: devpki.DefaultSigner,
		Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		Usages:     []string{"digital signature", "server auth"},
		Requester:  &signetv1.Requester{Username: "system:serviceaccount:crash:load"},
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid},
	}, nil
}

// crashLeafSerial is the serial number of the chain's first certificate, in hex as the ledger
// records it.
func crashLeafSerial(chain string) (string, error) {
	block, _ := pem.Decode([]byte(chain))
	if block == nil {
		return "", errors.New("no PEM certificate in the chain")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(cert.SerialNumber.Bytes()), nil
}

// crashPause waits d or until ctx ends.
func crashPause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// crashPollUntil polls done every crashPollEvery until it holds, failing the test after timeout
// or if the server s exits meanwhile.
func crashPollUntil(t *testing.T, timeout time.Duration, what string, s *crashServer, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(crashPollEvery) {
		select {
		case <-s.exited:
			t.Fatalf("waiting for %s: signet-server exited (%v): it must start on the ledger a kill left%s", what, s.waitErr, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v%s", what, timeout, s.logTail())
		}
	}
}

// crashServer is a signet-server process.
type crashServer struct {
	cmd                *exec.Cmd
	logPath            string
	grpcAddr, httpAddr string        // from its log, once waitReady returns
	tornTail           bool          // its ledger truncated a torn tail at start
	exited             chan struct{} // closed once the process has been waited for
	waitErr            error         // set before exited is closed
}

// startCrashServer runs bin with config, gRPC on grpcAddr (127.0.0.1:0: a free port) and HTTP on a free loopback port, its JSON log in logPath, and
// kills it when the test ends if it still runs.
func startCrashServer(t *testing.T, bin, config, grpcAddr, logPath string) *crashServer {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the process has its own descriptor
	cmd := exec.Command(bin, "--config", config, "--listen", grpcAddr, "--http-listen", "127.0.0.1:0", "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting signet-server: %v", err)
	}
	s := &crashServer{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-s.exited })
	return s
}

// waitReady waits until the server's log names its gRPC and HTTP addresses and its /readyz
// answers 200.
func (s *crashServer) waitReady(t *testing.T) {
	t.Helper()
	crashPollUntil(t, crashDeadline, "serving gRPC and HTTP", s, func() bool {
		data, _ := os.ReadFile(s.logPath)
		for line := range bytes.Lines(data) {
			var entry struct{ Msg, Address string }
			if json.Unmarshal(line, &entry) != nil {
				continue
			}
			switch {
			case entry.Msg == "serving gRPC":
				s.grpcAddr = entry.Address
			case entry.Msg == "serving HTTP":
				s.httpAddr = entry.Address
			case strings.Contains(entry.Msg, "truncating a torn"):
				s.tornTail = true
			}
		}
		return s.grpcAddr != "" && s.httpAddr != ""
	})
	client := &http.Client{Timeout: time.Second}
	crashPollUntil(t, crashDeadline, "/readyz 200", s, func() bool {
		resp, err := client.Get("http://" + s.httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// signal sends sig to the server, which must still be running, and waits until it has
// exited: of the SIGKILL, or with status 0 after SIGTERM.
func (s *crashServer) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("signet-server exited by itself (%v)%s", s.waitErr, s.logTail())
	default:
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(crashDeadline):
		t.Fatalf("signet-server (pid %d) still runs %v after %v%s", s.cmd.Process.Pid, crashDeadline, sig, s.logTail())
	}
	ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if sig == syscall.SIGKILL && !(ws.Signaled() && ws.Signal() == sig) || sig != syscall.SIGKILL && s.waitErr != nil {
		t.Fatalf("signet-server ended with %v after %v%s", s.waitErr, sig, s.logTail())
	}
}

// logTail is the end of the server's log, for a failure message.
func (s *crashServer) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\nlog " + s.logPath + " (end):\n" + strings.Join(lines, "\n")
}

// segmentsRotate sets the smallest ledger.segmentSize in the configuration file at path, so
// that the kills also strike around segment rotations.
func segmentsRotate(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	patched := bytes.Replace(data, []byte("ledger:\n"), []byte("ledger:\n  segmentSize: 1Mi\n"), 1)
	if bytes.Equal(patched, data) {
		t.Fatalf("%s has no ledger section to set segmentSize in", path)
	}
	if err := os.WriteFile(path, patched, 0o600); err != nil {
		t.Fatal(err)
	}
}
