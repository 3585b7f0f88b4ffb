package main

// The anchor of -ledger-scale: the ledger of the previous release (a git tag, v0.1.0), which
// kept the tree and the record offsets in memory and read the whole history at Open. The
// bench checks the tag out in a temporary git worktree, writes anchorSource into it as
// hack/ledgeranchor/main.go (never committed), builds it against the tag's own server/ledger
// and runs it on a ledger directory of its own, grown by that code to the same sizes: the
// old single-segment format is what the tag reads, and its Open's cost is what the issue is
// about. Its records are the same pool's, made as recordGen makes them.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// anchorBuild is the anchor's binary and the worktree it was built in.
type anchorBuild struct {
	tag, repo, tmp, bin string
}

// buildAnchor checks out tag in a worktree in a temporary directory and builds the anchor
// there. It fails, saying why, when git, the repository or the tag is missing.
func buildAnchor(ctx context.Context, tag, work string) (*anchorBuild, error) {
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return nil, fmt.Errorf("ledger scale: the anchor is built from the git tag %s, and git found no repository here (%w): run the bench from the repository", tag, err)
	}
	a := &anchorBuild{tag: tag, repo: strings.TrimSpace(string(top))}
	if out, err := a.git(ctx, "rev-parse", "--verify", "--quiet", tag+"^{commit}"); err != nil {
		return nil, fmt.Errorf("ledger scale: the anchor's tag %s is not in %s (%w: %s): fetch it (git fetch --tags) or name another with -ledger-anchor", tag, a.repo, err, out)
	}
	if a.tmp, err = os.MkdirTemp("", "signet-ledgerscale-anchor-"); err != nil {
		return nil, fmt.Errorf("ledger scale: building the anchor: %w", err)
	}
	wt := filepath.Join(a.tmp, "src")
	if out, err := a.git(ctx, "worktree", "add", "--detach", wt, tag); err != nil {
		os.RemoveAll(a.tmp)
		return nil, fmt.Errorf("ledger scale: checking out %s in a worktree: %w\n%s", tag, err, out)
	}
	main := filepath.Join(wt, "hack", "ledgeranchor", "main.go")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		a.cleanup()
		return nil, fmt.Errorf("ledger scale: writing the anchor: %w", err)
	}
	if err := os.WriteFile(main, []byte(anchorSource), 0o644); err != nil {
		a.cleanup()
		return nil, fmt.Errorf("ledger scale: writing the anchor: %w", err)
	}
	a.bin = filepath.Join(a.tmp, "ledger-anchor")
	build := exec.CommandContext(ctx, "go", "build", "-o", a.bin, "./hack/ledgeranchor")
	build.Dir = wt
	if out, err := build.CombinedOutput(); err != nil {
		a.cleanup()
		return nil, fmt.Errorf("ledger scale: building the anchor against %s's ledger: %w\n%s", tag, err, out)
	}
	fmt.Fprintf(os.Stderr, "ledger scale: anchor built from %s\n", tag)
	return a, nil
}

func (a *anchorBuild) git(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "git", append([]string{"-C", a.repo}, args...)...).CombinedOutput()
}

// measured names the code the run measures: the repository's HEAD, and whether the ledger's
// packages hold uncommitted changes.
func (a *anchorBuild) measured(ctx context.Context) string {
	head, err := a.git(ctx, "rev-parse", "--short", "HEAD")
	if err != nil {
		return "an unknown commit"
	}
	text := "commit " + strings.TrimSpace(string(head))
	if out, err := a.git(ctx, "status", "--porcelain", "--", "server/ledger", "ledgerproof"); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		text += " with uncommitted changes in server/ledger or ledgerproof"
	}
	return text
}

// cleanup removes the worktree and the binary.
func (a *anchorBuild) cleanup() {
	if _, err := a.git(context.Background(), "worktree", "remove", "--force", filepath.Join(a.tmp, "src")); err != nil {
		fmt.Fprintf(os.Stderr, "ledger scale: removing the anchor's worktree: %v\n", err)
	}
	os.RemoveAll(a.tmp)
	_, _ = a.git(context.Background(), "worktree", "prune")
}

// grow has the anchor grow its ledger in dir to n records.
func (a *anchorBuild) grow(ctx context.Context, dir, pool string, n int) (growResult, error) {
	var res growResult
	p, err := startProc(ctx, a.tag+"'s ledger", a.bin, "-dir", dir, "-pool", pool, "-grow", strconv.Itoa(n))
	if err != nil {
		return res, err
	}
	if err := p.read(&res); err != nil {
		return res, err
	}
	return res, p.close()
}

// serve starts the anchor on its ledger in dir, timing its Open, for append measurements.
func (a *anchorBuild) serve(ctx context.Context, dir, pool string) (*ledgerProc, openResult, error) {
	var res openResult
	p, err := startProc(ctx, a.tag+"'s ledger", a.bin, "-dir", dir, "-pool", pool)
	if err != nil {
		return nil, res, err
	}
	if err := p.read(&res); err != nil {
		return nil, res, err
	}
	return p, res, nil
}

// anchorSource is the anchor's program, built against the tag's server/ledger (whose API it
// uses: Open, Options{Clock, Replay}, Append, Last, Stats, Close). -grow N grows the ledger
// to N records and reports a growResult; without it, it opens the ledger and speaks the
// child's protocol (ledgerscale_child.go). Its generator must make recordGen's records.
const anchorSource = `// Command ledgeranchor is hack/bench -ledger-scale's anchor, written into a worktree of an
// older release by the bench and built against that release's ledger. Never committed.
package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/server/ledger"
)

type pool struct {
	Clock   time.Time
	Rotated []ledger.Record
	Issued  []ledger.Record
}

func main() {
	dir := flag.String("dir", "", "the ledger directory")
	poolPath := flag.String("pool", "", "the generator's records (pool.json)")
	grow := flag.Int("grow", -1, "grow the ledger to this many records")
	flag.Parse()
	b, err := os.ReadFile(*poolPath)
	check(err)
	var p pool
	check(json.Unmarshal(b, &p))
	if *grow >= 0 {
		check(growTo(*dir, &p, *grow))
		return
	}
	check(serve(*dir, &p))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger anchor:", err)
		os.Exit(1)
	}
}

type gen struct {
	p   *pool
	rng *rand.ChaCha8
	i   int
}

func newGen(p *pool) *gen {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &gen{p: p, rng: rand.NewChaCha8(seed), i: int(seed[0])}
}

// next: as hack/bench's recordGen.next.
func (g *gen) next() ledger.Record {
	r := g.p.Issued[g.i%len(g.p.Issued)]
	g.i++
	var b [64]byte
	_, _ = g.rng.Read(b[:])
	b[0] = b[0]&0x7f | 0x10
	u := b[16:32]
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	r.Serial = hex.EncodeToString(b[:16])
	r.ObjectUID = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	r.RequestHash = hex.EncodeToString(b[32:])
	r.IdempotencyKey = r.ObjectUID + "/" + r.RequestHash
	return r
}

// loop: as hack/bench's appendLoop.
func loop(p *pool, callers int, more func() bool, app func(ledger.Record) error) (int64, error) {
	var (
		n      atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			g := newGen(p)
			for !failed.Load() && more() {
				if err := app(g.next()); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), first
}

func growTo(dir string, p *pool, n int) error {
	t0 := time.Now()
	l, err := ledger.Open(dir, ledger.Options{Clock: testclock.NewFakePassiveClock(p.Clock)})
	if err != nil {
		return err
	}
	openNs := time.Since(t0)
	ctx := context.Background()
	app := func(r ledger.Record) error { _, err := l.Append(ctx, r); return err }
	if seq, _ := l.Last(); seq == 0 && n > 0 {
		for _, r := range p.Rotated {
			if err := app(r); err != nil {
				l.Close()
				return err
			}
		}
	}
	seq, _ := l.Last()
	var left atomic.Int64
	left.Store(int64(n) - int64(seq))
	var peak atomic.Int64
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(quit)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			peak.Store(max(peak.Load(), mem()["rssKiB"]))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	t1 := time.Now()
	_, err = loop(p, 1024, func() bool { return left.Add(-1) >= 0 }, app)
	ns := time.Since(t1)
	close(done)
	<-quit
	st := l.Stats()
	last, _ := l.Last()
	t2 := time.Now()
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"records": st.Records, "seq": last, "openNs": openNs, "ns": ns,
		"closeNs": time.Since(t2), "batches": st.Batches, "peakRSSKiB": peak.Load()})
}

func serve(dir string, p *pool) (err error) {
	replayed := 0
	t0 := time.Now()
	l, err := ledger.Open(dir, ledger.Options{Clock: testclock.NewFakePassiveClock(p.Clock), Replay: func(ledger.Record) error { replayed++; return nil }})
	openNs := time.Since(t0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := l.Close(); err == nil {
			err = cerr
		}
	}()
	m := mem()
	seq, _ := l.Last()
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(map[string]any{"openNs": openNs, "seq": seq, "readAtOpen": seq, "replayed": replayed, "mem": m, "memAfter": m}); err != nil {
		return err
	}
	ctx := context.Background()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "append" {
			return fmt.Errorf("command %q: want \"append CALLERS DURATION\"", sc.Text())
		}
		callers, err := strconv.Atoi(f[1])
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(f[2])
		if err != nil {
			return err
		}
		st0, cpu0 := l.Stats(), cpu()
		t0 := time.Now()
		deadline := t0.Add(d)
		n, err := loop(p, callers, func() bool { return time.Now().Before(deadline) }, func(r ledger.Record) error { _, err := l.Append(ctx, r); return err })
		ns := time.Since(t0)
		if err != nil {
			return err
		}
		if err := enc.Encode(map[string]any{"records": n, "ns": ns, "cpuNs": cpu() - cpu0, "batches": l.Stats().Batches - st0.Batches, "drainNs": 0}); err != nil {
			return err
		}
	}
	return sc.Err()
}

// mem is VmRSS, RssAnon, RssFile and VmHWM in KiB, under hack/bench's procStatus names.
func mem() map[string]int64 {
	out := map[string]int64{}
	names := map[string]string{"VmRSS": "rssKiB", "RssAnon": "anonKiB", "RssFile": "fileKiB", "VmHWM": "hwmKiB"}
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if name, ok := names[k]; ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				out[name], _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return out
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
`
