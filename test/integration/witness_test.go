package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/witness"
)

// TestLedgerWitness: the cluster witnesses the signing server's ledger. The server's ledger
// directory is replaced by an older copy of itself while it is stopped: the server cannot tell
// (the copy carries its own older checkpoint, which it extends) and starts. The watcher's
// witness, which accepted a later checkpoint, sees the log shrink: a Warning Event on its
// ConfigMap, and signing pauses (an approved CSR waits, with Events saying why; nothing is
// failed). Once the full ledger is back, the alarm clears and the waiting CSR is signed.
func TestLedgerWitness(t *testing.T) {
	s := newSignet(t, "it.signet.dev/witness", time.Hour)
	stop := s.startStoppableServer()
	ledgerDir := s.cfg.Ledger.Dir

	// The server's checkpoint public key, as an operator hands it to the watcher.
	key, err := keystore.Open(context.Background(), filepath.Join(ledgerDir, "checkpoint-key.pem"), keystore.Options{})
	if err != nil {
		t.Fatalf("the server's checkpoint key: %v", err)
	}
	pub, err := ledgerproof.MarshalPublicKeyPEM(key.Public())
	key.Close()
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(t.TempDir(), "checkpoint.pub")
	if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
		t.Fatal(err)
	}

	u, err := cluster.AddWatcher("watcher-witness", []string{s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	const cmName = "it-ledger-witness"
	grantWitnessConfigMap(t, u.Name, cmName)
	cfg := s.watcherConfig(s.addr)
	disabled := false
	cfg.LeaderElection.Enabled = &disabled
	cfg.LedgerWitness = watcher.LedgerWitnessConfig{PublicKeyFiles: []string{pubFile}, Period: metav1.Duration{Duration: time.Second},
		ConfigMapName: cmName, Namespace: metav1.NamespaceDefault}
	cfg.Default()
	runWatcher(t, cfg, u.Client())

	requester, err := cluster.AddRequester("witness-requester", nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "witness-requester"}}
	signOne := func(name string) {
		t.Helper()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		csr := submit(t, requester, s.signerName, key, tmpl, nil)
		if err := cluster.Approve(context.Background(), csr.Name); err != nil {
			t.Fatal(err)
		}
		waitFor(t, u.Client(), csr.Name, 30*time.Second, "signed ("+name+")", signed)
	}
	signOne("first")
	older := copyDir(t, ledgerDir)
	witnessed := waitWitnessed(t, cmName, 1)
	signOne("second")
	signOne("third")
	waitWitnessed(t, cmName, witnessed+2)

	// The ledger directory replaced by its older copy; the server starts on it.
	stop()
	full := copyDir(t, ledgerDir)
	replaceDir(t, ledgerDir, older)
	stop = s.startStoppableServer()
	waitConfigMapEvent(t, cmName, witness.ReasonLedgerShrunk)

	key2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	waiting := submit(t, requester, s.signerName, key2, tmpl, nil)
	if err := cluster.Approve(context.Background(), waiting.Name); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, waiting.Name, "LedgerWitnessAlarm")
	got, err := u.Client().CertificatesV1().CertificateSigningRequests().Get(context.Background(), waiting.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if signed(got) || condition(got, certificatesv1.CertificateFailed) != nil {
		t.Fatal("a CSR was signed or failed while the witness's alarm was raised")
	}

	// The full ledger restored: consistent again, the waiting CSR is signed.
	stop()
	replaceDir(t, ledgerDir, full)
	s.startStoppableServer()
	waitConfigMapEvent(t, cmName, witness.ReasonLedgerConsistent)
	waitFor(t, u.Client(), waiting.Name, 60*time.Second, "signed after the ledger was restored", signed)
}

// grantWitnessConfigMap lets user keep the witness ConfigMap name in the default namespace,
// as deploy/watcher/rbac.yaml does in the watcher's namespace.
func grantWitnessConfigMap(t *testing.T, user, name string) {
	t.Helper()
	_, admin := cluster.Admin()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "witness-" + user, Namespace: metav1.NamespaceDefault},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{name}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		},
	}
	// A test run again on the same cluster (-count) finds them: start from a clean slate.
	_ = admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := admin.RbacV1().Roles(metav1.NamespaceDefault).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: metav1.NamespaceDefault},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := admin.RbacV1().RoleBindings(metav1.NamespaceDefault).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitWitnessed waits until the witness ConfigMap holds a checkpoint of at least size records
// and returns its size.
func waitWitnessed(t *testing.T, cmName string, size int64) int64 {
	t.Helper()
	_, admin := cluster.Admin()
	var got int64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, signed := range cm.Data {
			body, _, _ := strings.Cut(signed, "\n\n")
			cp, err := ledgerproof.ParseCheckpoint([]byte(body + "\n"))
			if err != nil {
				return false, err
			}
			got = cp.Size
		}
		return got >= size, nil
	})
	if err != nil {
		t.Fatalf("the witness ConfigMap %s holds size %d, want at least %d: %v", cmName, got, size, err)
	}
	return got
}

// waitConfigMapEvent waits for an Event with reason on the witness ConfigMap.
func waitConfigMapEvent(t *testing.T, cmName, reason string) {
	t.Helper()
	_, admin := cluster.Admin()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cmName})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.Source.Component == watcher.Component {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on ConfigMap %s: %v", reason, cmName, err)
	}
}

// copyDir copies the regular files of dir into a new temporary folder.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// replaceDir makes dir hold exactly the files of from.
func replaceDir(t *testing.T, dir, from string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
