package watcher

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/leader"
	"github.com/signet-pki/signet/watcher/witness"
)

// Defaults of ledgerWitness.
const (
	DefaultWitnessPeriod    = 10 * time.Second
	MinWitnessPeriod        = time.Second
	DefaultWitnessConfigMap = "signet-ledger-witness"
)

// LedgerWitnessConfig configures the witness of the signing server's ledger (watcher/witness):
// on the leader, every period, the watcher fetches the server's signed checkpoint, verifies it
// with the checkpoint public key and proves it consistent with the last one the cluster
// accepted, kept in a ConfigMap of its namespace. A ledger that shrank or forked raises the
// alarm (Warning Event, signet_watcher_ledger_witness_consistent 0, alert
// SignetWatcherLedgerWitnessAlarm) and pauses signing unless signOnAlarm. It needs get, update
// (resourceNames: configMapName) and create on configmaps in that namespace
// (the Helm value ledgerWitness.enabled, or the kustomize component components/ledger-witness).
type LedgerWitnessConfig struct {
	// PublicKeyFiles are the PEM public keys of the signing servers' checkpoint keys (the
	// server logs its key at start; docs/ledger.md). None: the witness is off.
	PublicKeyFiles []string `json:"publicKeyFiles,omitempty"`
	// Origins, if set, are the only ledger origins accepted (pinning them is stronger than
	// trusting any log the keys sign).
	Origins []string `json:"origins,omitempty"`
	// Period is the time between two checks (default 10s, at least 1s).
	Period metav1.Duration `json:"period,omitempty"`
	// ConfigMapName names the ConfigMap holding the accepted checkpoints (default
	// signet-ledger-witness), in namespace (default the leader election's: $POD_NAMESPACE,
	// else the service account's).
	ConfigMapName string `json:"configMapName,omitempty"`
	Namespace     string `json:"namespace,omitempty"`
	// SignOnAlarm keeps signing while the alarm is raised (default false: signing pauses,
	// objects wait as for an unreachable server, up to the give-up deadlines).
	SignOnAlarm bool `json:"signOnAlarm,omitempty"`
}

// Enabled reports whether the witness runs: at least one public key is configured.
func (w *LedgerWitnessConfig) Enabled() bool { return len(w.PublicKeyFiles) > 0 }

func (w *LedgerWitnessConfig) defaults() {
	if w.Period.Duration == 0 {
		w.Period.Duration = DefaultWitnessPeriod
	}
	if w.ConfigMapName == "" {
		w.ConfigMapName = DefaultWitnessConfigMap
	}
}

func (w *LedgerWitnessConfig) validate() []error {
	var errs []error
	if w.Period.Duration < MinWitnessPeriod {
		errs = append(errs, fmt.Errorf("ledgerWitness.period: is %s, must be at least %s", w.Period.Duration, MinWitnessPeriod))
	}
	for i, f := range w.PublicKeyFiles {
		if f == "" {
			errs = append(errs, fmt.Errorf("ledgerWitness.publicKeyFiles[%d]: is empty", i))
		}
	}
	return errs
}

// keys reads the public keys.
func (w *LedgerWitnessConfig) keys() ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for i, f := range w.PublicKeyFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("ledgerWitness.publicKeyFiles[%d]: %w", i, err)
		}
		k, err := ledgerproof.ParsePublicKeyPEM(data)
		if err != nil {
			return nil, fmt.Errorf("ledgerWitness.publicKeyFiles[%d] %s: %w", i, f, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// witnessOptions reads what the ledger witness needs from the configuration and the process,
// once at start (a standby with a bad key file fails then, not when it becomes leader): its
// keys and namespace. It returns nil when the witness is off. ledgerWitness.namespace defaults
// to leaderElection.namespace, else the watcher's own ($POD_NAMESPACE, else the service
// account's).
func (c *Config) witnessOptions(env leader.Env) (*witness.Options, error) {
	lw := c.LedgerWitness
	if !lw.Enabled() {
		return nil, nil
	}
	keys, err := lw.keys()
	if err != nil {
		return nil, err
	}
	ns := lw.Namespace
	if ns == "" {
		if ns, err = env.Namespace(c.LeaderElection.Namespace); err != nil {
			msg := fmt.Sprintf("ledgerWitness.namespace: not set, and neither leaderElection.namespace, $%s nor %s gives the watcher's namespace",
				leader.EnvPodNamespace, leader.ServiceAccountNamespaceFile)
			if cause := errors.Unwrap(err); cause != nil { // the file could not be read
				return nil, fmt.Errorf("%s: %w", msg, cause)
			}
			return nil, errors.New(msg)
		}
	}
	return &witness.Options{
		Namespace: ns, Name: lw.ConfigMapName, Keys: keys, Origins: lw.Origins,
		Period: lw.Period.Duration, SignOnAlarm: lw.SignOnAlarm, Pause: pausedStatus,
	}, nil
}

// newWitness builds the ledger witness of a leader term from d.witness, nil when it is off.
func newWitness(d controllerDeps) (*witness.Witness, error) {
	if d.witness == nil {
		return nil, nil
	}
	opts := *d.witness
	opts.Recorder, opts.Metrics, opts.Clock = d.recorder, d.metrics.Witness(), d.clock
	return witness.New(d.kube.CoreV1(), d.client, opts)
}

// ReasonLedgerWitnessAlarm is the condition reason (and Warning Event reason) of an object
// whose signing the ledger witness pauses.
const ReasonLedgerWitnessAlarm = "LedgerWitnessAlarm"

// pausedStatus is the error of a signing call the witness pauses: a
// *signerclient.TransientError with reason LedgerWitnessAlarm, which signerclient.Classify
// reads as transient (and status.Code as Unavailable); it unwraps to cause. The witness
// builds it once per alarm (witness.Options.Pause).
func pausedStatus(cause error) error {
	return &signerclient.TransientError{
		Reason: ReasonLedgerWitnessAlarm, Message: "signing paused by the ledger witness: " + cause.Error(), Err: cause,
	}
}

// gatedSigner is the signing server's client as the signing controllers use it: a call waits
// for the witness's first check of the leader term (or its context's end), then, while the
// witness pauses signing (its alarm is raised, or the call gave up waiting), fails with
// pausedStatus, transient with reason LedgerWitnessAlarm (the objects wait with back-off, up
// to the give-up deadlines, and are not failed).
type gatedSigner struct {
	*signerclient.Client
	witness   *witness.Witness // nil: no witness
	addresser *nodeAddresser   // nil: no node addresses forwarded
}

// blocked returns the witness's ready-made pausedStatus, nil when signing may go on.
func (g gatedSigner) blocked(ctx context.Context) error {
	if g.witness == nil {
		return nil
	}
	g.witness.Wait(ctx)
	return g.witness.Blocked()
}

// SignCSR signs unless the witness pauses signing.
func (g gatedSigner) SignCSR(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (signerclient.Issued, error) {
	if err := g.blocked(ctx); err != nil {
		return signerclient.Issued{}, err
	}
	addrs, err := g.addresser.addresses(ctx, csr)
	if err != nil {
		return signerclient.Issued{}, err
	}
	return g.Client.SignCSR(ctx, csr, addrs...)
}

// SignPCR signs unless the witness pauses signing.
func (g gatedSigner) SignPCR(ctx context.Context, pcr objectrequest.PCR) (signerclient.Issued, error) {
	if err := g.blocked(ctx); err != nil {
		return signerclient.Issued{}, err
	}
	return g.Client.SignPCR(ctx, pcr)
}
