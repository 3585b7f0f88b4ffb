package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
)

// --keep leaves the demo running: the command the user started (the foreground copy) starts
// the demo again as a background process in a session of its own (the kept copy, given
// --keep-dir), shows its output as it comes and returns once the kept copy says everything
// is up, or fails with it. The kept copy runs the demo, prints how to reach each piece, and
// then waits for SIGTERM to stop the watcher, the server and the control plane; the folder
// stays.

// readyFD is the kept copy's file descriptor 3: the write end of a pipe on which it writes
// readyLine once everything is up. It closes when the kept copy exits, so the foreground copy
// learns of a failure too.
const (
	readyFD   = 3
	readyLine = "ready"
)

// Files the kept copy writes in its folder, besides the logs and the server's state.
const (
	demoLog         = "demo.log"         // the kept copy's output
	pidFile         = "demo.pid"         // its pid; removed when it has stopped everything
	envFile         = "env.sh"           // KUBECONFIG, PATH and signetctl's connection flags
	stopScript      = "stop"             // stops the kept copy and waits for it
	adminKubeconfig = "admin.kubeconfig" // cluster-admin (system:masters)
	anotherCSR      = "another-csr.yaml" // a second CSR to create and approve by hand
	anotherCSRName  = "demo-another"
)

// detach starts the kept copy with args (this command's own, plus --keep-dir) in a new
// folder, copies its output to stdout until it reports ready, and returns nil then, leaving
// it running. If the kept copy exits first the error says so; if ctx ends first (Ctrl-C) the
// kept copy is stopped (SIGTERM) and waited for.
func detach(ctx context.Context, args []string) error {
	dir, err := os.MkdirTemp("", "signet-demo-")
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, demoLog)
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, append(args, "--keep-dir", dir)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{w} // fd 3 = readyFD
	// A session of its own: no controlling terminal, so neither Ctrl-C here nor closing the
	// terminal reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("starting the demo in the background: %w", err)
	}
	fmt.Printf("==> running the demo in the background (pid %d, KEEP=1); its output, also in %s:\n\n", cmd.Process.Pid, logPath)

	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- strings.TrimSpace(line) == readyLine
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	out, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	follow := func() { _, _ = io.Copy(os.Stdout, out) }
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			follow()
		case ok := <-ready:
			if ok {
				follow()
				return nil
			}
			ready = nil // it is exiting: wait for its status below
		case err := <-exited:
			follow()
			if err == nil {
				err = errors.New("exited before it was ready")
			}
			return fmt.Errorf("the background demo: %w (its output: %s)", err, logPath)
		case <-ctx.Done():
			fmt.Println("\n==> interrupted: stopping the background demo")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			err := <-exited
			follow()
			return fmt.Errorf("interrupted (background demo: %v); state in %s", err, dir)
		}
	}
}

// keptDemo is what the kept copy tells the user about the running demo.
type keptDemo struct {
	dir, state, bin string // absolute paths: the demo folder, the server's state, the binaries
	grpcAddr        string // signet-server's gRPC address
	serverHTTP      string // signet-server's /metrics, /livez, /readyz
	watcherMetrics  string // signet-watcher's /metrics
	apiserver       string // the kube-apiserver's URL
	csrName         string // the CSR the demo signed
	keySummary      string
}

// stayUp is the end of the kept copy's run: it writes the admin kubeconfig, env.sh, the stop
// script, a second CSR and its pid file into the folder, prints how to reach every piece,
// calls ready (which tells the foreground copy) and blocks until ctx ends (SIGTERM). The
// caller's deferred stops then run as in a plain demo; the folder stays.
func stayUp(ctx context.Context, k keptDemo, ready func(), writeAdminKubeconfig func(path string) error) error {
	kubeconfig := filepath.Join(k.dir, adminKubeconfig)
	if err := writeAdminKubeconfig(kubeconfig); err != nil {
		return err
	}
	if err := writeCSRManifest(filepath.Join(k.dir, anotherCSR)); err != nil {
		return err
	}
	files := map[string]struct {
		data string
		mode os.FileMode
	}{
		envFile:    {k.envScript(kubeconfig), 0o644},
		stopScript: {k.stopScript(), 0o755},
		pidFile:    {fmt.Sprintf("%d\n", os.Getpid()), 0o644},
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(k.dir, name), []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	fmt.Print(k.guide(kubeconfig))
	ready()
	<-ctx.Done()
	fmt.Printf("\n==> %s: stopping\n", time.Now().Format(time.RFC3339))
	return nil
}

// kept is how the kept copy runs the demo: in dir, calling ready once everything is up.
type kept struct {
	dir   string
	ready func()
}

// readyPipe returns the kept copy's ready function: it writes readyLine on readyFD and closes
// it. It first keeps the pipe from the processes the kept copy starts (the server, the
// watcher, etcd, kube-apiserver): were they to inherit it, the foreground copy would not see
// it close when the kept copy dies.
func readyPipe() func() {
	syscall.CloseOnExec(readyFD)
	f := os.NewFile(readyFD, "ready")
	return func() {
		if f == nil {
			return
		}
		_, _ = fmt.Fprintln(f, readyLine)
		_ = f.Close()
	}
}

// adminFlags are signetctl's connection flags as the demo's admin client.
func (k keptDemo) adminFlags() string {
	return fmt.Sprintf("--server %s --tls-ca %s --tls-cert %s --tls-key %s", k.grpcAddr,
		filepath.Join(k.state, devpki.TLSCACert), filepath.Join(k.state, adminCert), filepath.Join(k.state, adminKey))
}

// guide is what the kept copy prints once everything is up.
func (k keptDemo) guide(kubeconfig string) string {
	ctl := filepath.Join(k.bin, "signetctl")
	kc := "kubectl --kubeconfig " + kubeconfig
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("\nEverything is still running (KEEP=1). The demo's folder: %s", k.dir)
	p("  kube-apiserver     %s  (etcd beside it; cluster-admin kubeconfig: %s)", k.apiserver, adminKubeconfig)
	p("  signet-server      gRPC %s (mTLS), http://%s/metrics  (state: server/, log: signet-server.log)", k.grpcAddr, k.serverHTTP)
	p("  signet-watcher     http://%s/metrics  (kubeconfig: watcher.kubeconfig, log: signet-watcher.log)", k.watcherMetrics)
	p("  server config      %s", filepath.Join(k.state, devpki.ConfigFile))
	p("  ledger             %s", filepath.Join(k.state, "ledger"))
	p("  CA key             %s", k.keySummary)
	p("\nPoke at it (or `source %s` for KUBECONFIG, PATH and $SIGNET_ADMIN):", filepath.Join(k.dir, envFile))
	p("  %s get csr,clustertrustbundles", kc)
	p("  %s describe csr %s", kc, k.csrName)
	p("  %s ca status %s", ctl, k.adminFlags())
	p("  %s signers --server %s --dev-state-dir %s", ctl, k.grpcAddr, k.state)
	p("  %s ledger verify --dir %s", ctl, filepath.Join(k.state, "ledger"))
	p("  %s ledger list --dir %s", ctl, filepath.Join(k.state, "ledger"))
	p("  curl -s http://%s/metrics | grep ^signet_", k.serverHTTP)
	p("Sign another (as cluster-admin; the watcher signs it once approved):")
	p("  %s create -f %s", kc, filepath.Join(k.dir, anotherCSR))
	p("  %s certificate approve %s", kc, anotherCSRName)
	p("  %s get csr %s -o jsonpath='{.status.certificate}' | base64 -d | %s inspect -", kc, anotherCSRName, ctl)
	p("\nStop it (the watcher, the server, the control plane; the folder stays):")
	p("  %s        # or: kill $(cat %s)", filepath.Join(k.dir, stopScript), filepath.Join(k.dir, pidFile))
	p("  rm -rf %s   # afterwards", k.dir)
	return b.String()
}

// envScript is env.sh: `source` it to reach the kept demo with kubectl and signetctl.
func (k keptDemo) envScript(kubeconfig string) string {
	return fmt.Sprintf(`# source %s: kubectl and signetctl reach the demo kept running in %s.
export KUBECONFIG=%s
export PATH=%s:"$PATH"
# signetctl ca status $SIGNET_ADMIN: the connection flags of the demo's admin client
SIGNET_ADMIN=%q
# signetctl signers $SIGNET_WATCHER: those of the watcher's identity
SIGNET_WATCHER=%q
`, filepath.Join(k.dir, envFile), k.dir, kubeconfig, k.bin, k.adminFlags(),
		fmt.Sprintf("--server %s --dev-state-dir %s", k.grpcAddr, k.state)) + softHSMEnv()
}

// softHSMEnv exports the SoftHSM2 configuration of a KEY=pkcs11 demo (softHSMToken set it),
// for signetctl keys list and friends; empty otherwise.
func softHSMEnv() string {
	conf := os.Getenv("SOFTHSM2_CONF")
	if conf == "" {
		return ""
	}
	return "# the demo's SoftHSM2 token (signetctl keys list --uri 'pkcs11:token=" + tokenLabel + "?module-path=…&pin-source=…')\nexport SOFTHSM2_CONF=" + conf + "\n"
}

// stopScript stops the kept copy with SIGTERM and waits (up to a minute) until it has removed
// its pid file, which it does last.
func (k keptDemo) stopScript() string {
	pid := filepath.Join(k.dir, pidFile)
	return fmt.Sprintf(`#!/bin/sh
# Stops the demo kept running in %[1]s (signet-watcher, signet-server, kube-apiserver, etcd).
# The folder stays: rm -rf %[1]s afterwards.
[ -f %[2]s ] || { echo "not running (no %[2]s)"; exit 0; }
kill "$(cat %[2]s)" || exit 1
i=0
while [ -f %[2]s ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
tail -n 6 %[3]s
[ ! -f %[2]s ]
`, k.dir, pid, filepath.Join(k.dir, demoLog))
}

// writeCSRManifest writes a CertificateSigningRequest for the demo signer, named
// anotherCSRName, to create with kubectl. Its private key is not kept: it shows the flow.
func writeCSRManifest(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "orders.demo.svc", Organization: []string{"demo"}},
		DNSNames: []string{"orders.demo.svc", "orders.demo.svc.cluster.local"},
	}, key)
	if err != nil {
		return err
	}
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	manifest := fmt.Sprintf(`# A second CSR for the kept demo: kubectl create -f this file, then kubectl certificate approve %s.
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  signerName: %s
  expirationSeconds: 3600
  usages: [digital signature, server auth]
  request: %s
`, anotherCSRName, anotherCSRName, signerName, base64.StdEncoding.EncodeToString(csrPEM))
	return os.WriteFile(path, []byte(manifest), 0o644)
}
