package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/devpki"
)

// process is a child process whose output goes to a log file in the demo's folder.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func startProcess(ctx context.Context, dir, path string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, filepath.Base(path)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.exited) }()
	go func() {
		select {
		case <-ctx.Done():
			p.stop()
		case <-p.exited:
		}
	}()
	return p, nil
}

// startBinary starts one of Signet's binaries, which `make build` makes.
func startBinary(ctx context.Context, dir, path string, args ...string) (*process, error) {
	p, err := startProcess(ctx, dir, path, args...)
	if err != nil {
		return nil, fmt.Errorf("%w (run `make build` first)", err)
	}
	return p, nil
}

// stop sends SIGTERM and waits up to 10 s before killing.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail returns the last lines of the process's log.
func (p *process) logTail() string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// waitHealthy polls the server's gRPC health service over mTLS with the dev client
// certificate until it reports SERVING.
func waitHealthy(ctx context.Context, addr, state string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := checkHealth(ctx, addr, state)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("signet-server did not become healthy: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func checkHealth(ctx context.Context, addr, state string) error {
	tlsConfig, err := devpki.ClientTLSConfig(state)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health status %s", resp.GetStatus())
	}
	return nil
}
