package trustbundle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Anchors returns a signer's trust anchors from the signing server: the bundle's PEM and,
// from a server that says, each anchor's state (*signerclient.Client).
type Anchors interface {
	TrustAnchorSet(ctx context.Context, signerName string) (signerclient.Anchors, error)
}

// Metrics receives what the publisher observes (*metrics.TrustBundleMetrics). Implementations
// must be safe for concurrent use.
type Metrics interface {
	// ObservePublished: signer's bundle, whose trustBundle hashes to hash (Digest), holds
	// anchors[state] certificates of each state (one of States), written or found up to date
	// at when.
	ObservePublished(signer, hash string, anchors map[string]int, when time.Time)
	// ObserveWrite: signer's bundle was written, OperationCreated or OperationUpdated.
	ObserveWrite(signer, operation string)
	// ObserveError: an attempt to publish signer's bundle failed, at when, for reason (one of
	// Reasons).
	ObserveError(signer, reason string, when time.Time)
	// ObserveReport: signer's published bundle was reported to the signing server with
	// outcome (one of ReportOutcomes).
	ObserveReport(signer, outcome string)
}

// Operations passed to Metrics.ObserveWrite.
const (
	OperationCreated = "created"
	OperationUpdated = "updated"
)

// Reasons a publication fails, for Metrics.ObserveError and as the reason of the Warning
// Event on the bundle. Each is retried the next period.
const (
	// ReasonAnchorsUnavailable: GetTrustAnchors failed (server unreachable, signer unknown
	// to it, or this client not allowed to use it).
	ReasonAnchorsUnavailable = "TrustAnchorsUnavailable"
	// ReasonInvalidAnchors: the server's anchors are not what a ClusterTrustBundle holds (see
	// Normalize); the bundle keeps its content.
	ReasonInvalidAnchors = "InvalidTrustAnchors"
	// ReasonForbidden: the API server refused, typically for want of the `attest` verb on the
	// signer (certificates.k8s.io signers, resourceNames the signer) or of RBAC on
	// clustertrustbundles.
	ReasonForbidden = "Forbidden"
	// ReasonNotOwned: a bundle of that name exists without the publisher's label; it is left
	// alone.
	ReasonNotOwned = "NotOwned"
	// ReasonAPIError: any other API server error.
	ReasonAPIError = "APIError"
)

// Reasons returns every reason passed to Metrics.ObserveError.
func Reasons() []string {
	return []string{ReasonAnchorsUnavailable, ReasonInvalidAnchors, ReasonForbidden, ReasonNotOwned, ReasonAPIError}
}

// Reasons of the Normal Events on a bundle the publisher wrote.
const (
	EventCreated = "TrustBundleCreated"
	EventUpdated = "TrustBundleUpdated"
)

// syncTimeout bounds one signer's publication (one RPC, a read and at most a few writes).
const syncTimeout = 30 * time.Second

// Options configures a Publisher.
type Options struct {
	// Version is the served ClusterTrustBundle API (Discover); V1 or V1beta1.
	Version APIVersion
	// SignerNames are the signers whose bundles are published; at least one.
	SignerNames []string
	// Period is the time between two passes over the signers; positive.
	Period time.Duration
	// Clock paces the passes and stamps the published metric; nil means the real clock.
	Clock clock.WithTicker
	// Recorder receives the Events on bundles: Normal on a write, Warning when publishing a
	// signer's bundle starts failing or fails for another reason; nil means none.
	Recorder record.EventRecorder
	// Metrics receives every publication, write, failure and report; nil means none.
	Metrics Metrics
	// Reporter receives, after every successful pass for a signer, the bundle as it stands in
	// the cluster (Digest), under ClusterName; nil means no reports.
	Reporter Reporter
	// ClusterName is the name of the cluster as the signing server knows it; required with
	// Reporter.
	ClusterName string
}

// Publisher keeps a signer-linked ClusterTrustBundle per signer equal to the signer's trust
// anchors, and reports each bundle it published or confirmed to the signing server. Run it on
// the leader only.
type Publisher struct {
	bundles  bundles
	anchors  Anchors
	version  APIVersion
	signers  []string
	period   time.Duration
	clock    clock.WithTicker
	recorder record.EventRecorder
	metrics  Metrics
	reporter Reporter
	cluster  string

	// failing is, per signer, the reason its last publication failed; absent after a
	// success. reports is what the reports remember. Only Run's goroutine uses either.
	failing map[string]string
	reports reportState
	// clientCA reads the API server's client CAs for the signers whose trust lives there.
	clientCA *clientCA
}

// New returns a Publisher of opts.SignerNames' anchors, read from anchors, into kube's
// ClusterTrustBundles of opts.Version.
func New(kube kubeclient.Interface, anchors Anchors, opts Options) (*Publisher, error) {
	if len(opts.SignerNames) == 0 {
		return nil, errors.New("creating trust bundle publisher: no signer names")
	}
	if opts.Period <= 0 {
		return nil, fmt.Errorf("creating trust bundle publisher: period %s is not positive", opts.Period)
	}
	if opts.Reporter != nil && opts.ClusterName == "" {
		return nil, errors.New("creating trust bundle publisher: reports need a cluster name")
	}
	b, err := newBundles(kube, opts.Version)
	if err != nil {
		return nil, fmt.Errorf("creating trust bundle publisher: %w", err)
	}
	p := &Publisher{bundles: b, anchors: anchors, version: opts.Version, period: opts.Period,
		signers: append([]string(nil), opts.SignerNames...), clock: opts.Clock, recorder: opts.Recorder,
		metrics: opts.Metrics, reporter: opts.Reporter, cluster: opts.ClusterName, failing: map[string]string{},
		reports: reportState{failing: map[string]string{}}, clientCA: &clientCA{kube: kube}}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.recorder == nil {
		p.recorder = &record.FakeRecorder{}
	}
	if p.metrics == nil {
		p.metrics = noMetrics{}
	}
	return p, nil
}

// HasSynced reports true: the publisher has no cache to fill, and a failure to publish is
// reported by its metric and Events, not by the watcher's readiness.
func (p *Publisher) HasSynced() bool { return true }

// Run publishes every signer's bundle at once and then every period, until ctx is done; it
// returns nil then. A failure is reported and retried the next period, never returned.
func (p *Publisher) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Publishing trust bundles", "signerNames", p.signers, "apiVersion", p.version, "period", p.period,
		"reporting", p.reporter != nil, "clusterName", p.cluster)
	for {
		p.PublishAll(ctx)
		timer := p.clock.NewTimer(p.period)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
	}
}

// PublishAll makes one pass over the signers, in order, and reports each outcome.
func (p *Publisher) PublishAll(ctx context.Context) {
	for _, signer := range p.signers {
		if ctx.Err() != nil {
			return
		}
		p.publishAndReport(ctx, signer)
	}
}

// outcome is one signer's publication: what was written (nothing, OperationCreated or
// OperationUpdated), the bundle as it stands, its anchor count, the anchors as the server
// described them, or why it failed.
type outcome struct {
	operation string
	bundle    *bundle
	anchors   int
	described []signerclient.Anchor
	reason    string
	err       error
}

// publishAndReport publishes signer's bundle and reports the outcome in the log, the metrics
// and Events: a write gets a Normal Event; a failure a Warning Event and an error log when it
// is the first or its reason changed, a verbose log line otherwise. After a success it reports
// the bundle to the signing server (see report).
func (p *Publisher) publishAndReport(ctx context.Context, signer string) {
	logger := klog.FromContext(ctx).WithValues("signerName", signer, "clusterTrustBundle", Name(signer))
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	o := p.publish(syncCtx, signer)
	if o.err != nil {
		if ctx.Err() != nil {
			return // stopping: the failure is the cancellation's
		}
		p.metrics.ObserveError(signer, o.reason, p.clock.Now())
		if p.failing[signer] == o.reason {
			logger.V(1).Info("Publishing the trust bundle still fails", "reason", o.reason, "err", o.err)
			return
		}
		p.failing[signer] = o.reason
		logger.Error(o.err, "Publishing the trust bundle failed; retrying every period", "reason", o.reason, "period", p.period)
		p.recorder.Eventf(p.reference(signer, o.bundle), corev1.EventTypeWarning, o.reason,
			"Publishing the trust anchors of signer %s failed (retrying every %s): %v", signer, p.period, o.err)
		return
	}
	hash, fingerprints := Digest(o.bundle.trustBundle)
	p.metrics.ObservePublished(signer, hash, anchorStates(fingerprints, o.described), p.clock.Now())
	if _, failed := p.failing[signer]; failed {
		delete(p.failing, signer)
		logger.Info("Publishing the trust bundle works again", "anchors", o.anchors)
	}
	switch o.operation {
	case OperationCreated:
		p.metrics.ObserveWrite(signer, o.operation)
		logger.Info("Created the trust bundle", "anchors", o.anchors)
		p.recorder.Eventf(p.reference(signer, o.bundle), corev1.EventTypeNormal, EventCreated,
			"Published %d trust anchor(s) of signer %s", o.anchors, signer)
	case OperationUpdated:
		p.metrics.ObserveWrite(signer, o.operation)
		logger.Info("Updated the trust bundle: the anchors changed or the bundle had been edited", "anchors", o.anchors)
		p.recorder.Eventf(p.reference(signer, o.bundle), corev1.EventTypeNormal, EventUpdated,
			"Rewrote the bundle with the %d trust anchor(s) of signer %s (they changed, or the bundle had been edited)", o.anchors, signer)
	default:
		logger.V(4).Info("The trust bundle is up to date", "anchors", o.anchors)
	}
	p.report(syncCtx, ctx, logger, signer, o.bundle, hash, fingerprints)
	p.reportClientCA(syncCtx, logger, signer)
}

// errNotOwned is the error of a bundle of the publisher's name that it did not create.
var errNotOwned = errors.New("a ClusterTrustBundle of this name exists without the label " +
	ManagedByLabel + "=" + ManagedBy + ": it was not created by signet-watcher and is left alone")

// publish makes signer's bundle hold its current anchors: it reads the anchors, normalizes
// them, and creates the bundle if missing or updates it if its trustBundle or the
// publisher's labels differ. A conflict or a bundle created meanwhile is retried at once
// with a fresh read. The ladder returns early, with the reason, at the first failure.
func (p *Publisher) publish(ctx context.Context, signer string) outcome {
	set, err := p.anchors.TrustAnchorSet(ctx, signer)
	if err != nil {
		return outcome{reason: ReasonAnchorsUnavailable, err: err}
	}
	content, n, err := Normalize(set.PEM)
	if err != nil {
		return outcome{reason: ReasonInvalidAnchors, err: fmt.Errorf("normalizing the anchors of %s: %w", signer, err)}
	}
	name := Name(signer)
	var o outcome
	err = retry.OnError(retry.DefaultRetry, retriable, func() error {
		o = outcome{anchors: n, described: set.Anchors}
		current, err := p.bundles.get(ctx, name)
		if apierrors.IsNotFound(err) {
			o.operation = OperationCreated
			o.bundle, err = p.bundles.create(ctx, &bundle{
				meta:       metav1.ObjectMeta{Name: name, Labels: Labels(signer)},
				signerName: signer, trustBundle: content,
			})
			return err
		}
		if err != nil {
			return err
		}
		o.bundle = current
		if current.meta.Labels[ManagedByLabel] != ManagedBy || current.signerName != signer {
			return errNotOwned
		}
		if upToDate(current, signer, content) {
			return nil
		}
		next := &bundle{meta: *current.meta.DeepCopy(), signerName: signer, trustBundle: content}
		if next.meta.Labels == nil {
			next.meta.Labels = map[string]string{}
		}
		maps.Copy(next.meta.Labels, Labels(signer))
		o.operation = OperationUpdated
		o.bundle, err = p.bundles.update(ctx, next)
		if err != nil {
			o.bundle = current
		}
		return err
	})
	switch {
	case err == nil:
		return o
	case errors.Is(err, errNotOwned):
		o.reason = ReasonNotOwned
	case apierrors.IsForbidden(err):
		o.reason = ReasonForbidden
	default:
		o.reason = ReasonAPIError
	}
	o.operation, o.err = "", fmt.Errorf("publishing %s: %w", name, err)
	return o
}

// retriable: a write lost a race (a conflicting update, or a create after someone else's).
func retriable(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// upToDate reports whether b holds exactly content for signer and carries the publisher's
// labels (other labels do not matter).
func upToDate(b *bundle, signer, content string) bool {
	if b.signerName != signer || b.trustBundle != content {
		return false
	}
	for k, v := range Labels(signer) {
		if b.meta.Labels[k] != v {
			return false
		}
	}
	return true
}

// reference is the object of the Events about signer's bundle: the bundle as read or written
// if known, else its name (Events on cluster-scoped objects land in "default").
func (p *Publisher) reference(signer string, b *bundle) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{APIVersion: "certificates.k8s.io/" + string(p.version), Kind: "ClusterTrustBundle", Name: Name(signer)}
	if b != nil {
		ref.UID, ref.ResourceVersion = b.meta.UID, b.meta.ResourceVersion
	}
	return ref
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) ObservePublished(string, string, map[string]int, time.Time) {}
func (noMetrics) ObserveWrite(string, string)                                {}
func (noMetrics) ObserveError(string, string, time.Time)                     {}
func (noMetrics) ObserveReport(string, string)                               {}
