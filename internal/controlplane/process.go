package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it kills a process.
const stopGrace = 20 * time.Second

// Process is a child process started for a test or a demo (kube-controller-manager, a
// kubelet, a container runtime): its output goes to a log file, kept for reading after a
// failure, and to a tail for error messages. Its methods are safe for concurrent use.
type Process struct {
	name    string
	cmd     *exec.Cmd
	out     *tail
	logFile *os.File
	done    chan struct{}
	waitErr error // set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// StartProcess starts path with args as a process called name, its standard output and
// error appended to logPath. The process gets its own process group, so that Stop also
// ends what it started.
func StartProcess(name, path string, args []string, logPath string) (*Process, error) {
	if _, err := exec.LookPath(path); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	p := &Process{name: name, out: newTail(), logFile: logFile, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout = io.MultiWriter(logFile, p.out)
	p.cmd.Stderr = p.cmd.Stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name is the name the process was started as.
func (p *Process) Name() string { return p.name }

// LogPath is the file the process's output goes to.
func (p *Process) LogPath() string { return p.logFile.Name() }

// Running returns nil while the process runs, and once it has exited an error with its exit
// status and an excerpt of its output.
func (p *Process) Running() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v)%s", p.name, p.waitErr, p.out.explain(p.name))
	default:
		return nil
	}
}

// Explain returns an excerpt of the process's output for an error message (see tail.explain).
func (p *Process) Explain() string { return p.out.explain(p.name) }

// Stop sends SIGTERM to the process group, waits up to stopGrace, then kills it. It is
// idempotent. An exit caused by the signal is not an error.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		defer p.logFile.Close()
		select {
		case <-p.done:
			return // exited by itself; Running reports why
		default:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			p.stopErr = fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopGrace)
		}
	})
	return p.stopErr
}

// StartControllerManager starts kube-controller-manager of the cluster's version (built next
// to kube-apiserver, see AssetsDir) with only controllers (--controllers), as cluster-admin,
// without leader election or serving, its kubeconfig and log in dir. args are extra flags
// ("--name=value").
func (c *Cluster) StartControllerManager(dir string, controllers []string, args ...string) (*Process, error) {
	assets, err := AssetsDir(c.version)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(assets, "kube-controller-manager")
	if err := checkBinary(path, c.version); err != nil {
		return nil, fmt.Errorf("%w (hack/kube-bins.sh %s kube-controller-manager)", err, c.version)
	}
	if len(controllers) == 0 {
		return nil, errors.New("starting kube-controller-manager: no controllers")
	}
	kubeconfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	if err := c.WriteKubeconfig(nil, kubeconfig); err != nil {
		return nil, err
	}
	flags := []string{
		"--kubeconfig=" + kubeconfig, "--controllers=" + strings.Join(controllers, ","), "--leader-elect=false",
		"--use-service-account-credentials=false", "--secure-port=0",
	}
	return StartProcess("kube-controller-manager", path, append(flags, args...), filepath.Join(dir, "kube-controller-manager.log"))
}

// StartScheduler starts kube-scheduler of the cluster's version (built next to kube-apiserver,
// see AssetsDir) as cluster-admin, without leader election or serving, its kubeconfig and log
// in dir, so that pods of Deployments land on the cluster's real nodes as they would in a
// cluster. args are extra flags ("--name=value").
func (c *Cluster) StartScheduler(dir string, args ...string) (*Process, error) {
	assets, err := AssetsDir(c.version)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(assets, "kube-scheduler")
	if err := checkBinary(path, c.version); err != nil {
		return nil, fmt.Errorf("%w (hack/kube-bins.sh %s kube-scheduler)", err, c.version)
	}
	kubeconfig := filepath.Join(dir, "kube-scheduler.kubeconfig")
	if err := c.WriteKubeconfig(nil, kubeconfig); err != nil {
		return nil, err
	}
	flags := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}
	return StartProcess("kube-scheduler", path, append(flags, args...), filepath.Join(dir, "kube-scheduler.log"))
}
