package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
)

const (
	ownSigner     = "bench.signet.dev/own"
	foreignSigner = "bench.example.com/foreign"
)

// watcherMemory creates foreign and own CSRs in a real cluster of Kubernetes kubeVersion,
// starts bin/signet-watcher for the own signer and reports its peak resident memory once its
// cache is filled.
func watcherMemory(ctx context.Context, bin, kubeVersion string, foreign, own int) (string, error) {
	cluster, err := controlplane.Start(ctx, controlplane.Options{Version: kubeVersion})
	if err != nil {
		return "", err
	}
	defer cluster.Stop()
	_, admin := cluster.Admin()
	start := time.Now()
	if err := createCSRs(ctx, admin, foreignSigner, foreign); err != nil {
		return "", err
	}
	if err := createCSRs(ctx, admin, ownSigner, own); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "created %d CSRs in %s\n", foreign+own, time.Since(start).Round(time.Second))

	dir, err := os.MkdirTemp("", "signet-bench-watcher-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	state := filepath.Join(dir, "state")
	if _, err := devpki.Ensure(devpki.Options{Dir: state, SignerName: ownSigner}); err != nil {
		return "", err
	}
	u, err := cluster.AddWatcher("bench-watcher", []string{ownSigner})
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(u, kubeconfig); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "signet-watcher"),
		"--kubeconfig", kubeconfig, "--signer-name", ownSigner, "--server", "127.0.0.1:1",
		"--tls-ca", filepath.Join(state, devpki.TLSCACert),
		"--tls-cert", filepath.Join(state, devpki.ClientCert), "--tls-key", filepath.Join(state, devpki.ClientKey),
		"--leader-elect=false", "--metrics-address=127.0.0.1:0")
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting signet-watcher (run make build): %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The watcher lists its own CSRs only (field selector); give it time to sync and settle.
	time.Sleep(15 * time.Second)
	hwm, rss, err := procMemory(cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	verdict := "meets"
	if hwm > 100 {
		verdict = "ABOVE"
	}
	return fmt.Sprintf("| %d foreign + %d own CSRs | %.1f MiB | %.1f MiB | ≤ 100 MiB %s |\n", foreign, own, hwm, rss, verdict), nil
}

// createCSRs creates n unapproved CSRs for signer with 32 concurrent writers.
func createCSRs(ctx context.Context, kube kubernetes.Interface, signer string, n int) error {
	request, err := newCSR("bench")
	if err != nil {
		return err
	}
	work := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				_, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
					ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"},
					Spec: certificatesv1.CertificateSigningRequestSpec{
						Request: request, SignerName: signer,
						Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			return fmt.Errorf("creating CSRs: %w", err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("creating CSRs: %w", err)
	default:
		return nil
	}
}

// procMemory reads VmHWM (peak) and VmRSS of a process, in MiB.
func procMemory(pid int) (hwm, rss float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			hwm = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	return hwm, rss, sc.Err()
}
