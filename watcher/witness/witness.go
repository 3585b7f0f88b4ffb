// Package witness makes the cluster a witness of the signing server's ledger: every period the
// leader fetches the server's latest signed checkpoint (the size of its ledger and the root of
// the Merkle tree of its records), verifies its signature with the configured checkpoint
// key, proves it consistent with the last checkpoint the cluster accepted, and keeps the
// latest accepted one in a ConfigMap of the watcher's namespace.
//
// A ledger that shrank, forked (another history of the same size, or a proof that does not
// verify) or is signed by an unknown key raises the alarm: a Warning Event on the ConfigMap,
// signet_watcher_ledger_witness_consistent 0, an ERROR log line, and, unless
// Options.SignOnAlarm, signing pauses (Blocked; objects wait as for an unreachable server, up
// to the controllers' give-up deadlines). Signing also waits for the first check of each
// leader term, which reads the evidence an earlier term left. The witnessed
// checkpoint is kept as evidence. The alarm clears when a later checkpoint is consistent with
// it again (the server's ledger restored), or when an operator who has investigated deletes
// the ConfigMap's entry for that log (the next checkpoint is then accepted as the new start).
//
// A server that cannot be reached is not an alarm: the check is retried the next period.
package witness

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/ledgerproof"
)

// Source is the signing server's LedgerService (signerclient.Client).
type Source interface {
	LedgerCheckpoint(ctx context.Context) ([]byte, error)
	LedgerConsistency(ctx context.Context, oldSize int64) (signed []byte, proof [][]byte, err error)
}

// Metrics receives the witness's state. Implementations must be safe for concurrent use.
type Metrics interface {
	// ObserveCheck counts one check by result: ResultOK, ResultAlarm or ResultError.
	ObserveCheck(result string)
	// SetWitnessed records the size of the latest checkpoint accepted for origin, and whether
	// the witness is in alarm.
	SetWitnessed(origin string, size int64)
	SetConsistent(ok bool)
}

// Results of Metrics.ObserveCheck.
const (
	ResultOK    = "ok"
	ResultAlarm = "alarm"
	ResultError = "error"
)

// Results returns every result of Metrics.ObserveCheck.
func Results() []string { return []string{ResultOK, ResultAlarm, ResultError} }

// Reasons of the witness's Events.
const (
	ReasonLedgerShrunk       = "LedgerShrunk"
	ReasonLedgerInconsistent = "LedgerInconsistent"
	ReasonLedgerUntrusted    = "LedgerCheckpointUntrusted"
	ReasonLedgerConsistent   = "LedgerConsistent"
)

// Options configure a Witness.
type Options struct {
	// Namespace and Name locate the ConfigMap holding the accepted checkpoints.
	Namespace, Name string
	// Keys are the checkpoint public keys of the signing servers (at least one).
	Keys []crypto.PublicKey
	// Origins, if set, are the only log origins accepted.
	Origins []string
	// Period is the time between two checks.
	Period time.Duration
	// SignOnAlarm keeps signing while the alarm is raised.
	SignOnAlarm bool
	// Pause, if set, builds the error Blocked returns from why signing pauses (the alarm, or
	// ErrNotChecked): once in New and once for each check that raises the alarm, not on
	// every call of Blocked. Unset, Blocked returns the cause itself.
	Pause    func(cause error) error
	Recorder record.EventRecorder
	Metrics  Metrics
	Clock    clock.WithTicker
}

// Witness checks the signing server's ledger. Build it with New; Run it on the leader.
type Witness struct {
	cms  typedcorev1.ConfigMapInterface
	src  Source
	opts Options

	mu          sync.Mutex
	alarm       error  // the raised alarm, nil when none
	alarmReason string // its Event's reason, "" when none
	blocked     error  // Pause(alarm), nil when none
	synced      bool
	checked     chan struct{} // closed when synced is set
	notChecked  error         // Pause(ErrNotChecked)
}

// New returns a Witness storing its checkpoints through cms (the ConfigMaps of its namespace).
func New(cms typedcorev1.ConfigMapsGetter, src Source, opts Options) (*Witness, error) {
	if len(opts.Keys) == 0 || opts.Name == "" || opts.Namespace == "" || opts.Period <= 0 {
		return nil, errors.New("creating ledger witness: keys, a ConfigMap name and namespace and a positive period are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Pause == nil {
		opts.Pause = func(cause error) error { return cause }
	}
	return &Witness{cms: cms.ConfigMaps(opts.Namespace), src: src, opts: opts, checked: make(chan struct{}), notChecked: opts.Pause(ErrNotChecked)}, nil
}

// Run checks now and then every period until ctx ends.
func (w *Witness) Run(ctx context.Context) error {
	t := w.opts.Clock.NewTicker(w.opts.Period)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// HasSynced reports whether the first check has run (the readiness probe waits for it).
func (w *Witness) HasSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// Wait returns once the first check has run, or when ctx ends. A signing call waits so, then
// asks Blocked: at the start of a leader term it is held for the first check (a moment) rather
// than refused, which would give every pending object a Warning Event.
func (w *Witness) Wait(ctx context.Context) {
	select {
	case <-w.checked:
	case <-ctx.Done():
	}
}

// markSynced records that a check has run. Called with w.mu held.
func (w *Witness) markSynced() {
	if !w.synced {
		w.synced = true
		close(w.checked)
	}
}

// ErrNotChecked is what Blocked returns until the first check of the server's ledger has
// run: the ConfigMap may hold an alarm's evidence from an earlier term.
var ErrNotChecked = errors.New("the ledger witness has not checked the signing server's ledger yet")

// Blocked returns why signing must pause, as Options.Pause built it, nil when it may go on:
// the raised alarm, or ErrNotChecked until the first check has run (a failed one too: a
// server that cannot be reached raises no alarm). With Options.SignOnAlarm it is always nil.
func (w *Witness) Blocked() error {
	if w.opts.SignOnAlarm {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		return w.notChecked
	}
	return w.blocked
}

// Alarm returns the raised alarm, nil when none.
func (w *Witness) Alarm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alarm
}

// check runs one check and records its outcome. The alarm's Event and log line are recorded
// when its reason changes, not on every period (its message holds sizes that change).
func (w *Witness) check(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cm, reason, err := w.checkOnce(ctx)
	if err != nil && reason == "" {
		logger.V(2).Info("Ledger witness check failed; retrying next period", "err", err)
		w.observe(ResultError)
		w.mu.Lock()
		w.markSynced()
		w.mu.Unlock()
		return
	}
	if err != nil {
		w.observe(ResultAlarm)
	} else {
		w.observe(ResultOK)
	}
	prev, prevReason := w.setAlarm(reason, err)
	switch {
	case err != nil && reason != prevReason:
		logger.Error(err, "Ledger witness alarm", "reason", reason, "signing", w.opts.SignOnAlarm)
		w.event(cm, corev1.EventTypeWarning, reason, err.Error())
	case err == nil && prev != nil:
		logger.Info("Ledger witness: the server's ledger is consistent again", "was", prev.Error())
		w.event(cm, corev1.EventTypeNormal, ReasonLedgerConsistent, "the signing server's ledger is consistent with the witnessed checkpoint again")
	}
}

func (w *Witness) observe(result string) {
	if w.opts.Metrics != nil {
		w.opts.Metrics.ObserveCheck(result)
	}
}

// setAlarm records a check's outcome (err nil: no alarm) and that a check has run, and returns
// the alarm and reason it replaces.
func (w *Witness) setAlarm(reason string, err error) (prev error, prevReason string) {
	var blocked error
	if err != nil {
		blocked = w.opts.Pause(err)
	}
	w.mu.Lock()
	prev, prevReason = w.alarm, w.alarmReason
	w.alarm, w.alarmReason, w.blocked = err, reason, blocked
	w.markSynced()
	w.mu.Unlock()
	if w.opts.Metrics != nil {
		w.opts.Metrics.SetConsistent(err == nil)
	}
	return prev, prevReason
}

func (w *Witness) event(cm *corev1.ConfigMap, eventType, reason, message string) {
	if w.opts.Recorder != nil && cm != nil {
		w.opts.Recorder.Event(cm, eventType, reason, message)
	}
}

// checkOnce fetches, verifies and compares the server's checkpoint. It returns the ConfigMap
// (for Events), and for an alarm its reason and the error; an error with no reason is a
// failure to check (the server or the API server could not be reached).
func (w *Witness) checkOnce(ctx context.Context) (*corev1.ConfigMap, string, error) {
	cm, err := w.configMap(ctx)
	if err != nil {
		return nil, "", err
	}
	signed, err := w.src.LedgerCheckpoint(ctx)
	if err != nil {
		return cm, "", err
	}
	latest, err := w.open(signed)
	if err != nil {
		return cm, ReasonLedgerUntrusted, err
	}
	key := dataKey(latest.Origin)
	stored, ok := cm.Data[key]
	if !ok {
		klog.FromContext(ctx).Info("Ledger witness: accepting the first checkpoint of a log", "origin", latest.Origin, "size", latest.Size)
		return cm, "", w.store(ctx, cm, key, latest, signed)
	}
	prev, err := w.open([]byte(stored))
	if err != nil {
		return cm, ReasonLedgerUntrusted, fmt.Errorf("the checkpoint witnessed earlier in ConfigMap %s/%s (%s) no longer verifies with the configured keys: %w",
			w.opts.Namespace, w.opts.Name, key, err)
	}
	switch {
	case latest.Size < prev.Size:
		return cm, ReasonLedgerShrunk, fmt.Errorf("the signing server's ledger %s shrank: it has %d records, but the cluster witnessed %d; records were removed from its end or it was replaced by an older copy",
			latest.Origin, latest.Size, prev.Size)
	case latest.Size == prev.Size && latest.Hash != prev.Hash:
		return cm, ReasonLedgerInconsistent, fmt.Errorf("the signing server's ledger %s has another history: %d records, as witnessed, with another root", latest.Origin, latest.Size)
	case latest.Size == prev.Size:
		w.metricSize(prev)
		return cm, "", nil
	}
	signed, proof, err := w.src.LedgerConsistency(ctx, prev.Size)
	if err != nil {
		return cm, "", err
	}
	newer, err := w.open(signed)
	if err != nil {
		return cm, ReasonLedgerUntrusted, err
	}
	if newer.Origin != prev.Origin {
		return cm, "", fmt.Errorf("the server changed between two calls (log %s, then %s)", prev.Origin, newer.Origin)
	}
	hashes, err := ledgerproof.ParseHashes(proof)
	if err == nil {
		err = ledgerproof.VerifyConsistency(prev, newer, hashes)
	}
	if err != nil {
		reason := ReasonLedgerInconsistent
		if errors.Is(err, ledgerproof.ErrShrunk) {
			reason = ReasonLedgerShrunk
		}
		return cm, reason, fmt.Errorf("the signing server's ledger %s is not an extension of the %d records the cluster witnessed: %w", prev.Origin, prev.Size, err)
	}
	return cm, "", w.store(ctx, cm, key, newer, signed)
}

// open verifies signed with one of the configured keys (and origins) and parses it.
func (w *Witness) open(signed []byte) (ledgerproof.Checkpoint, error) {
	origin, _, _ := strings.Cut(string(signed), "\n")
	if len(w.opts.Origins) > 0 && !slices.Contains(w.opts.Origins, origin) {
		return ledgerproof.Checkpoint{}, fmt.Errorf("the signing server's checkpoint is of log %q, not one of the configured origins %q", origin, w.opts.Origins)
	}
	var errs []error
	for _, k := range w.opts.Keys {
		v, err := ledgerproof.NewNoteVerifier(origin, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cp, err := ledgerproof.OpenCheckpoint(signed, origin, v)
		if err == nil {
			return cp, nil
		}
		errs = append(errs, err)
	}
	return ledgerproof.Checkpoint{}, fmt.Errorf("the signing server's checkpoint of log %q does not verify with any configured checkpoint key: %w", origin, errors.Join(errs...))
}

// configMap reads the ConfigMap, creating it empty if missing.
func (w *Witness) configMap(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := w.cms.Get(ctx, w.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = w.cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: w.opts.Name, Namespace: w.opts.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "signet-watcher"}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger witness ConfigMap %s/%s: %w", w.opts.Namespace, w.opts.Name, err)
	}
	return cm, nil
}

// store writes signed as the accepted checkpoint of its log (a conflict is retried next
// period).
func (w *Witness) store(ctx context.Context, cm *corev1.ConfigMap, key string, cp ledgerproof.Checkpoint, signed []byte) error {
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[key] = string(signed)
	if _, err := w.cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "signet-watcher"}); err != nil {
		return fmt.Errorf("storing the witnessed checkpoint in ConfigMap %s/%s: %w", w.opts.Namespace, w.opts.Name, err)
	}
	w.metricSize(cp)
	return nil
}

func (w *Witness) metricSize(cp ledgerproof.Checkpoint) {
	if w.opts.Metrics != nil {
		w.opts.Metrics.SetWitnessed(cp.Origin, cp.Size)
	}
}

// DataKey is the ConfigMap key of a log's accepted checkpoint: "log-" and 16 hex digits of the
// SHA-256 of its origin (an origin may hold characters a key may not).
func DataKey(origin string) string { return dataKey(origin) }

func dataKey(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return "log-" + hex.EncodeToString(sum[:8])
}
