package main

// One -cluster scenario: a signer (or none, for the ceiling) under one workload, observed on a
// watch, with the signer processes' CPU and memory.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// objectKind is what a workload submits and observes: CertificateSigningRequests or
// PodCertificateRequests.
type objectKind interface {
	// warmUp submits one object and waits until the signer has answered it.
	warmUp(ctx context.Context, tag string) error
	// list returns the resource version to watch the run's objects from.
	list(ctx context.Context, tag string) (string, error)
	// watch watches the run's objects from resourceVersion rv.
	watch(ctx context.Context, tag, rv string) (watch.Interface, error)
	// outcome reads an event's object: its index in the run, its resource version, and
	// whether it is answered (issued, or refused).
	outcome(obj runtime.Object) (index int, rv string, issued, refused bool)
	// submit creates object i of the run and records when its latency starts (approval for a
	// CSR, creation for a PodCertificateRequest); with self (the ceiling) it also writes the
	// answer itself.
	submit(ctx context.Context, tag string, i int, self bool, start []time.Time) error
	// deleteAll removes the run's objects.
	deleteAll(tag string)
}

func (b *clusterBench) scenario(ctx context.Context, kcmPath string, s signerKind, l workload) (result, error) {
	tag := fmt.Sprintf("%s%d-%s-%d", s.kind, s.qps, strings.ReplaceAll(strings.ReplaceAll(l.label, " ", ""), "/", ""), time.Now().UnixNano()%1e6)
	tag = strings.ToLower(strings.ReplaceAll(tag, ".", ""))
	res := result{signer: s, load: l}
	var objects objectKind = csrObjects{b}
	if l.pcr {
		objects = pcrObjects{b}
		if s.kind == "ceiling" {
			if err := b.makePCRAnswers(l.n); err != nil { // not timed
				return res, err
			}
		}
	}
	var proc *signerProc
	if s.kind != "ceiling" {
		var err error
		if proc, err = b.startSigner(ctx, kcmPath, s, tag); err != nil {
			return res, err
		}
		defer proc.stop()
		if err := objects.warmUp(ctx, tag); err != nil {
			return res, err
		}
	}
	defer objects.deleteAll(tag)
	// Wait for quiet after the signer's start-up and warm-up, right before the timed run.
	res.busy = waitQuiet(60 * time.Second)
	// Scraped outside the CPU-timed window, so that the scrapes' own CPU is not counted.
	requests0, err := scrapeAPIRequests(ctx, b.kube)
	if err != nil {
		return res, err
	}
	var sums0 sums
	if proc != nil && len(proc.metrics) > 0 {
		var err error
		if sums0, err = scrapeSums(ctx, proc.metrics); err != nil {
			return res, err
		}
	}
	var cpu0 []float64
	if proc != nil {
		cpu0 = cpuEach(proc.pids)
	}
	plane0 := cpuSeconds(b.planePIDs)

	// The watch starts before anything is created.
	rv0, err := objects.list(ctx, tag)
	if err != nil {
		return res, err
	}
	n := l.n
	observed := make([]time.Time, n)
	started := make([]time.Time, n)
	var mu sync.Mutex
	seen, failed := 0, 0
	done := make(chan struct{})
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	watchErr := make(chan error, 1)
	go func() {
		rv := rv0
		for wctx.Err() == nil {
			w, err := objects.watch(wctx, tag, rv)
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
				i, objRV, issued, refused := objects.outcome(ev.Object)
				if objRV != "" {
					rv = objRV
				}
				if ev.Type == watch.Bookmark || i < 0 || i >= n {
					continue
				}
				now := time.Now()
				mu.Lock()
				if observed[i].IsZero() && (issued || refused) {
					observed[i] = now
					if issued {
						seen++
					} else {
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
				if err := objects.submit(ctx, tag, i, s.kind == "ceiling", started); err != nil {
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
	res.planeCPU = cpuSeconds(b.planePIDs) - plane0
	if proc != nil {
		for i, c := range cpuEach(proc.pids) {
			res.cpuEach = append(res.cpuEach, c-cpu0[i])
		}
		if sums0 != nil {
			sums1, err := scrapeSums(ctx, proc.metrics)
			if err != nil {
				return res, err
			}
			res.breakdown = breakdownOf(sums0, sums1)
		}
		for _, pid := range proc.pids {
			hwm, _, err := procMemory(pid)
			if err == nil {
				res.rss += hwm
			}
			res.rssEach = append(res.rssEach, hwm)
		}
	}
	requests1, err := scrapeAPIRequests(ctx, b.kube)
	if err != nil {
		return res, err
	}
	res.requests = requests1.since(requests0)
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
		lat := observed[i].Sub(started[i])
		if started[i].IsZero() {
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

// childPIDs returns the PIDs of this process's children whose command name is one of names:
// the control plane's kube-apiserver and etcd, started by internal/controlplane.
func childPIDs(names ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || !slices.Contains(names, s[open+1:end]) {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuSeconds sums utime+stime of the processes (clock ticks of 1/100 s).
func cpuSeconds(pids []int) float64 { return sum(cpuEach(pids)) }

func sum(xs []float64) float64 {
	total := 0.0
	for _, x := range xs {
		total += x
	}
	return total
}

// cpu is the CPU seconds of all the signer processes of r.
func (r result) cpu() float64 { return sum(r.cpuEach) }

// cpuPerObject is cpu per signed object, 0 if nothing was signed.
func (r result) cpuPerObject() float64 {
	if r.signed == 0 {
		return 0
	}
	return r.cpu() / float64(r.signed)
}

// watcherCPUPerObject is Signet's watcher's CPU seconds per signed object, if r is a Signet
// run (server and watcher measured) that signed something.
func (r result) watcherCPUPerObject() (float64, bool) {
	if r.signer.kind != "signet" || len(r.cpuEach) != 2 || r.signed == 0 {
		return 0, false
	}
	return r.cpuEach[1] / float64(r.signed), true
}

// cpuEach reads utime+stime of each process, in seconds (0 for one that cannot be read).
func cpuEach(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, pid := range pids {
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
		out[i] = (ut + st) / 100
	}
	return out
}
