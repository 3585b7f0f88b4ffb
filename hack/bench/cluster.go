package main

// The -cluster mode: kube-controller-manager csrsigning, Signet (signet-server +
// signet-watcher) and the apiserver-only ceiling on one real control plane (etcd +
// kube-apiserver from internal/testcluster), in one run, with the same load generator.
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
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/internal/testcluster"
	"github.com/signet-pki/signet/server/devpki"
)

const (
	clientSigner = certificatesv1.KubeAPIServerClientSignerName
	kubeVersion  = "v1.37.1"
	loadWorkers  = 16
	runLabel     = "signet-bench-run"
)

type clusterOpts struct {
	bin            string // folder with signet-server and signet-watcher
	burst          []int  // burst sizes
	pacedN         int
	pacedRate      float64
	out, plot      string
	scenarioLimit  time.Duration
	kubeAssetsRoot string
}

type signerKind struct {
	label string
	kind  string // "ceiling", "kcm" or "signet"
	qps   int    // KCM --kube-api-qps; 0 = default
}

type workload struct {
	label string
	n     int
	rate  float64 // CSRs per second; 0 = burst
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
	cpu      float64 // seconds, all signer processes
	rss      float64 // MiB, sum of the processes' VmHWM
	points   []point
	negative int
	busy     float64 // share of all cores busy in the second before the scenario started
}

func (r result) throughput() float64 { return float64(r.signed) / r.total.Seconds() }

// signerProc is a running signer: its processes and a stop function.
type signerProc struct {
	pids []int
	stop func()
}

type clusterBench struct {
	opts     clusterOpts
	cluster  *testcluster.Cluster
	kube     kubernetes.Interface
	dir      string
	state    string // devpki folder
	adminKC  string
	watchKC  string
	requests [][]byte
	dummy    []byte
}

func runCluster(ctx context.Context, opts clusterOpts) error {
	started := time.Now()
	for _, b := range []string{"signet-server", "signet-watcher"} {
		if _, err := os.Stat(filepath.Join(opts.bin, b)); err != nil {
			return fmt.Errorf("%s missing (run make build): %w", b, err)
		}
	}
	// SIGNET_BENCH_SIGNERS (comma-separated kinds: ceiling, kcm, signet) narrows the run for debugging.
	only := os.Getenv("SIGNET_BENCH_SIGNERS")
	want := func(kind string) bool { return only == "" || slices.Contains(strings.Split(only, ","), kind) }
	kcmPath := ""
	if want("kcm") {
		var err error
		if kcmPath, err = kcmBinary(); err != nil {
			return err
		}
	}
	cluster, err := testcluster.Start(ctx, testcluster.Options{Version: kubeVersion})
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
	defer os.RemoveAll(dir)
	b := &clusterBench{opts: opts, cluster: cluster, kube: kube, dir: dir, state: filepath.Join(dir, "state")}
	if err := b.setup(); err != nil {
		return err
	}
	maxN := opts.pacedN
	for _, n := range opts.burst {
		maxN = max(maxN, n)
	}
	if err := b.makeRequests(maxN); err != nil {
		return err
	}

	signers := []signerKind{
		{label: "apiserver-only ceiling (generator writes the cert)", kind: "ceiling"},
		{label: "KCM csrsigning, default QPS 20/burst 30", kind: "kcm"},
		{label: "KCM csrsigning, QPS 1000/burst 2000", kind: "kcm", qps: 1000},
		{label: "Signet (signet-server + signet-watcher)", kind: "signet"},
	}
	signers = slices.DeleteFunc(signers, func(s signerKind) bool { return !want(s.kind) })
	var loads []workload
	for _, n := range opts.burst {
		loads = append(loads, workload{label: fmt.Sprintf("burst %d", n), n: n})
	}
	if opts.pacedN > 0 {
		loads = append(loads, workload{label: fmt.Sprintf("paced %g/s", opts.pacedRate), n: opts.pacedN, rate: opts.pacedRate})
	}
	var results []result
	for _, l := range loads {
		for _, s := range signers {
			r, err := b.scenario(ctx, kcmPath, s, l)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", s.label, l.label, err)
			}
			fmt.Fprintf(os.Stderr, "%-52s %-10s %4d/%d signed in %7.2fs  %7.1f CSRs/s  p50 %s p99 %s  cpu %.2fs  rss %.0f MiB\n",
				s.label, l.label, r.signed, l.n, r.total.Seconds(), r.throughput(), ms(r.p50), ms(r.p99), r.cpu, r.rss)
			results = append(results, r)
		}
	}
	table := clusterTable(results, time.Since(started))
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

func kcmBinary() (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, ".cache", "kube", kubeVersion, "kube-controller-manager")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kube-controller-manager missing (run hack/kube-bins.sh %s kube-controller-manager from the repository root): %w", kubeVersion, err)
	}
	return p, nil
}

// setup creates the dev PKI and a Signet configuration serving kubernetes.io/kube-apiserver-client
// with the kube-apiserver-client profile, and kubeconfigs for KCM (admin) and the watcher.
func (b *clusterBench) setup() error {
	cfgPath, err := devpki.Ensure(devpki.Options{Dir: b.state, SignerName: clientSigner})
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	cfg := string(raw)
	i := strings.Index(cfg, "    profile:\n")
	if i < 0 {
		return errors.New("devpki config has no profile section")
	}
	cfg = cfg[:i] + "    profile:\n      name: kube-apiserver-client\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	b.adminKC = filepath.Join(b.dir, "admin.kubeconfig")
	if err := b.cluster.WriteKubeconfig(nil, b.adminKC); err != nil {
		return err
	}
	u, err := b.cluster.AddSigner("signet-watcher", []string{clientSigner})
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

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
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
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", filepath.Base(path), err)
		}
		cmds = append(cmds, c)
		return nil
	}
	switch s.kind {
	case "kcm":
		args := []string{"--kubeconfig=" + b.adminKC, "--controllers=csrsigning", "--leader-elect=false",
			"--use-service-account-credentials=false", "--secure-port=0",
			"--cluster-signing-cert-file=" + filepath.Join(b.state, devpki.SignerCACert),
			"--cluster-signing-key-file=" + filepath.Join(b.state, devpki.SignerCAKey),
			"--cluster-signing-duration=24h"}
		if s.qps > 0 {
			args = append(args, fmt.Sprintf("--kube-api-qps=%d", s.qps), fmt.Sprintf("--kube-api-burst=%d", 2*s.qps))
		}
		err = start(kcmPath, args...)
	case "signet":
		var grpcAddr, httpAddr string
		if grpcAddr, err = freePort(); err != nil {
			break
		}
		if httpAddr, err = freePort(); err != nil {
			break
		}
		if err = start(filepath.Join(b.opts.bin, "signet-server"), "--config", filepath.Join(b.state, devpki.ConfigFile),
			"--listen", grpcAddr, "--http-listen", httpAddr); err != nil {
			break
		}
		err = start(filepath.Join(b.opts.bin, "signet-watcher"), "--kubeconfig", b.watchKC, "--signer-name", clientSigner,
			"--server", grpcAddr, "--tls-ca", filepath.Join(b.state, devpki.TLSCACert),
			"--tls-cert", filepath.Join(b.state, devpki.ClientCert), "--tls-key", filepath.Join(b.state, devpki.ClientKey),
			"--leader-elect=false", "--metrics-address=127.0.0.1:0")
	}
	p := &signerProc{stop: stop}
	for _, c := range cmds {
		p.pids = append(p.pids, c.Process.Pid)
	}
	if err != nil {
		stop()
		return nil, err
	}
	return p, nil
}

func (b *clusterBench) newCSR(name, tag string, i int) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runLabel: tag}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: b.requests[i], SignerName: clientSigner,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

func approve(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "SignetBench", Message: "approved by the benchmark", LastUpdateTime: metav1.Now(),
	})
}

// warmUp submits one CSR and waits until it is signed, so the signer is up and synced.
func (b *clusterBench) warmUp(ctx context.Context, tag string) error {
	csrs := b.kube.CertificatesV1().CertificateSigningRequests()
	name := "warm-" + tag
	csr, err := csrs.Create(ctx, b.newCSR(name, "warm-"+tag, 0), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = csrs.Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	approve(csr)
	if _, err := csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		got, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(got.Status.Certificate) > 0 {
			return b.checkCertificate(got.Status.Certificate)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("signer did not sign the warm-up CSR within 90s (see its log)")
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

func (b *clusterBench) scenario(ctx context.Context, kcmPath string, s signerKind, l workload) (result, error) {
	tag := fmt.Sprintf("%s%d-%s-%d", s.kind, s.qps, strings.ReplaceAll(strings.ReplaceAll(l.label, " ", ""), "/", ""), time.Now().UnixNano()%1e6)
	tag = strings.ReplaceAll(tag, ".", "")
	res := result{signer: s, load: l, busy: waitQuiet(60 * time.Second)}
	var proc *signerProc
	if s.kind != "ceiling" {
		var err error
		if proc, err = b.startSigner(ctx, kcmPath, s, tag); err != nil {
			return res, err
		}
		defer proc.stop()
		if err := b.warmUp(ctx, tag); err != nil {
			return res, err
		}
	}
	csrs := b.kube.CertificatesV1().CertificateSigningRequests()
	defer func() {
		_ = csrs.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
	}()
	cpu0 := 0.0
	if proc != nil {
		cpu0 = cpuSeconds(proc.pids)
	}

	// The watch starts before anything is created.
	list, err := csrs.List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
	if err != nil {
		return res, err
	}
	n := l.n
	observed := make([]time.Time, n)
	approved := make([]time.Time, n)
	var mu sync.Mutex
	seen, failed := 0, 0
	done := make(chan struct{})
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	watchErr := make(chan error, 1)
	go func() {
		rv := list.ResourceVersion
		for wctx.Err() == nil {
			w, err := csrs.Watch(wctx, metav1.ListOptions{LabelSelector: runLabel + "=" + tag, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if wctx.Err() == nil {
					watchErr <- err
				}
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
				if !ok {
					continue
				}
				rv = csr.ResourceVersion
				if ev.Type == watch.Bookmark {
					continue
				}
				i, err := strconv.Atoi(csr.Annotations["bench/index"])
				if err != nil || i < 0 || i >= n {
					continue
				}
				now := time.Now()
				mu.Lock()
				if observed[i].IsZero() {
					if len(csr.Status.Certificate) > 0 {
						observed[i] = now
						seen++
					} else if slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
						return c.Type == certificatesv1.CertificateFailed || c.Type == certificatesv1.CertificateDenied
					}) {
						observed[i] = now
						failed++
					}
					if seen+failed == n {
						close(done)
					}
				}
				mu.Unlock()
			}
			w.Stop()
		}
	}()

	work := make(chan int)
	errs := make(chan error, loadWorkers)
	var wg sync.WaitGroup
	for range loadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := b.submit(ctx, csrs, tag, i, s.kind == "ceiling", approved); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	start := time.Now()
	var submitErr error
	for i := range n {
		if l.rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / l.rate * float64(time.Second)))))
		}
		select {
		case work <- i:
		case submitErr = <-errs:
		}
		if submitErr != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	if submitErr == nil {
		select {
		case submitErr = <-errs:
		default:
		}
	}
	if submitErr != nil {
		return res, submitErr
	}
	select {
	case <-done:
	case err := <-watchErr:
		return res, fmt.Errorf("watch: %w", err)
	case <-time.After(b.opts.scenarioLimit):
	}
	cancelWatch()
	if proc != nil {
		res.cpu = cpuSeconds(proc.pids) - cpu0
		for _, pid := range proc.pids {
			hwm, _, err := procMemory(pid)
			if err == nil {
				res.rss += hwm
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	res.signed, res.failed = seen, failed
	var lats []time.Duration
	var last time.Time
	for i := range n {
		if observed[i].IsZero() {
			continue
		}
		if observed[i].After(last) {
			last = observed[i]
		}
		lat := observed[i].Sub(approved[i])
		if approved[i].IsZero() {
			continue
		}
		if lat < 0 {
			res.negative++
		}
		lats = append(lats, lat)
		res.points = append(res.points, point{at: observed[i].Sub(start), latency: lat})
	}
	res.total = last.Sub(start)
	if res.signed < n {
		res.total = time.Since(start)
	}
	slices.Sort(lats)
	res.p50, res.p90, res.p99 = quantile(lats, 0.50), quantile(lats, 0.90), quantile(lats, 0.99)
	return res, nil
}

// submit creates CSR i, approves it and, for the ceiling, writes the dummy certificate.
func (b *clusterBench) submit(ctx context.Context, csrs interface {
	Create(context.Context, *certificatesv1.CertificateSigningRequest, metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	UpdateApproval(context.Context, string, *certificatesv1.CertificateSigningRequest, metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
	UpdateStatus(context.Context, *certificatesv1.CertificateSigningRequest, metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
}, tag string, i int, self bool, approved []time.Time) error {
	csr := b.newCSR(fmt.Sprintf("%s-%d", tag, i), tag, i)
	csr.Annotations = map[string]string{"bench/index": strconv.Itoa(i)}
	csr, err := csrs.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	approve(csr)
	csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	approved[i] = time.Now() // each index is written by one worker, read after wg.Wait
	if self {
		csr.Status.Certificate = b.dummy
		if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	return nil
}

// waitQuiet waits up to limit for the machine to be under 15 % busy over one second (other
// work on the box skews every figure) and returns the last reading.
func waitQuiet(limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	for {
		busy0, total0 := cpuTotals()
		time.Sleep(time.Second)
		busy1, total1 := cpuTotals()
		share := 0.0
		if total1 > total0 {
			share = (busy1 - busy0) / (total1 - total0)
		}
		if share < 0.15 || time.Now().After(deadline) {
			if share >= 0.15 {
				fmt.Fprintf(os.Stderr, "machine still %.0f%% busy after %s; measuring anyway\n", 100*share, limit)
			}
			return share
		}
	}
}

// cpuTotals reads the busy and total jiffies of all cores from /proc/stat.
func cpuTotals() (busy, total float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cpuSeconds sums utime+stime of the processes (clock ticks of 1/100 s).
func cpuSeconds(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(fields[11], 64)
		st, _ := strconv.ParseFloat(fields[12], 64)
		total += (ut + st) / 100
	}
	return total
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func clusterTable(results []result, elapsed time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Same run, same etcd + kube-apiserver (%s), all processes on the same cores as the load generator (16 workers: create → approve; the ceiling also writes the certificate). "+
		"CSRs: kubernetes.io/kube-apiserver-client, P-256, client auth + digital signature; P-256 CA for both signers. "+
		"Throughput = signed / (first create → last certificate seen on the watch); latency = approval returned → certificate seen. "+
		"CPU = user+sys seconds of the signer process(es) over the scenario; RSS = VmHWM (Signet: server + watcher summed). "+
		"Ratio rows: throughput and latency as Signet / other (throughput > 1 and latency < 1 favour Signet). Whole run: %s.\n\n",
		kubeVersion, elapsed.Round(time.Second))
	sb.WriteString("| workload | signer | signed | total s | CSRs/s | approve→cert p50 ms | p90 ms | p99 ms | signer CPU s | signer peak RSS MiB |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	byLoad := map[string][]result{}
	var order []string
	for _, r := range results {
		if _, ok := byLoad[r.load.label]; !ok {
			order = append(order, r.load.label)
		}
		byLoad[r.load.label] = append(byLoad[r.load.label], r)
	}
	for _, load := range order {
		rs := byLoad[load]
		var signet *result
		for i := range rs {
			r := rs[i]
			if r.signer.kind == "signet" {
				signet = &rs[i]
			}
			cpu, rss := "–", "–"
			if r.signer.kind != "ceiling" {
				cpu, rss = fmt.Sprintf("%.2f", r.cpu), fmt.Sprintf("%.0f", r.rss)
			}
			signed := fmt.Sprintf("%d/%d", r.signed, r.load.n)
			if r.failed > 0 {
				signed += fmt.Sprintf(" (%d failed)", r.failed)
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %.1f | %s | %s | %s | %s | %s |\n", load, r.signer.label, signed,
				r.total.Seconds(), r.throughput(), ms(r.p50), ms(r.p90), ms(r.p99), cpu, rss)
		}
		if signet == nil {
			continue
		}
		for _, want := range []struct {
			kind string
			qps  int
			name string
		}{{"kcm", 1000, "KCM (QPS 1000)"}, {"kcm", 0, "KCM (default QPS)"}, {"ceiling", 0, "ceiling"}} {
			for _, r := range rs {
				if r.signer.kind != want.kind || r.signer.qps != want.qps {
					continue
				}
				cpu, rss := "–", "–"
				if r.signer.kind != "ceiling" && r.cpu > 0 && r.rss > 0 {
					cpu, rss = ratio(signet.cpu, r.cpu), ratio(signet.rss, r.rss)
				}
				fmt.Fprintf(&sb, "| %s | **Signet / %s** | | | **%s** | %s | %s | %s | %s | %s |\n", load, want.name,
					ratio(signet.throughput(), r.throughput()), ratio(signet.p50.Seconds(), r.p50.Seconds()),
					ratio(signet.p90.Seconds(), r.p90.Seconds()), ratio(signet.p99.Seconds(), r.p99.Seconds()), cpu, rss)
			}
		}
	}
	sb.WriteString("\nMachine busy (all cores, one-second sample) just before each scenario, after waiting up to 60 s for < 15 %:")
	for _, r := range results {
		fmt.Fprintf(&sb, " %s / %s %.0f %%;", r.load.label, r.signer.label, 100*r.busy)
	}
	sb.WriteString("\n")
	for _, r := range results {
		if r.negative > 0 {
			fmt.Fprintf(&sb, "\nNote: %s, %s: %d certificate(s) seen on the watch before the approval call returned (negative latency, kept in the quantiles; drawn at 0.1 ms in the plot).\n", r.load.label, r.signer.label, r.negative)
		}
	}
	return sb.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
