// Package pgtest starts a real PostgreSQL server for a test: the distribution's own binaries
// (Debian's postgresql package, which make test-deps installs), in a data directory of the
// test's, listening on a free loopback port, with password authentication. A test that needs
// it and cannot start it fails; it never skips.
//
// PostgreSQL refuses to run as root. Run as root (as CI is), the server and initdb run as the
// package's postgres user, and the data directory is given to it.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// User and Password are the superuser initdb makes; the password is also in PasswordFile.
const (
	User     = "signet"
	Password = "pgtest-password"
)

// Server is one PostgreSQL server, stopped when the test ends.
type Server struct {
	// Dir holds the data directory (data/), the socket directory (run/), the log (log) and
	// PasswordFile.
	Dir string
	// Port is the loopback TCP port it listens on.
	Port int
	// PasswordFile holds Password, as a server's configuration reads it.
	PasswordFile string

	bin  string
	cred *syscall.Credential
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start initializes a data directory and starts the server; it fails t if it cannot.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		t.Fatalf("pgtest: %v (make test-deps installs PostgreSQL)", err)
	}
	dir := t.TempDir()
	s := &Server{Dir: dir, bin: bin, PasswordFile: filepath.Join(dir, "password")}
	if err := s.init(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: stopping the server: %v", err)
		}
	})
	return s
}

// binDir returns the directory of the newest installed PostgreSQL's server binaries.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server in /usr/lib/postgresql/*/bin")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// init runs initdb, as the postgres user when run as root.
func (s *Server) init() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, PostgreSQL needs its postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The test's temporary directories are root's: let the postgres user reach its own.
		for d := s.Dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
					return err
				}
			}
			if d == os.TempDir() {
				break
			}
		}
	}
	if err := os.WriteFile(s.PasswordFile, []byte(Password+"\n"), 0o600); err != nil {
		return err
	}
	for _, d := range []string{"data", "run"} {
		if err := os.Mkdir(filepath.Join(s.Dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := s.chown(s.Dir, s.PasswordFile, filepath.Join(s.Dir, "data"), filepath.Join(s.Dir, "run")); err != nil {
		return err
	}
	out, err := s.command("initdb", "-D", filepath.Join(s.Dir, "data"), "-U", User, "--pwfile", s.PasswordFile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) chown(paths ...string) error {
	if s.cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return cmd
}

// Start starts the server (again, after Stop or Kill) on its port (a free one the first
// time) and waits until it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("the server is running")
	}
	if s.Port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.Port = port
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := s.command("postgres", "-D", filepath.Join(s.Dir, "data"), "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+filepath.Join(s.Dir, "run"),
		"-c", "max_connections=200", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start: %s", s.logTail())
		default:
		}
		if s.ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 30 s: %s", s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether the server accepts connections (pg_isready: a server still starting
// or recovering answers, but refuses sessions).
func (s *Server) ready() bool {
	cmd := exec.Command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-t", "2")
	return cmd.Run() == nil
}

// Stop shuts the server down cleanly (SIGINT: PostgreSQL's fast shutdown) and waits.
func (s *Server) Stop() error { return s.signal(syscall.SIGINT) }

// Kill kills the server (SIGKILL of the postmaster and of every backend): a crash. Start
// recovers it from its write-ahead log. Each backend is its own process group (PostgreSQL's
// children call setsid), so it is killed by its pid, and Kill returns once all are gone: a
// backend that outlived its postmaster would still answer its client.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	target := s.cmd.Process.Pid
	var children []int
	if sig == syscall.SIGKILL {
		children = childrenOf(target)
		target = -target
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	for _, c := range children {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", c)); err != nil {
				break
			}
		}
	}
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("postgres did not stop within 60 s: %s", s.logTail())
	}
	s.cmd = nil
	if sig == syscall.SIGKILL {
		// The postmaster's shared memory and lock file stay behind a SIGKILL; postgres
		// removes a stale lock file itself when no process holds it.
		_ = os.Remove(filepath.Join(s.Dir, "run", fmt.Sprintf(".s.PGSQL.%d.lock", s.Port)))
	}
	return nil
}

// DSN is the connection string of database db (postgres exists from the start) for User,
// without the password (the caller gives it from PasswordFile).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.Port, db)
}

// CreateDatabase creates database name with psql.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", User,
		"-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", `CREATE DATABASE "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("creating database %s: %w\n%s", name, err, out)
	}
	return nil
}

// logTail is the end of the server's log, for an error.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// childrenOf lists the pids whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
