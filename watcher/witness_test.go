package watcher

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/leader"
	"github.com/signet-pki/signet/watcher/metrics"
	"github.com/signet-pki/signet/watcher/witness"
)

// TestGatedSignerBeforeFirstCheck: a signing call waits for the witness's first check; one
// whose context ends first fails as Unavailable (retried, not failed), with reason
// LedgerWitnessAlarm, without reaching the server.
func TestGatedSignerBeforeFirstCheck(t *testing.T) {
	c := &Config{LedgerWitness: LedgerWitnessConfig{PublicKeyFiles: []string{writeKey(t)}, Namespace: "signet-system"}}
	c.LedgerWitness.defaults()
	opts, err := c.witnessOptions(testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWitness(controllerDeps{kube: fake.NewClientset(), witness: opts})
	if err != nil || w == nil {
		t.Fatalf("newWitness = %v, %v", w, err)
	}
	g := gatedSigner{witness: w}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = g.SignPCR(ctx, objectrequest.PCR{})
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "has not checked") {
		t.Fatalf("SignPCR before the first check = %v, want Unavailable naming the pending check", err)
	}
	if reason, _, terminal := signerclient.Classify(err); terminal || reason != ReasonLedgerWitnessAlarm {
		t.Errorf("Classify = %s, terminal %v; want %s, a retry", reason, terminal, ReasonLedgerWitnessAlarm)
	}
	if !errors.Is(err, witness.ErrNotChecked) {
		t.Errorf("SignPCR before the first check = %v, want it to wrap witness.ErrNotChecked", err)
	}
}

// TestWitnessResultsExported: the checks counter is exported at 0 for every result the
// witness records, from witness.Results().
func TestWitnessResultsExported(t *testing.T) {
	m := metrics.New([]string{"example.com/signer"}, nil, nil, nil)
	m.Witness().InitResults(witness.Results())
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, r := range []string{witness.ResultOK, witness.ResultAlarm, witness.ResultError} {
		if want := `signet_watcher_ledger_witness_checks_total{result="` + r + `"} 0`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// writeKey writes a checkpoint public key PEM file and returns its path.
func writeKey(t *testing.T) string {
	t.Helper()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "checkpoint.pub")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testEnv is a process whose environment is env and that has no service account.
func testEnv(env map[string]string) leader.Env {
	return leader.Env{
		Getenv:   func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) { return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist} },
	}
}

// TestWitnessOptions: the witness's keys and namespace are read at start, and their errors
// name the ledgerWitness fields.
func TestWitnessOptions(t *testing.T) {
	key := writeKey(t)
	bad := filepath.Join(t.TempDir(), "bad.pub")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	pod := map[string]string{leader.EnvPodNamespace: "from-pod"}
	tests := []struct {
		name              string
		files             []string
		namespace, leNS   string
		env               map[string]string
		wantNS, wantError string
	}{
		{"off", nil, "", "", nil, "", ""},
		{"explicit namespace", []string{key}, "witness-ns", "le-ns", pod, "witness-ns", ""},
		{"leader election's namespace", []string{key}, "", "le-ns", pod, "le-ns", ""},
		{"pod's namespace", []string{key}, "", "", pod, "from-pod", ""},
		{"no namespace", []string{key}, "", "", nil, "", "ledgerWitness.namespace: not set"},
		{"missing key file", []string{key, filepath.Join(t.TempDir(), "none.pub")}, "ns", "", nil, "", "ledgerWitness.publicKeyFiles[1]"},
		{"bad key file", []string{bad}, "ns", "", nil, "", "ledgerWitness.publicKeyFiles[0] " + bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{
				LedgerWitness:  LedgerWitnessConfig{PublicKeyFiles: tt.files, Namespace: tt.namespace},
				LeaderElection: LeaderElectionConfig{Namespace: tt.leNS},
			}
			c.LedgerWitness.defaults()
			opts, err := c.witnessOptions(testEnv(tt.env))
			switch {
			case tt.wantError != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("witnessOptions() error = %v, want %q", err, tt.wantError)
				}
			case err != nil:
				t.Fatal(err)
			case tt.files == nil:
				if opts != nil {
					t.Errorf("witness off: options %+v, want nil", opts)
				}
			default:
				if opts.Namespace != tt.wantNS || len(opts.Keys) != len(tt.files) || opts.Name != DefaultWitnessConfigMap || opts.Pause == nil {
					t.Errorf("options = %+v, want namespace %s and %d keys", opts, tt.wantNS, len(tt.files))
				}
			}
		})
	}
}
