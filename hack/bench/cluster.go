package main

// The -cluster mode: kube-controller-manager csrsigning, Signet (signet-server +
// signet-watcher) and the apiserver-only ceiling on one real control plane (etcd +
// kube-apiserver from internal/controlplane), in one run, with the same load generator.
//
// For every scenario the load generator starts a label-selected watch first, then 16 workers
// Create a kubernetes.io/kube-apiserver-client CSR (client auth + digital signature) and
// approve it; in the ceiling scenario (no signer process) the worker then writes a
// precomputed certificate into status itself. A certificate is observed at the first watch
// event of the CSR with a non-empty status.certificate. Throughput = N / (first Create start
// → last certificate observed); latency = approval call returned → certificate observed.
// Every signer scenario starts its signer process(es) fresh, warms them up with one CSR, and
// reads CPU (utime+stime from /proc/<pid>/stat, delta over the run) and peak RSS (VmHWM) of
// those processes. The run's CSRs are deleted afterwards.

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
)

const (
	clientSigner = certificatesv1.KubeAPIServerClientSignerName
	podSigner    = "bench.signet.dev/pods"
	loadWorkers  = 16
	runLabel     = "signet-bench-run"
)

type clusterOpts struct {
	bin           string // folder with signet-server and signet-watcher
	burst         []int  // burst sizes
	pcrBurst      []int  // PodCertificateRequest burst sizes (Signet and the ceiling only)
	pacedN        int
	pacedRate     float64
	out, plot     string
	scenarioLimit time.Duration
	rounds        int      // every scenario runs this many times, interleaved; the median run is reported
	kubeVersion   string   // Kubernetes version of the control plane and kube-controller-manager
	trustBundles  []bool   // Signet runs once per setting of the watcher's trust bundle publishing (trustcost.go)
	admin         bool     // the dev client has the admin role on the server (-rotation)
	signers       []string // the signers to run, by name (clusterSignerNames); empty: all
}

// clusterSignerNames are the signers -cluster can run, by the name -cluster-signers takes.
var clusterSignerNames = []string{"ceiling", "kcm", "kcm-qps", "signet"}

// parseClusterSigners reads -cluster-signers: names from clusterSignerNames, each once.
func parseClusterSigners(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case !slices.Contains(clusterSignerNames, name):
			return nil, fmt.Errorf("unknown signer %q (want some of %s)", name, strings.Join(clusterSignerNames, ", "))
		case slices.Contains(out, name):
			return nil, fmt.Errorf("signer %q named twice", name)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no signer named (want some of %s)", strings.Join(clusterSignerNames, ", "))
	}
	return out, nil
}

type signerKind struct {
	label string
	name  string // its name in -cluster-signers (clusterSignerNames)
	kind  string // "ceiling", "kcm" or "signet"
	qps   int    // KCM --kube-api-qps; 0 = default
	// trustBundlesOff runs Signet's watcher with trustBundles.enabled false (trustcost.go).
	trustBundlesOff bool
}

type workload struct {
	label string
	n     int
	rate  float64 // CSRs per second; 0 = burst
	pcr   bool    // PodCertificateRequests instead of CSRs
}

type point struct{ at, latency time.Duration } // at: since first create

type result struct {
	signer   signerKind
	load     workload
	signed   int
	failed   int
	total    time.Duration
	p50      time.Duration
	p90      time.Duration
	p99      time.Duration
	cpuEach  []float64 // seconds, per signer process (Signet: server, watcher)
	planeCPU float64   // seconds, kube-apiserver + etcd
	rss      float64   // MiB, sum of the processes' VmHWM
	rssEach  []float64 // MiB, VmHWM per signer process (Signet: server, watcher)
	// requests are the API server's requests over the timed run, by verb and resource
	// (apirequests.go); nil when not measured.
	requests requestCounts
	points   []point
	negative int
	busy     float64  // share of all cores busy in the second before the scenario started
	rounds   int      // runs of this scenario; this result is their median
	runs     []result // on the median: every run of the scenario, in round order
	// breakdown (Signet only; zero calls when not measured) is where the time of the run's
	// signing calls went, from the processes' metrics.
	breakdown breakdown
}

// medianRun returns the median of runs of one scenario: by throughput for a burst, by p50
// latency for a paced stream (whose throughput is the pace). Runs of the same scenario are
// interleaved with the other signers' so that a busy moment on the machine does not land on
// one signer only.
func medianRun(runs []result) result {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b result) int {
		if a.load.rate > 0 {
			return cmp.Compare(a.p50, b.p50)
		}
		return cmp.Compare(a.throughput(), b.throughput())
	})
	m := sorted[(len(sorted)-1)/2]
	m.rounds = len(runs)
	m.runs = runs
	return m
}

func (r result) throughput() float64 { return float64(r.signed) / r.total.Seconds() }

// signerProc is a running signer: its processes and a stop function.
type signerProc struct {
	pids    []int
	metrics []string // /metrics URLs to break a run's time down by (Signet's processes)
	grpc    string   // the signing server's gRPC address (Signet)
	stop    func()
}

type clusterBench struct {
	opts     clusterOpts
	cluster  *controlplane.Cluster
	kube     kubernetes.Interface
	dir      string
	state    string // devpki folder
	kcmKC    string
	watchKC  string
	requests [][]byte
	dummy    []byte
	stubs    [][]byte           // PodCertificateRequest stub PKCS#10 requests
	stubKeys []*ecdsa.PublicKey // their keys
	answers  []pcrAnswer        // the ceiling's PodCertificateRequest statuses
	// planePIDs are the control plane's kube-apiserver and etcd, which run for the whole run.
	planePIDs []int
}

func runCluster(ctx context.Context, opts clusterOpts) (err error) {
	started := time.Now()
	binaries, err := binariesNote(opts.bin) // also fails when a binary is missing
	if err != nil {
		return err
	}
	want := func(name string) bool { return len(opts.signers) == 0 || slices.Contains(opts.signers, name) }
	kcmPath := ""
	if want("kcm") || want("kcm-qps") {
		var err error
		if kcmPath, err = kcmBinary(opts.kubeVersion); err != nil {
			return err
		}
	}
	cluster, err := controlplane.Start(ctx, controlplane.Options{Version: opts.kubeVersion})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	cfg, _ := cluster.Admin()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "signet-bench-cluster-")
	if err != nil {
		return err
	}
	// Kept when the run fails: it holds the signers' logs (one per scenario) that say why.
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: kept %s for the signers' logs\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	b := &clusterBench{opts: opts, cluster: cluster, kube: kube, dir: dir, state: filepath.Join(dir, "state"),
		planePIDs: childPIDs("kube-apiserver", "etcd")}
	if err := b.setup(); err != nil {
		return err
	}
	maxN, maxPCR := opts.pacedN, 0
	for _, n := range opts.burst {
		maxN = max(maxN, n)
	}
	for _, n := range opts.pcrBurst {
		maxPCR = max(maxPCR, n)
	}
	if err := b.makeRequests(max(maxN, 1)); err != nil {
		return err
	}
	if err := b.makeStubs(max(maxPCR, 1)); err != nil {
		return err
	}

	signers := []signerKind{
		{label: "apiserver-only ceiling (generator writes the cert)", name: "ceiling", kind: "ceiling"},
		{label: "KCM csrsigning, default QPS 20/burst 30", name: "kcm", kind: "kcm"},
		{label: "KCM csrsigning, QPS 1000/burst 2000", name: "kcm-qps", kind: "kcm", qps: 1000},
	}
	signers = append(signers, signetSigners(opts.trustBundles)...)
	signers = slices.DeleteFunc(signers, func(s signerKind) bool { return !want(s.name) })
	var loads []workload
	for _, n := range opts.burst {
		loads = append(loads, workload{label: fmt.Sprintf("burst %d", n), n: n})
	}
	if opts.pacedN > 0 {
		loads = append(loads, workload{label: fmt.Sprintf("paced %g/s", opts.pacedRate), n: opts.pacedN, rate: opts.pacedRate})
	}
	for _, n := range opts.pcrBurst {
		loads = append(loads, workload{label: fmt.Sprintf("PCR burst %d", n), n: n, pcr: true})
	}
	var results []result
	var costRows string // Signet with trust bundle publishing on against off, when both run
	for _, l := range loads {
		runs := make([][]result, len(signers))
		for round := range max(opts.rounds, 1) {
			for _, i := range roundOrder(len(signers), round) {
				s := signers[i]
				if round > 0 && s.kind == "kcm" && s.qps == 0 && l.rate == 0 {
					continue // N/20 seconds each, and its rate is the client's QPS limit: once is enough
				}
				if l.pcr && s.kind == "kcm" {
					continue // kube-controller-manager has no PodCertificateRequest signer
				}
				r, err := b.scenario(ctx, kcmPath, s, l)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.label, l.label, err)
				}
				fmt.Fprintf(os.Stderr, "round %d  %-52s %-10s %4d/%d signed in %7.2fs  %7.1f CSRs/s  p50 %s p99 %s  cpu %.2fs %.2f  rss %.0f MiB  apiserver+etcd cpu %.2fs\n",
					round+1, s.label, l.label, r.signed, l.n, r.total.Seconds(), r.throughput(), ms(r.p50), ms(r.p99), r.cpu(), r.cpuEach, r.rss, r.planeCPU)
				runs[i] = append(runs[i], r)
			}
		}
		for _, rs := range runs {
			if len(rs) > 0 {
				results = append(results, medianRun(rs))
			}
		}
		costRows += trustBundleCost(l, signers, runs)
	}
	table := clusterTable(results, opts.kubeVersion, time.Since(started)) + trustBundleTable(costRows) + "\n" + binaries
	fmt.Print(table)
	if opts.out != "" {
		if err := os.WriteFile(opts.out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	if opts.plot != "" {
		if err := plotLatency(opts.plot, results); err != nil {
			return err
		}
	}
	return nil
}

// kcmBinary returns the path of kube-controller-manager for version, next to the control
// plane's binaries (controlplane.AssetsDir: $SIGNET_KUBE_ASSETS or the repository cache).
func kcmBinary(version string) (string, error) {
	dir, err := controlplane.AssetsDir(version)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kube-controller-manager")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kube-controller-manager missing (run hack/kube-bins.sh %s kube-controller-manager): %w", version, err)
	}
	return p, nil
}

// setup creates the dev PKI and a Signet configuration serving kubernetes.io/kube-apiserver-client
// with the kube-apiserver-client profile and podSigner with the pod-identity profile, and
// kubeconfigs for KCM and the watcher. Both signers
// run as least-privilege users with the same RBAC rules (controlplane.SignerRules), as they do in
// production (KCM's csrsigning uses the certificate-controller service account there): an
// admin in system:masters skips authorization and made KCM's status writes ~0.5 ms faster than
// the watcher's on an idle API server.
func (b *clusterBench) setup() error {
	cfgPath, err := devpki.Ensure(devpki.Options{Dir: b.state, SignerName: clientSigner})
	if err != nil {
		return err
	}
	if err := writeSignetConfig(cfgPath, b.opts.admin); err != nil {
		return err
	}
	kcm, err := b.cluster.AddSigner("kcm-csrsigning", []string{clientSigner})
	if err != nil {
		return err
	}
	b.kcmKC = filepath.Join(b.dir, "kcm.kubeconfig")
	if err := b.cluster.WriteKubeconfig(kcm, b.kcmKC); err != nil {
		return err
	}
	// The watcher's rules are its deployment's (controlplane.AddWatcher): the CSR rules KCM has,
	// plus PodCertificateRequests.
	u, err := b.cluster.AddWatcher("signet-watcher", []string{clientSigner, podSigner})
	if err != nil {
		return err
	}
	b.watchKC = filepath.Join(b.dir, "watcher.kubeconfig")
	return b.cluster.WriteKubeconfig(u, b.watchKC)
}

// makeRequests pre-generates n P-256 keys and CSRs and a dummy certificate (not timed).
func (b *clusterBench) makeRequests(n int) error {
	b.requests = make([][]byte, n)
	for i := range n {
		csr, err := newCSR(fmt.Sprintf("bench-client-%d", i))
		if err != nil {
			return err
		}
		b.requests[i] = csr
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-dummy"},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-dummy"}}, &key.PublicKey, key)
	if err != nil {
		return err
	}
	b.dummy = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

// writeSignetConfig rewrites the devpki configuration at path to serve clientSigner with the
// kube-apiserver-client profile and podSigner with the pod-identity profile, both from the dev
// signer CA; admin gives the dev client the admin role (it may rotate the signers' CAs).
func writeSignetConfig(path string, admin bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg config.Config
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if len(cfg.Signers) == 0 {
		return fmt.Errorf("%s has no signer", path)
	}
	csrSigner, pcrSigner := cfg.Signers[0], cfg.Signers[0]
	csrSigner.Name, csrSigner.Profile = clientSigner, profile.Spec{Name: profile.NameKubeAPIServerClient}
	pcrSigner.Name, pcrSigner.Profile = podSigner, profile.Spec{Name: profile.NamePodIdentity}
	cfg.Signers = []config.Signer{csrSigner, pcrSigner}
	for i := range cfg.Clients {
		cfg.Clients[i].Admin = admin
	}
	out, err := yaml.Marshal(&cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// freePorts returns n distinct free loopback addresses; all n stay bound until every one is
// chosen, so that no two are the same port.
func freePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// startSigner starts the signer process(es) of s with their output in the scenario's log file.
func (b *clusterBench) startSigner(ctx context.Context, kcmPath string, s signerKind, tag string) (*signerProc, error) {
	logf, err := os.Create(filepath.Join(b.dir, tag+".log"))
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range slices.Backward(cmds) {
			_ = c.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
		logf.Close()
	}
	start := func(path string, args ...string) error {
		c := exec.CommandContext(ctx, path, args...)
		c.Stdout, c.Stderr = logf, logf
		// SIGNET_BENCH_SIGNER_ENV adds space-separated NAME=value pairs to every signer
		// process's environment (KCM's as well as Signet's), for experiments such as
		// GOMAXPROCS=1; the reported runs leave it unset.
		if extra := os.Getenv("SIGNET_BENCH_SIGNER_ENV"); extra != "" {
			c.Env = append(os.Environ(), strings.Fields(extra)...)
		}
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", filepath.Base(path), err)
		}
		cmds = append(cmds, c)
		return nil
	}
	var metrics []string
	var grpcAddr string
	switch s.kind {
	case "kcm":
		args := []string{"--kubeconfig=" + b.kcmKC, "--controllers=csrsigning", "--leader-elect=false",
			"--use-service-account-credentials=false", "--secure-port=0",
			"--cluster-signing-cert-file=" + filepath.Join(b.state, devpki.SignerCACert),
			"--cluster-signing-key-file=" + filepath.Join(b.state, devpki.SignerCAKey),
			"--cluster-signing-duration=24h"}
		if s.qps > 0 {
			args = append(args, fmt.Sprintf("--kube-api-qps=%d", s.qps), fmt.Sprintf("--kube-api-burst=%d", 2*s.qps))
		}
		err = start(kcmPath, args...)
	case "signet":
		var addrs []string
		if addrs, err = freePorts(3); err != nil {
			break
		}
		grpcAddr = addrs[0]
		httpAddr, watcherMetrics := addrs[1], addrs[2]
		metrics = []string{"http://" + httpAddr + "/metrics", "http://" + watcherMetrics + "/metrics"}
		if err = start(filepath.Join(b.opts.bin, "signet-server"), "--config", filepath.Join(b.state, devpki.ConfigFile),
			"--listen", grpcAddr, "--http-listen", httpAddr); err != nil {
			break
		}
		var extra []string
		if s.trustBundlesOff {
			if extra, err = b.noTrustBundlesFlags(); err != nil {
				break
			}
		}
		err = start(filepath.Join(b.opts.bin, "signet-watcher"), append([]string{"--kubeconfig", b.watchKC, "--signer-name", clientSigner, "--signer-name", podSigner,
			"--server", grpcAddr, "--tls-ca", filepath.Join(b.state, devpki.TLSCACert),
			"--tls-cert", filepath.Join(b.state, devpki.ClientCert), "--tls-key", filepath.Join(b.state, devpki.ClientKey),
			"--leader-elect=false", "--metrics-address=" + watcherMetrics}, extra...)...)
	}
	p := &signerProc{stop: stop, metrics: metrics, grpc: grpcAddr}
	for _, c := range cmds {
		p.pids = append(p.pids, c.Process.Pid)
	}
	if err != nil {
		stop()
		return nil, err
	}
	return p, nil
}

// checkCertificate verifies that an issued certificate chains to the signer CA for client auth.
func (b *clusterBench) checkCertificate(certPEM []byte) error {
	caPEM, err := os.ReadFile(filepath.Join(b.state, devpki.SignerCACert))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return errors.New("warm-up certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("warm-up certificate: %w", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("warm-up certificate: %w", err)
	}
	return nil
}
