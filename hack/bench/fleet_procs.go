package main

// The processes of -fleet: signet-server processes (the real binary, each on its own gRPC and
// HTTP port), PostgreSQL (internal/pgtest), their CPU time from /proc, and the CPU affinity
// that models separate hosts on this machine.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/signerclient"
)

// fleetServer is one signet-server process.
type fleetServer struct {
	name     string
	config   string
	grpcAddr string
	httpAddr string
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{}
	started  time.Time // exec
	ready    time.Time // first /readyz 200
	client   *signerclient.Client
}

// startFleetServer execs bin with config on free ports, its log in logDir, restricted to the
// CPUs in cpus (taskset, inherited by every thread; empty: no restriction), and waits until
// /readyz answers 200 (within limit). It then dials it with the dev PKI's client certificate.
func startFleetServer(ctx context.Context, bin, name, config, pkiDir, logDir, cpus string, limit time.Duration) (*fleetServer, error) {
	addrs, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s := &fleetServer{name: name, config: config, grpcAddr: addrs[0], httpAddr: addrs[1],
		logPath: filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())), exited: make(chan struct{})}
	args := []string{filepath.Join(bin, "signet-server"), "--config", config, "--listen", s.grpcAddr, "--http-listen", s.httpAddr, "--log-format", "json"}
	if cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx, limit); err != nil {
		s.kill()
		return nil, err
	}
	s.client, err = signerclient.New(signerclient.Config{
		Address: s.grpcAddr, ServerName: "localhost", RPCTimeout: time.Minute,
		CAFile:   filepath.Join(pkiDir, devpki.TLSCACert),
		CertFile: filepath.Join(pkiDir, devpki.ClientCert), KeyFile: filepath.Join(pkiDir, devpki.ClientKey),
	})
	if err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz every 5 ms until it answers 200, and sets ready.
func (s *fleetServer) waitReady(ctx context.Context, limit time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited before it was ready: %s", s.name, logTail(s.logPath))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := client.Get("http://" + s.httpAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.ready = time.Now()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %s", s.name, limit, logTail(s.logPath))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pid is the signet-server's process id (taskset execs it in place).
func (s *fleetServer) pid() int { return s.cmd.Process.Pid }

// stop ends the server with SIGTERM (it releases the integrator lease) and waits.
func (s *fleetServer) stop() error {
	if s.client != nil {
		_ = s.client.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		s.kill()
		return fmt.Errorf("%s did not stop within 30 s of SIGTERM", s.name)
	}
}

// kill ends the server with SIGKILL (a crash) and waits.
func (s *fleetServer) kill() {
	if s.client != nil {
		_ = s.client.Close()
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// logTail is the end of a log file, for an error.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// procTicks is utime+stime of pid in clock ticks (1/100 s), plus cutime+cstime with
// children: what its exited and reaped children used.
func procTicks(pid int, children bool) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 15 {
		return 0
	}
	var t int64
	n := 2
	if children {
		n = 4
	}
	for _, f := range fields[11 : 11+n] {
		v, _ := strconv.ParseInt(f, 10, 64)
		t += v
	}
	return t
}

// childrenOf returns the pids whose parent is ppid.
func childrenOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
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
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// postgresCPU is the CPU time of PostgreSQL so far: the postmaster's, its reaped backends'
// and its live backends'.
func postgresCPU(postmaster int) time.Duration {
	t := procTicks(postmaster, true)
	for _, c := range childrenOf(postmaster) {
		t += procTicks(c, false)
	}
	return time.Duration(t) * 10 * time.Millisecond
}

// serversCPU is the CPU time of the server processes so far.
func serversCPU(servers []*fleetServer) time.Duration {
	var t int64
	for _, s := range servers {
		t += procTicks(s.pid(), false)
	}
	return time.Duration(t) * 10 * time.Millisecond
}

// setAffinity restricts every thread of pid (and so every thread or child it makes later) to
// the CPUs in cpus (nil: every CPU of the machine).
func setAffinity(pid int, cpus []int) error {
	var set unix.CPUSet
	if len(cpus) == 0 {
		for c := range numCPU() {
			set.Set(c)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("setting the CPU affinity of %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("setting the CPU affinity of %d: %w", tid, err)
		}
	}
	return nil
}

// setTreeAffinity is setAffinity for pid and its children (PostgreSQL's postmaster and its
// backends: processes of one thread each).
func setTreeAffinity(pid int, cpus []int) error {
	for _, p := range append([]int{pid}, childrenOf(pid)...) {
		if err := setAffinity(p, cpus); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// numCPU is the number of CPUs of the machine (not the affinity of this process).
func numCPU() int {
	raw, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 1
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(raw)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if found {
			b, _ = strconv.Atoi(hi)
		}
		n += b - a + 1
	}
	return max(n, 1)
}
