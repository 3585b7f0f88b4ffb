// Command bench measures signet-server's issuance path in-process against the bare crypto
// anchor, in the same run, with Go's benchmark harness (testing.Benchmark), and prints the
// ratios as a Markdown table. `make bench` runs it.
//
//   - anchor: parse and check a PKCS#10 request, x509.CreateCertificate with the same CA key,
//     PEM-encode: the least any signer must do;
//   - signet in-process: Service.SignCertificateSigningRequest with a unique object UID per
//     call — parse, profile, template, lint gate (on or off), sign, post-sign verification, a
//     durable ledger record (fsync, group commit) and the idempotency store;
//   - signet-server over gRPC + mTLS: the same call made by a client to the real server
//     (server.New on a configuration file, served on loopback; see grpcIssue). The targets
//     apply to this one: it is the server as its clients see it;
//   - health check: a grpc.health.v1 Check of the same server, the anchor for what a call over
//     gRPC with mutual TLS costs by itself. With the in-process rate it gives the ratio the
//     server would reach if gRPC cost one such call and nothing more (see row.bounds).
//
// Each is measured with 1 caller and with 64 concurrent callers, over several rounds (-rounds);
// a round measures all four one right after another, and the table reports each column's
// median and the median of the rounds' gRPC/bare ratios, with their range.
//
// -rotation measures, on a real cluster, how long a CA staged on the server takes to reach the
// signer's ClusterTrustBundle and a retired one to leave it (rotation.go); -cluster with
// -cluster-trust-bundles on,off runs Signet's bursts with the watcher's trust bundle
// publishing on and off (trustcost.go).
//
// -attestation measures the server's check of a TPM-attested request against the raw
// signature checks it contains, with attestation's own benchmarks (attestation.go).
//
// -node-join times a node's join from start to certificate on a real control plane: through
// TPM attestation (the node agent on swtpm) against a plain bootstrap-token join approved by
// kube-controller-manager, interleaved in one run (nodejoin.go).
//
// -hardware measures CA keys in hardware instead (keys.go): the raw signatures per second of
// each keystore backend (file, encrypted file, SoftHSM2, the in-process TPM simulator, swtpm)
// and the server's issuances per second over gRPC with that key as its CA key.
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/controlplane"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/signerapi"
	"github.com/signet-pki/signet/watcher"
)

const signerName = "bench.signet.dev/clients"

func main() {
	out := flag.String("out", "", "also write the table to this Markdown file")
	benchtime := flag.Duration("benchtime", time.Second, "time per measurement")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memory := flag.Bool("watcher-memory", false, "measure signet-watcher's resident memory with 20,000 foreign and 2,000 own CSRs in a real cluster instead")
	bin := flag.String("bin", "bin", "folder holding signet-watcher, for -watcher-memory")
	keys := flag.String("keys", "P-256,RSA-2048", "comma-separated CA key types to measure")
	callersFlag := flag.String("callers", "1,64", "comma-separated numbers of concurrent callers")
	blockprofile := flag.String("blockprofile", "", "write a goroutine blocking profile of the whole run to this file")
	mutexprofile := flag.String("mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	lintModes := flag.String("lint", "off,on", "which lint settings to measure signet with: off, on or both")
	serverRounds := flag.Int("rounds", 5, "server alone: measure every configuration this many times (bare, in-process, gRPC and a health check in each round) and report the medians")
	traceFile := flag.String("trace", "", "write an execution trace of the whole run to this file")
	stats := flag.Bool("stats", false, "print each signet run's ledger batch statistics to stderr")
	clusterMode := flag.Bool("cluster", false, "compare kube-controller-manager csrsigning, Signet and the apiserver-only ceiling on one real control plane instead")
	clusterBurst := flag.String("cluster-burst", "1000", "comma-separated burst sizes for -cluster")
	pcrBurst := flag.String("cluster-pcr-burst", "", "comma-separated PodCertificateRequest burst sizes for -cluster (Signet and the ceiling; empty to skip)")
	clusterPaced := flag.Int("cluster-paced", 200, "CSRs in the paced stream of -cluster (0 to skip)")
	clusterRate := flag.Float64("cluster-rate", 10, "CSRs per second of the paced stream of -cluster")
	rounds := flag.Int("cluster-rounds", 3, "with -cluster, run every scenario this many times, interleaved, and report the median run")
	plot := flag.String("plot", "", "with -cluster, write the latency plot (PNG) to this file")
	kubeVersion := flag.String("kube-version", controlplane.DefaultVersion, "Kubernetes version of the control plane (and kube-controller-manager) for -cluster and -watcher-memory")
	hardware := flag.Bool("hardware", false, "measure CA keys in hardware instead: raw signatures/s of each keystore backend and issuances/s of the server over gRPC with that key (-callers)")
	hardwareBackends := flag.String("hardware-backends", strings.Join(hardwareBackendNames, ","), "with -hardware, the comma-separated backends to measure")
	hardwareRounds := flag.Int("hardware-rounds", 3, "with -hardware, measure everything this many times, interleaved, and report the medians")
	hardwareBenchtime := flag.Duration("hardware-benchtime", 500*time.Millisecond, "with -hardware, time per measurement")
	clusterSigners := flag.String("cluster-signers", strings.Join(clusterSignerNames, ","), "with -cluster, the comma-separated signers to run: ceiling (the apiserver-only ceiling), kcm (kube-controller-manager at its default QPS), kcm-qps (at QPS 1000), signet")
	trustBundles := flag.String("cluster-trust-bundles", "on", "with -cluster, run Signet with the watcher's ClusterTrustBundle publishing on, off, or both in the same rounds (on,off)")
	rotation := flag.Bool("rotation", false, "measure how long a CA staged on the signing server takes to reach the cluster's ClusterTrustBundle, and a retired one to leave it, with the watcher's default trust bundle settings, instead")
	rotationN := flag.Int("rotation-n", 10, "with -rotation, stage and retire this many CAs")
	rotationJitter := flag.Duration("rotation-jitter", watcher.DefaultTrustBundlePeriod, "with -rotation, pause a random time in [0, this) before each stage and retire, so that it lands anywhere in the publisher's period (0: right after the last change was seen)")
	attest := flag.Bool("attestation", false, "measure the server's check of a TPM-attested request (attestation/bench_test.go) against the raw signature checks it contains instead")
	attestRounds := flag.Int("attestation-rounds", 5, "with -attestation, run every benchmark this many times, interleaved, and report the medians")
	attestBenchtime := flag.Duration("attestation-benchtime", time.Second, "with -attestation, time per benchmark run")
	goCmd := flag.String("go", "go", "with -attestation, the go command that builds the attestation package's test binary")
	nodeJoin := flag.Bool("node-join", false, "time a node's join from start to certificate on a real control plane instead: through TPM attestation (the node agent on swtpm) against a plain bootstrap-token join, interleaved (nodejoin.go)")
	nodeJoinN := flag.Int("node-join-n", 200, "with -node-join, joins of each kind (at least 100 for a p99 that is not the slowest join)")
	nodeJoinJitter := flag.Duration("node-join-jitter", 500*time.Millisecond, "with -node-join, pause a random time in [0, this) before each join, so that each is one node's on a control plane at rest")
	fleet := flag.Bool("fleet", false, "measure signet-server on a fleet's PostgreSQL against the file ledger instead: issuances/s of 1, 2 and 3 servers on one database, round trips and the database's CPU per issuance, record to covering checkpoint, integrator failover, cold start with 1 M records (fleet.go)")
	ledgerScale := flag.Bool("ledger-scale", false, "measure the ledger as its history grows instead (-ledger-sizes, default 0, 1 M and 10 M records): start time, RSS, lookups by serial, inclusion proofs, and appends at 1 and 64 callers against v0.1.0's ledger at the same size (ledgerscale.go)")
	flag.Parse()
	if *fleet {
		if err := runFleet(context.Background(), *bin, *out); err != nil {
			fail(err)
		}
		return
	}
	if *ledgerScale || *ledgerOpenFlag != "" {
		if err := runLedgerScale(context.Background(), *out); err != nil {
			fail(err)
		}
		return
	}
	if *nodeJoin {
		if err := runNodeJoin(context.Background(), nodeJoinOpts{bin: *bin, kubeVersion: *kubeVersion, out: *out, n: *nodeJoinN, jitter: *nodeJoinJitter}); err != nil {
			fail(err)
		}
		return
	}
	if *attest {
		if err := runAttestation(context.Background(), attestationOpts{goCmd: *goCmd, rounds: *attestRounds, benchtime: *attestBenchtime, out: *out}); err != nil {
			fail(err)
		}
		return
	}
	if *rotation {
		if err := runRotation(context.Background(), rotationOpts{bin: *bin, kubeVersion: *kubeVersion, out: *out, n: *rotationN, jitter: *rotationJitter}); err != nil {
			fail(err)
		}
		return
	}
	if *clusterMode {
		tb, err := parseTrustBundles(*trustBundles)
		if err != nil {
			fail(err)
		}
		bursts, err := parseInts(*clusterBurst)
		if err != nil {
			fail(fmt.Errorf("-cluster-burst: %w", err))
		}
		pcrBursts, err := parseInts(*pcrBurst)
		if err != nil {
			fail(fmt.Errorf("-cluster-pcr-burst: %w", err))
		}
		signers, err := parseClusterSigners(*clusterSigners)
		if err != nil {
			fail(fmt.Errorf("-cluster-signers: %w", err))
		}
		if err := runCluster(context.Background(), clusterOpts{bin: *bin, burst: bursts, pcrBurst: pcrBursts, pacedN: *clusterPaced, pacedRate: *clusterRate,
			out: *out, plot: *plot, scenarioLimit: 5 * time.Minute, rounds: *rounds, kubeVersion: *kubeVersion, trustBundles: tb, signers: signers}); err != nil {
			fail(err)
		}
		return
	}
	if *memory {
		row, err := watcherMemory(context.Background(), *bin, *kubeVersion, 20000, 2000)
		if err != nil {
			fail(err)
		}
		table := "| cluster | watcher peak RSS | RSS at end | target |\n|---|---|---|---|\n" + row
		fmt.Print(table)
		if *out != "" {
			if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
				fail(err)
			}
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fail(err)
		}
		if err := trace.Start(f); err != nil {
			fail(err)
		}
		defer trace.Stop()
	}
	if *blockprofile != "" {
		runtime.SetBlockProfileRate(1)
		defer writeProfile("block", *blockprofile)
	}
	if *mutexprofile != "" {
		runtime.SetMutexProfileFraction(1)
		defer writeProfile("mutex", *mutexprofile)
	}
	if *hardware {
		callers, err := parseInts(*callersFlag)
		if err != nil {
			fail(fmt.Errorf("-callers: %w", err))
		}
		if err := runHardwareReport(context.Background(), hardwareOpts{backends: strings.Split(*hardwareBackends, ","), callers: callers,
			rounds: *hardwareRounds, benchtime: *hardwareBenchtime}, *out); err != nil {
			fail(err)
		}
		return
	}
	printStats = *stats
	testing.Init()
	_ = flag.Set("test.benchtime", benchtime.String())
	callerCounts, err := parseInts(*callersFlag)
	if err != nil {
		fail(err)
	}

	lintOn, err := parseLintModes(*lintModes)
	if err != nil {
		fail(err)
	}
	if *serverRounds < 1 {
		fail(fmt.Errorf("-rounds %d: want at least 1", *serverRounds))
	}
	rows, err := serverAlone(serverAloneOpts{keys: strings.Split(*keys, ","), callers: callerCounts, lintModes: lintOn, rounds: *serverRounds})
	if err != nil {
		fail(err)
	}
	table := render(rows)
	fmt.Print(table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
			fail(err)
		}
	}
}

// measure runs fn under testing.Benchmark with the given number of concurrent callers and
// returns operations per second.
func measure(callers int, fn func() error) float64 {
	cpu0 := cpuTime()
	var ops atomic.Int64 // every call, calibration rounds included, for CPU per operation
	res := testing.Benchmark(func(b *testing.B) {
		// RunParallel starts parallelism × GOMAXPROCS goroutines: round up to at least callers.
		p := runtime.GOMAXPROCS(0)
		b.SetParallelism(max(1, (callers+p-1)/p))
		if callers == 1 {
			for b.Loop() {
				ops.Add(1)
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ops.Add(1)
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	if res.N == 0 {
		fail(fmt.Errorf("benchmark failed (callers=%d)", callers))
	}
	if printStats {
		// CPU per operation is less sensitive to a noisy machine than the rate. It counts
		// every call, testing.Benchmark's calibration rounds included.
		cpu := cpuTime() - cpu0
		fmt.Fprintf(os.Stderr, "callers %d: %.0f µs CPU per op over %d ops, %.0f ops/s\n",
			callers, float64(cpu.Microseconds())/float64(ops.Load()), ops.Load(), float64(res.N)/res.T.Seconds())
	}
	return float64(res.N) / res.T.Seconds()
}

// bareIssue is the anchor: parse and check the request, sign a leaf with the CA key, PEM.
func bareIssue(ca *issuance.CA, csrPEM []byte) error {
	block, _ := pem.Decode(csrPEM)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	if err := csr.CheckSignature(); err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: csr.Subject, NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}, ca.Certificate, csr.PublicKey, ca.Key)
	if err != nil {
		return err
	}
	_ = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

// signetIssue builds a Service (kube-apiserver-client profile, ledger in a temp folder) and
// returns a function issuing one certificate per call under a fresh object UID.
func signetIssue(ca *issuance.CA, csrPEM []byte, lintOn bool) (func() error, func(), error) {
	prof, err := profile.New(profile.Spec{Name: profile.NameKubeAPIServerClient}, 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	var gate *lint.Gate
	if lintOn {
		if gate, err = lint.New(lint.Options{}); err != nil {
			return nil, nil, err
		}
	}
	is, err := issuance.NewIssuer(issuance.IssuerOptions{SignerName: signerName, CA: ca, Policy: prof, Lint: gate})
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "signet-bench-ledger-")
	if err != nil {
		return nil, nil, err
	}
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		return nil, nil, err
	}
	svc := signerapi.New(decision.New([]*decision.Signer{{Issuer: is, Profile: prof}}, decision.Access{},
		decision.Options{Ledger: led, Store: idempotency.New(idempotency.Options{})}))
	var n atomic.Int64
	sign := func() error {
		_, err := svc.SignCertificateSigningRequest(context.Background(), &signetv1.SignCertificateSigningRequestRequest{
			SignerName: signerName,
			Request:    csrPEM,
			Usages:     []string{"digital signature", "client auth"},
			Requester:  &signetv1.Requester{Username: "bench"},
			Object:     &signetv1.KubernetesObject{Uid: "bench-" + strconv.FormatInt(n.Add(1), 10)},
		})
		return err
	}
	cleanup := func() {
		if printStats {
			st := led.Stats()
			fmt.Fprintf(os.Stderr, "ledger: %d records in %d batches (%.1f per fsync), lint %v\n",
				st.Records, st.Batches, float64(st.Records)/float64(max(st.Batches, 1)), lintOn)
		}
		_ = led.Close()
		_ = os.RemoveAll(dir)
	}
	return sign, cleanup, nil
}

// newCA is a self-signed CA with a fresh key of type kt: P-256 or RSA-2048.
func newCA(kt string) (*issuance.CA, error) {
	var key crypto.Signer
	var err error
	switch kt {
	case "P-256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RSA-2048":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("unknown CA key type %q in -keys (accepted: P-256, RSA-2048)", kt)
	}
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA " + kt},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &issuance.CA{Certificate: cert, Key: key}, nil
}

// newCSR is a PEM PKCS#10 request for a fresh P-256 key, subject CN=commonName, O=bench.
func newCSR(commonName string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName, Organization: []string{"bench"}}}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// printStats is -stats.
var printStats bool

// parseInts parses a comma-separated list of positive counts; an empty list is none.
func parseInts(list string) ([]int, error) {
	var out []int
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q in %q", f, list)
		}
		out = append(out, n)
	}
	return out, nil
}

// roundOrder is the order in which round runs n measurements (the cluster's signers, or the
// server-alone anchor, in-process, gRPC and health-check calls): each round starts one later
// than the round before, and odd rounds run backwards, so that none always runs first or last,
// or right after the same other one (the machine drifts within a round, and on the control
// plane etcd keeps the history of earlier scenarios until the API server compacts it). Two
// measurements are only rotated, so that they alternate: reversing too would undo it.
func roundOrder(n, round int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (round + k) % n
	}
	if round%2 == 1 && n > 2 {
		slices.Reverse(order)
	}
	return order
}

// parseLintModes parses -lint: a comma-separated list of off and on, in the order given.
func parseLintModes(list string) ([]bool, error) {
	var out []bool
	for _, f := range strings.Split(list, ",") {
		switch strings.TrimSpace(f) {
		case "off":
			out = append(out, false)
		case "on":
			out = append(out, true)
		default:
			return nil, fmt.Errorf("-lint: bad setting %q in %q (accepted: off, on)", f, list)
		}
	}
	return out, nil
}

func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
