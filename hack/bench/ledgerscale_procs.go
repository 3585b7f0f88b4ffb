package main

// The parent's side of -ledger-scale's processes: the children that open the ledger
// (ledgerscale_child.go) and the anchor (ledgerscale_anchor.go), which speak the same
// protocol, and the measurements of one size with them.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// ledgerProc is a running child or anchor process.
type ledgerProc struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startProc starts bin with args; its stderr goes to ours.
func startProc(ctx context.Context, name, bin string, args ...string) (*ledgerProc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &ledgerProc{name: name, cmd: cmd, in: in, out: sc}, nil
}

// read decodes the process's next line into v.
func (p *ledgerProc) read(v any) error {
	if !p.out.Scan() {
		err := p.out.Err()
		if err == nil {
			err = errors.New("its output ended")
		}
		_ = p.in.Close()
		return fmt.Errorf("%s: no answer: %w (exit: %v)", p.name, err, p.cmd.Wait())
	}
	if err := json.Unmarshal(p.out.Bytes(), v); err != nil {
		return fmt.Errorf("%s: reading its answer %q: %w", p.name, p.out.Bytes(), err)
	}
	return nil
}

// appendFor has the process append from callers goroutines for d.
func (p *ledgerProc) appendFor(callers int, d time.Duration) (appendResult, error) {
	var res appendResult
	if _, err := fmt.Fprintf(p.in, "append %d %s\n", callers, d); err != nil {
		return res, fmt.Errorf("%s: %w", p.name, err)
	}
	return res, p.read(&res)
}

// close ends the process's input, on which it closes its ledger and exits, and waits for it.
func (p *ledgerProc) close() error {
	if p == nil {
		return nil
	}
	_ = p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// openChild starts a child on the ledger in dir (beside the pool) and reads what its Open took; with stay it returns
// the running child for append measurements, otherwise it lets it exit.
func (s *scaleState) openChild(ctx context.Context, dir, what string, stay bool) (openResult, *ledgerProc, error) {
	var res openResult
	bin, err := os.Executable()
	if err != nil {
		return res, nil, fmt.Errorf("ledger scale: finding the bench's binary to run its child: %w", err)
	}
	p, err := startProc(ctx, "the ledger's child", bin, "-ledger-open", dir)
	if err != nil {
		return res, nil, err
	}
	if err := p.read(&res); err != nil {
		return res, nil, err
	}
	fmt.Fprintf(os.Stderr, "ledger scale: %s start at seq %d: Open %s, read %d, RSS %.1f MiB; find p50 %s p99 %s; proof p50 %s p99 %s\n",
		what, res.Seq, time.Duration(res.OpenNs).Round(10*time.Microsecond), res.ReadAtOpen, float64(res.Mem.RSS)/1024,
		fmtNs(pct(res.FindNs, 0.5)), fmtNs(pct(res.FindNs, 0.99)), fmtNs(pct(res.ProveNs, 0.5)), fmtNs(pct(res.ProveNs, 0.99)))
	if stay {
		return res, p, nil
	}
	return res, nil, p.close()
}

// opens measures the ledger at its size: a start with its files out of the page cache, then
// o.rounds warm starts, each in a fresh child; then it starts one more child for the appends,
// and the anchor on its ledger (timing its Open), and measures appends in both, in
// interleaved rounds. The appends grow the ledgers (the next size's growth counts them in),
// except at size 0, where they go to empty ledgers of their own, so that the next size is
// the generator's records.
func (s *scaleState) opens(ctx context.Context, step *ledgerStep) (err error) {
	if err := dropCache(s.dir()); err != nil {
		return err
	}
	if step.cold, _, err = s.openChild(ctx, s.dir(), "cold", false); err != nil {
		return err
	}
	for i := range s.o.rounds {
		res, _, err := s.openChild(ctx, s.dir(), fmt.Sprintf("warm %d", i+1), false)
		if err != nil {
			return err
		}
		step.warm = append(step.warm, res)
	}
	dir, anchorDir := s.dir(), s.anchorDir()
	if step.size == 0 {
		dir, anchorDir = filepath.Join(s.work, "ledger-empty"), filepath.Join(s.work, "anchor-ledger-empty")
		defer os.RemoveAll(dir)
		defer os.RemoveAll(anchorDir)
	}
	_, serving, err := s.openChild(ctx, dir, "appending", true)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := serving.close(); err == nil {
			err = cerr
		}
	}()
	anchor, res, err := s.anchor.serve(ctx, anchorDir, filepath.Join(s.work, poolFile))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := anchor.close(); err == nil {
			err = cerr
		}
	}()
	step.anchorOpen = res
	fmt.Fprintf(os.Stderr, "ledger scale: %s start at seq %d: Open %s, RSS %.1f MiB\n", s.o.anchorTag, res.Seq,
		time.Duration(res.OpenNs).Round(time.Millisecond), float64(res.Mem.RSS)/1024)

	type target struct {
		p       *ledgerProc
		callers int
		into    *[]appendResult
	}
	step.appends = make([][]appendResult, len(s.o.appendCalls))
	step.anchorAppends = make([][]appendResult, len(s.o.appendCalls))
	var targets []target
	for i, c := range s.o.appendCalls {
		targets = append(targets, target{serving, c, &step.appends[i]}, target{anchor, c, &step.anchorAppends[i]})
	}
	for round := range s.o.rounds {
		for _, k := range roundOrder(len(targets), round) {
			t := targets[k]
			r, err := t.p.appendFor(t.callers, s.o.appendTime)
			if err != nil {
				return err
			}
			*t.into = append(*t.into, r)
			fmt.Fprintf(os.Stderr, "ledger scale: round %d, %s, %d callers: %.0f records/s, %.1f per fsync, %.0f µs CPU per record, index caught up %s later\n",
				round+1, t.p.name, t.callers, r.rate(), r.perBatch(), r.cpuPerRecord(), time.Duration(r.DrainNs).Round(time.Millisecond))
		}
	}
	return nil
}

// dropCache asks the kernel to drop the cached pages of every file under dir
// (posix_fadvise DONTNEED), so that the next start reads them from the disk, as after a
// reboot. The files are all synced (the ledger fsyncs what it writes), so no page stays dirty.
func dropCache(dir string) error {
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		return fmt.Errorf("ledger scale: dropping the ledger's pages from the page cache: %w", err)
	}
	return nil
}

// rate is the records appended per second.
func (r appendResult) rate() float64 { return float64(r.Records) / time.Duration(r.Ns).Seconds() }

// perBatch is the records per fsynced write.
func (r appendResult) perBatch() float64 { return float64(r.Records) / float64(max(r.Batches, 1)) }

// cpuPerRecord is the process's CPU time per record appended, in µs.
func (r appendResult) cpuPerRecord() float64 {
	return float64(r.CPUNs) / 1000 / float64(max(r.Records, 1))
}

// pct is the q-quantile of durations in ns (0 for none).
func pct(ns []int64, q float64) time.Duration {
	if len(ns) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(ns))
	for i, n := range ns {
		ds[i] = time.Duration(n)
	}
	slices.Sort(ds)
	return quantile(ds, q)
}

// fmtNs formats a lookup's duration in ms, "–" for none.
func fmtNs(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}
