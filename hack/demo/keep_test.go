package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"sigs.k8s.io/yaml"
)

// fakeKeptEnv makes the test binary, started by detach, behave as a kept copy: "ready" writes
// its pid file and readyLine and waits for SIGTERM; "fail" exits 3 before it is ready.
const fakeKeptEnv = "SIGNET_DEMO_FAKE_KEPT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeKeptEnv); mode != "" {
		os.Exit(fakeKept(mode))
	}
	os.Exit(m.Run())
}

func fakeKept(mode string) int {
	dir := os.Args[len(os.Args)-1] // detach appends --keep-dir DIR
	fmt.Println("fake kept copy starting")
	if mode == "fail" {
		fmt.Println("fake kept copy failing")
		return 3
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return 4
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() { <-term; stop() }()
	readyPipe()()
	<-ctx.Done()
	_ = os.Remove(filepath.Join(dir, pidFile))
	return 0
}

// TestDetachLeavesTheKeptCopyRunning: detach returns once the kept copy says ready, and the
// kept copy goes on running in its own session until it is sent SIGTERM.
func TestDetachLeavesTheKeptCopyRunning(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(fakeKeptEnv, "ready")
	if err := detach(context.Background(), []string{"--keep"}); err != nil {
		t.Fatalf("detach: %v", err)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "signet-demo-*"))
	if len(dirs) != 1 {
		t.Fatalf("want one demo folder in %s, got %v", tmp, dirs)
	}
	data, err := os.ReadFile(filepath.Join(dirs[0], pidFile))
	if err != nil {
		t.Fatalf("the kept copy wrote no pid file: %v", err)
	}
	pid, _ := strconv.Atoi(string(data))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the kept copy (pid %q) is not running after detach returned", data)
	}
	if sid := sessionID(t, pid); sid != pid {
		t.Errorf("the kept copy (pid %d) should lead a session of its own, not session %d", pid, sid)
	}
	// The stop script is what the user runs; it waits until the pid file is gone.
	k := keptDemo{dir: dirs[0]}
	stop := filepath.Join(dirs[0], stopScript)
	if err := os.WriteFile(stop, []byte(k.stopScript()), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(stop).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", stop, err, out)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], pidFile)); !os.IsNotExist(err) {
		t.Errorf("pid file still there after the stop script: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(dirs[0], demoLog))
	if !strings.Contains(string(log), "fake kept copy starting") {
		t.Errorf("demo.log lacks the kept copy's output:\n%s", log)
	}
}

// TestDetachReportsAFailedKeptCopy: a kept copy that exits before it is ready makes detach
// fail with its exit status and the log's path.
func TestDetachReportsAFailedKeptCopy(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv(fakeKeptEnv, "fail")
	done := make(chan error, 1)
	go func() { done <- detach(context.Background(), []string{"--keep"}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), demoLog) {
			t.Fatalf("detach = %v, want the kept copy's exit status 3 and its log", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("detach did not return after the kept copy exited")
	}
}

// TestStayUpWritesWhatTheGuideNames: every file the guide points at exists, env.sh names the
// admin kubeconfig, the second CSR is a valid request for the demo signer, and stayUp
// returns when ctx ends.
func TestStayUpWritesWhatTheGuideNames(t *testing.T) {
	dir := t.TempDir()
	k := keptDemo{dir: dir, state: filepath.Join(dir, "server"), bin: "/repo/bin", grpcAddr: "127.0.0.1:1",
		serverHTTP: "127.0.0.1:2", watcherMetrics: "127.0.0.1:3", apiserver: "https://127.0.0.1:4", csrName: "demo-payments-x"}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- stayUp(ctx, k, func() { close(ready) }, func(path string) error { return os.WriteFile(path, []byte("kubeconfig"), 0o600) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("stayUp returned before ready: %v", err)
	}
	for _, name := range []string{adminKubeconfig, envFile, stopScript, pidFile, anotherCSR} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	env, _ := os.ReadFile(filepath.Join(dir, envFile))
	if !strings.Contains(string(env), "export KUBECONFIG="+filepath.Join(dir, adminKubeconfig)) {
		t.Errorf("env.sh does not export the admin kubeconfig:\n%s", env)
	}
	if out, err := exec.Command("sh", "-n", filepath.Join(dir, envFile)).CombinedOutput(); err != nil {
		t.Errorf("env.sh is not valid sh: %v\n%s", err, out)
	}
	checkCSRManifest(t, filepath.Join(dir, anotherCSR))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stayUp: %v", err)
	}
}

// sessionID reads the session of pid from /proc/PID/stat (field 6, after the command's
// parenthesized name).
func sessionID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	sid, err := strconv.Atoi(fields[3]) // state, ppid, pgrp, session
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return sid
}

func checkCSRManifest(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var csr certificatesv1.CertificateSigningRequest
	if err := yaml.UnmarshalStrict(data, &csr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if csr.Name != anotherCSRName || csr.Spec.SignerName != signerName || csr.Kind != "CertificateSigningRequest" {
		t.Errorf("%s: name %q, signer %q, kind %q", path, csr.Name, csr.Spec.SignerName, csr.Kind)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		t.Fatalf("%s: spec.request holds no PEM", path)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.CheckSignature(); err != nil {
		t.Errorf("%s: the request's signature: %v", path, err)
	}
}
