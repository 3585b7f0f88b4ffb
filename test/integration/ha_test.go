package integration

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
)

// buildWatcher builds cmd/signet-watcher into the test's temp folder.
func buildWatcher(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "signet-watcher")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/signet-pki/signet/cmd/signet-watcher").CombinedOutput()
	if err != nil {
		t.Fatalf("building signet-watcher: %v\n%s", err, out)
	}
	return bin
}

// watcherProcess is a signet-watcher running as its own process.
type watcherProcess struct {
	identity string
	cmd      *exec.Cmd
	log      *os.File
}

// startWatcherProcess runs bin with a configuration file for s's signer, leader election in
// the default namespace with short timings, as the given user.
func startWatcherProcess(t *testing.T, bin string, s *signet, u *controlplane.User, identity, lease string) *watcherProcess {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(u, kubeconfig); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "watcher.yaml")
	body := fmt.Sprintf(`apiVersion: signet.dev/v1alpha1
kind: WatcherConfiguration
signerNames: [%q]
server:
  address: %q
  caFile: %q
  certFile: %q
  keyFile: %q
rpcTimeout: 5s
backoff: {initial: 100ms, max: 2s}
metricsAddress: "127.0.0.1:0"
leaderElection:
  enabled: true
  namespace: default
  leaseName: %q
  identity: %q
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
`, s.signerName, s.addr, filepath.Join(s.state, devpki.TLSCACert), filepath.Join(s.state, devpki.ClientCert), filepath.Join(s.state, devpki.ClientKey), lease, identity)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "watcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config, "--kubeconfig", kubeconfig, "-v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &watcherProcess{identity: identity, cmd: cmd, log: logFile}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("watcher %s log:\n%s", identity, data)
		}
	})
	return p
}

// TestLeaderDiesMidStream runs two watcher processes with leader election and SIGKILLs the
// leader while 200 approved CSRs stream in: the standby takes over, every CSR is signed, and
// the ledger shows exactly one issuance per CSR.
func TestLeaderDiesMidStream(t *testing.T) {
	bin := buildWatcher(t)
	s := newSignet(t, "it.signet.dev/ha", time.Hour)
	s.startServer()
	u, err := cluster.AddWatcher("watcher-ha", []string{s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Grant(context.Background(), "signet-it-ha-leases", u, []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"},
	}}); err != nil {
		t.Fatal(err)
	}
	const lease = "signet-watcher-it-ha"
	watchers := map[string]*watcherProcess{
		"replica-a": startWatcherProcess(t, bin, s, u, "replica-a", lease),
		"replica-b": startWatcherProcess(t, bin, s, u, "replica-b", lease),
	}
	var leader string
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		leader = leaseHolder(context.Background(), metav1.NamespaceDefault, lease)
		return leader != "", nil
	}); err != nil {
		t.Fatal("no watcher became leader")
	}

	frank, err := cluster.AddRequester("frank", nil)
	if err != nil {
		t.Fatal(err)
	}
	const total = 200
	names := make([]string, total)
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for i := range total {
		if i == total/4 {
			wg.Wait()
			if err := watchers[leader].cmd.Process.Kill(); err != nil { // a crash: the Lease is not released
				t.Fatal(err)
			}
			t.Logf("killed leader %s after %d CSRs", leader, i)
		}
		key := p256(t)
		wg.Add(1)
		go func() { // t.Fatal is for the test goroutine only: report errors on errs
			defer wg.Done()
			csr, err := trySubmit(frank, s.signerName, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: fmt.Sprintf("ha-%d", i)}}, nil)
			if err != nil {
				errs <- err
				return
			}
			names[i] = csr.Name
			if err := cluster.Approve(context.Background(), csr.Name); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, name := range names {
		waitFor(t, frank.Client(), name, 60*time.Second, "signed after the leader died", signed)
	}
	if got := leaseHolder(context.Background(), metav1.NamespaceDefault, lease); got == leader || got == "" {
		t.Errorf("lease holder is %q after killing %q; the standby should hold it", got, leader)
	}
	issued := s.issuedPerUID(t)
	csrs, err := frank.Client().CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.signerName=" + s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	if len(csrs.Items) != total {
		t.Fatalf("%d CSRs for the signer, want %d", len(csrs.Items), total)
	}
	for _, c := range csrs.Items {
		if n := issued[string(c.UID)]; n != 1 {
			t.Errorf("CSR %s: %d issuances in the ledger, want exactly 1", c.Name, n)
		}
		if len(parseChain(t, c.Status.Certificate)) != 1 {
			t.Errorf("CSR %s: chain is not one certificate", c.Name)
		}
	}
}

// TestServerOutage stops the signing server for 30 seconds in the middle of a stream: every
// CSR is signed once it is back, none ends Failed, and Events on the waiting CSRs show the
// retries.
func TestServerOutage(t *testing.T) {
	s := newSignet(t, "it.signet.dev/outage", time.Hour)
	stop := s.startStoppableServer()
	s.startWatcher()
	gina, err := cluster.AddRequester("gina", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	submitApproved := func(n int, prefix string) []string {
		var names []string
		for i := range n {
			csr := submit(t, gina, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: fmt.Sprintf("%s-%d", prefix, i)}}, nil)
			if err := cluster.Approve(ctx, csr.Name); err != nil {
				t.Fatal(err)
			}
			names = append(names, csr.Name)
		}
		return names
	}
	before := submitApproved(5, "before")
	for _, name := range before {
		waitFor(t, gina.Client(), name, 30*time.Second, "signed before the outage", signed)
	}
	stop()
	during := submitApproved(10, "during")
	time.Sleep(30 * time.Second)
	for _, name := range during {
		got, err := gina.Client().CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if signed(got) || condition(got, certificatesv1.CertificateFailed) != nil {
			t.Fatalf("CSR %s during the outage: %+v, want it waiting", name, got.Status)
		}
	}
	s.startServer()
	for _, name := range during {
		got := waitFor(t, gina.Client(), name, 30*time.Second, "signed after the outage", signed)
		if condition(got, certificatesv1.CertificateFailed) != nil {
			t.Errorf("CSR %s ended Failed because of the outage", name)
		}
	}
	// Events are written asynchronously (the recorder's broadcaster): wait for them.
	_, admin := cluster.Admin()
	var joined string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + during[0]})
		if err != nil {
			return false, err
		}
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason+": "+e.Message)
		}
		joined = strings.Join(reasons, "\n")
		return strings.Contains(joined, "SignerUnavailable") && strings.Contains(joined, "retrying in") && strings.Contains(joined, "Signed"), nil
	})
	if err != nil {
		t.Errorf("events of %s do not show the retries and the signing within 30s (%v):\n%s", during[0], err, joined)
	}
}
