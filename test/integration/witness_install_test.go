package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/witness"
)

// TestWitnessInstalledWithHelm installs the watcher as the Helm chart renders it with
// ledgerWitness.enabled (the server's checkpoint public key in a ConfigMap the operator
// created, a ConfigMap name of its own for the accepted checkpoints), on the real API server,
// and runs it as the Deployment's pod: leader election on (the chart's config), the API server
// reached as the release's ServiceAccount, which holds only the RBAC the chart rendered. The
// witness must take the Lease and report the server's ledger consistent
// (signet_watcher_ledger_witness_consistent 1, the checkpoint stored in that ConfigMap of the
// release namespace) while CSRs are signed; then, with the server's ledger directory replaced
// by an older copy of itself, raise the alarm: a LedgerShrunk Warning Event on that ConfigMap,
// the metric 0, and signing paused. Once the full ledger is back it is consistent again.
func TestWitnessInstalledWithHelm(t *testing.T) {
	bin := buildWatcher(t)
	s := newSignet(t, "it.signet.dev/witness-install", time.Hour)
	stop := s.startStoppableServer()
	ledgerDir := s.cfg.Ledger.Dir

	const (
		release   = "witness"
		namespace = "signet-witness-helm"
		keysCM    = "it-checkpoint-keys"      // ledgerWitness.publicKeys.configMapName
		keyName   = "server-1.pub"            // ledgerWitness.publicKeys.keys
		accepted  = "it-accepted-checkpoints" // ledgerWitness.configMapName
	)
	objs := renderHelm(t, release, namespace, "namespace.create=true",
		fmt.Sprintf("signerNames=[%q]", s.signerName), fmt.Sprintf("server.address=%q", s.addr), `clusterName="witness-test"`,
		`extraArgs=["-v=2"]`,
		"ledgerWitness.enabled=true",
		"ledgerWitness.publicKeys="+mustJSON(t, map[string]any{"configMapName": keysCM, "keys": []string{keyName}}),
		"ledgerWitness.configMapName="+mustJSON(t, accepted),
		`ledgerWitness.period="1s"`)
	in := install(t, "helm-witness", s, objs)
	checkLeaderElectionOn(t, in)

	// The operator's step: the server's checkpoint public key (the PEM it logs at start) in the
	// ConfigMap the chart mounts.
	_, admin := cluster.Admin()
	ctx := context.Background()
	keys := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: keysCM, Namespace: namespace},
		Data:       map[string]string{keyName: string(checkpointPublicKeyPEM(t, ledgerDir))},
	}
	if _, err := admin.CoreV1().ConfigMaps(namespace).Create(ctx, keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	deleteBundlesAtEnd(t, strings.ReplaceAll(s.signerName, "/", ":")+":signet") // after the watcher stops
	pod := in.deployment.Name + "-0"
	metrics := freeAddress(t)
	in.runPodAt(t, bin, pod, metrics)
	lease := in.deployment.Name
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return leaseHolder(ctx, namespace, lease) == pod, nil
	}); err != nil {
		t.Fatalf("%s did not take the Lease %s/%s (holder %q)", pod, namespace, lease, leaseHolder(ctx, namespace, lease))
	}

	requester, err := cluster.AddRequester("witness-install", nil)
	if err != nil {
		t.Fatal(err)
	}
	signOne := func(cn string) {
		t.Helper()
		csr := approvedCSR(t, requester, s.signerName, cn)
		waitFor(t, requester.Client(), csr.Name, 30*time.Second, "signed ("+cn+")", signed)
	}

	// Consistent: the checkpoints accepted in the release namespace's ConfigMap, as the
	// ServiceAccount (its Role names that ConfigMap), and the metric says so.
	signOne("witness-install-1")
	older := copyDir(t, ledgerDir)
	witnessed := waitWitnessedIn(t, namespace, accepted, 1)
	signOne("witness-install-2")
	signOne("witness-install-3")
	witnessed = waitWitnessedIn(t, namespace, accepted, witnessed+2)
	waitMetric(t, metrics, "signet_watcher_ledger_witness_consistent", 1)
	if ok := scrapeMetrics(t, metrics).value(t, `signet_watcher_ledger_witness_checks_total{result="ok"}`); ok < 1 {
		t.Errorf(`signet_watcher_ledger_witness_checks_total{result="ok"} = %v, want at least 1`, ok)
	}
	if errs := scrapeMetrics(t, metrics).value(t, `signet_watcher_ledger_witness_checks_total{result="error"}`); errs > 0 {
		t.Errorf(`signet_watcher_ledger_witness_checks_total{result="error"} = %v: a check failed (Forbidden by the rendered RBAC?)`, errs)
	}

	// The server's ledger edited: its directory replaced by the older copy, on which it starts.
	stop()
	full := copyDir(t, ledgerDir)
	replaceDir(t, ledgerDir, older)
	stop = s.startStoppableServer()
	waitWitnessEvent(t, namespace, accepted, corev1.EventTypeWarning, witness.ReasonLedgerShrunk)
	waitMetric(t, metrics, "signet_watcher_ledger_witness_consistent", 0)
	if got := waitWitnessedIn(t, namespace, accepted, witnessed); got != witnessed {
		t.Errorf("the accepted checkpoint (the evidence) changed during the alarm: size %d, was %d", got, witnessed)
	}
	waiting := approvedCSR(t, requester, s.signerName, "witness-install-paused")
	waitEvent(t, waiting.Name, watcher.ReasonLedgerWitnessAlarm)
	got, err := requester.Client().CertificatesV1().CertificateSigningRequests().Get(ctx, waiting.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if signed(got) || condition(got, certificatesv1.CertificateFailed) != nil {
		t.Fatal("a CSR was signed or failed while the witness's alarm was raised")
	}

	// The full ledger restored: consistent again, and the waiting CSR is signed.
	stop()
	replaceDir(t, ledgerDir, full)
	s.startStoppableServer()
	waitWitnessEvent(t, namespace, accepted, corev1.EventTypeNormal, witness.ReasonLedgerConsistent)
	waitMetric(t, metrics, "signet_watcher_ledger_witness_consistent", 1)
	waitFor(t, requester.Client(), waiting.Name, 60*time.Second, "signed after the ledger was restored", signed)
}

// checkLeaderElectionOn checks that the installed config.yaml runs leader election.
func checkLeaderElectionOn(t *testing.T, in *installed) {
	t.Helper()
	_, admin := cluster.Admin()
	cm, err := admin.CoreV1().ConfigMaps(in.namespace).Get(context.Background(), volume(t, in.deployment, "config").ConfigMap.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		LeaderElection struct {
			Enabled *bool `json:"enabled"`
		} `json:"leaderElection"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if e := cfg.LeaderElection.Enabled; e == nil || !*e {
		t.Fatalf("%s: the installed config.yaml does not enable leader election:\n%s", in.method, cm.Data["config.yaml"])
	}
}

// checkpointPublicKeyPEM is the server's checkpoint public key as PEM, read from its key in
// ledgerDir (what the server logs at start as public_key).
func checkpointPublicKeyPEM(t *testing.T, ledgerDir string) []byte {
	t.Helper()
	key, err := keystore.Open(context.Background(), filepath.Join(ledgerDir, "checkpoint-key.pem"), keystore.Options{})
	if err != nil {
		t.Fatalf("the server's checkpoint key: %v", err)
	}
	defer key.Close()
	pub, err := ledgerproof.MarshalPublicKeyPEM(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// waitWitnessedIn waits until the witness ConfigMap namespace/name holds a checkpoint of at
// least size records and returns its size.
func waitWitnessedIn(t *testing.T, namespace, name string, size int64) int64 {
	t.Helper()
	_, admin := cluster.Admin()
	var got int64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := admin.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if len(cm.Data) > 1 {
			return false, fmt.Errorf("ConfigMap %s/%s holds %d logs, want one: %v", namespace, name, len(cm.Data), cm.Data)
		}
		for key, signed := range cm.Data {
			body, _, _ := strings.Cut(signed, "\n\n")
			cp, err := ledgerproof.ParseCheckpoint([]byte(body + "\n"))
			if err != nil {
				return false, err
			}
			if key != witness.DataKey(cp.Origin) {
				return false, fmt.Errorf("ConfigMap %s/%s key %q, want %q for origin %s", namespace, name, key, witness.DataKey(cp.Origin), cp.Origin)
			}
			got = cp.Size
		}
		return got >= size, nil
	})
	if err != nil {
		t.Fatalf("the witness ConfigMap %s/%s holds size %d, want at least %d: %v", namespace, name, got, size, err)
	}
	return got
}

// waitWitnessEvent waits for an Event of type and reason from the watcher on the witness
// ConfigMap namespace/name.
func waitWitnessEvent(t *testing.T, namespace, name, eventType, reason string) {
	t.Helper()
	_, admin := cluster.Admin()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
		})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Type+" "+e.Reason)
			if e.Type == eventType && e.Reason == reason && e.InvolvedObject.Kind == "ConfigMap" && e.Source.Component == watcher.Component {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s %s Event on ConfigMap %s/%s: %v; seen %q", eventType, reason, namespace, name, err, seen)
	}
}

// waitMetric waits until the watcher's /metrics at addr exposes series with value want.
func waitMetric(t *testing.T, addr, series string, want float64) {
	t.Helper()
	got := -1.0
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body := httpGet("http://" + addr + "/metrics")
		if code != 200 {
			return false, nil
		}
		got = metricsScrape{body}.value(t, series)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s = %v, want %v: %v", series, got, want, err)
	}
}
