package trustbundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
)

// Reporter tells the signing server which bundle of a signer the cluster holds
// (*signerclient.Client).
type Reporter interface {
	ReportTrustBundle(ctx context.Context, signerName, cluster, bundleHash string, fingerprints []string) error
}

// Outcomes of a report, for Metrics.ObserveReport.
const (
	// ReportReported: the server took the report.
	ReportReported = "reported"
	// ReportRefused: the server refused it (NotFound, PermissionDenied, InvalidArgument,
	// FailedPrecondition: unknown signer, client not allowed, malformed, or a cluster name the
	// server does not list for the signer). Retried every period.
	ReportRefused = "refused"
	// ReportFailed: the server could not be asked or did not answer (Unavailable, a deadline,
	// anything else). Retried every period.
	ReportFailed = "failed"
	// ReportUnsupported: the server does not implement ReportTrustBundle (an older server).
	// Reports pause for UnsupportedRetry.
	ReportUnsupported = "unsupported"
)

// ReportOutcomes returns every outcome passed to Metrics.ObserveReport.
func ReportOutcomes() []string {
	return []string{ReportReported, ReportRefused, ReportFailed, ReportUnsupported}
}

// Reasons of the Warning Events on a bundle whose report the server did not take.
const (
	EventReportRefused = "TrustBundleReportRefused"
	EventReportFailed  = "TrustBundleReportFailed"
)

// States of the anchors of a published bundle, for Metrics.ObservePublished: those of
// signerclient, and StateUnknown for a certificate the server did not describe (a server
// older than the anchor states).
const (
	StateActive  = signerclient.AnchorActive
	StateStaged  = signerclient.AnchorStaged
	StateRetired = signerclient.AnchorRetired
	StateUnknown = signerclient.AnchorUnknown
)

// States returns every state passed to Metrics.ObservePublished.
func States() []string { return []string{StateActive, StateStaged, StateRetired, StateUnknown} }

// UnsupportedRetry is how long reports pause after the server answered Unimplemented: an
// older server is asked again this rarely, so that reporting starts by itself once it is
// upgraded, without a line in the log each time.
const UnsupportedRetry = 10 * time.Minute

// reportState is what the reports of one Publisher remember. Only Run's goroutine uses it.
type reportState struct {
	// failing is, per signer, the reason its last report failed; absent after a success.
	failing map[string]string
	// unsupported is set once the server answered Unimplemented, until a report is taken.
	unsupported bool
	// pausedUntil is when reports resume after an Unimplemented.
	pausedUntil time.Time
}

// Digest returns the lower-case hex SHA-256 of trustBundle, the hash reported to the server,
// and that of the DER of each CERTIFICATE block in it, in order: the fingerprints of its
// anchors.
func Digest(trustBundle string) (hash string, fingerprints []string) {
	rest := []byte(trustBundle)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			fp := sha256.Sum256(block.Bytes)
			fingerprints = append(fingerprints, hex.EncodeToString(fp[:]))
		}
	}
	return signetv1.BundleHash(trustBundle), fingerprints
}

// anchorStates counts the anchors of fingerprints by their state in described (the server's
// description, by fingerprint): StateActive, StateStaged or StateRetired, else StateUnknown.
func anchorStates(fingerprints []string, described []signerclient.Anchor) map[string]int {
	states := make(map[string]string, len(described))
	for _, a := range described {
		states[a.Fingerprint] = a.State
	}
	counts := map[string]int{}
	for _, fp := range fingerprints {
		switch s := states[fp]; s {
		case StateActive, StateStaged, StateRetired:
			counts[s]++
		default:
			counts[StateUnknown]++
		}
	}
	return counts
}

// report tells the server, under the publisher's cluster name, that signer's bundle b hashes
// to hash and holds the anchors of fingerprints, and reports the outcome in the metrics, the
// log and Events. A report never changes the bundle. A failure gets an error log and a
// Warning Event on the bundle when it is the first or its reason changed, a verbose log line
// otherwise; it is retried the next period. Unimplemented (an older server) is logged once,
// without an Event, and pauses every signer's reports for UnsupportedRetry. Nothing is
// reported without a Reporter, and nothing is logged when parent ends (stopping).
func (p *Publisher) report(ctx, parent context.Context, logger klog.Logger, signer string, b *bundle, hash string, fingerprints []string) {
	r := &p.reports
	if p.reporter == nil || p.clock.Now().Before(r.pausedUntil) {
		return
	}
	logger = logger.WithValues("clusterName", p.cluster, "bundleHash", hash)
	err := p.reporter.ReportTrustBundle(ctx, signer, p.cluster, hash, fingerprints)
	if err != nil && parent.Err() != nil {
		return
	}
	outcome := reportOutcome(err)
	p.metrics.ObserveReport(signer, outcome)
	switch outcome {
	case ReportReported:
		if r.unsupported {
			r.unsupported = false
			logger.Info("The signing server takes trust bundle reports now")
		}
		if _, failed := r.failing[signer]; failed {
			delete(r.failing, signer)
			logger.Info("Reporting the trust bundle to the signing server works again")
		}
		logger.V(4).Info("Reported the trust bundle to the signing server", "anchors", len(fingerprints))
	case ReportUnsupported:
		r.pausedUntil = p.clock.Now().Add(UnsupportedRetry)
		if r.unsupported {
			logger.V(1).Info("The signing server still does not take trust bundle reports", "retryIn", UnsupportedRetry)
			return
		}
		r.unsupported = true
		logger.Info("The signing server does not take trust bundle reports (ReportTrustBundle is unimplemented there): "+
			"publishing goes on, but the server cannot see this cluster's bundles, so it cannot activate a staged CA on "+
			"their proof of propagation; asking again in a while", "retryIn", UnsupportedRetry, "err", err)
	default:
		reason := reportReason(err)
		if r.failing[signer] == reason {
			logger.V(1).Info("Reporting the trust bundle to the signing server still fails", "reason", reason, "err", err)
			return
		}
		r.failing[signer] = reason
		logger.Error(err, "Reporting the trust bundle to the signing server failed; the bundle stays published, "+
			"the report is retried every period", "reason", reason, "outcome", outcome, "period", p.period)
		eventReason := EventReportFailed
		if outcome == ReportRefused {
			eventReason = EventReportRefused
		}
		p.recorder.Eventf(p.reference(signer, b), corev1.EventTypeWarning, eventReason,
			"The signing server did not take the report of this bundle as published in cluster %q (%s; retrying every %s; "+
				"a staged CA of signer %s is not activated before it does): %v", p.cluster, reason, p.period, signer, err)
	}
}

// reportOutcome classifies a report's error by its gRPC code.
func reportOutcome(err error) string {
	if err == nil {
		return ReportReported
	}
	switch status.Code(err) {
	case codes.Unimplemented:
		return ReportUnsupported
	case codes.NotFound, codes.PermissionDenied, codes.InvalidArgument, codes.FailedPrecondition,
		codes.Unauthenticated, codes.OutOfRange, codes.AlreadyExists:
		return ReportRefused
	}
	return ReportFailed
}

// reportReason names a report's failure: the server's ErrorInfo reason in TitleCase
// (RotationRefused, SignerNotAllowed, …), else its gRPC code.
func reportReason(err error) string {
	reason, _, _ := signerclient.Classify(err)
	if reason == signerclient.ReasonSignerRefused || reason == signerclient.ReasonSignerUnavailable {
		return status.Code(err).String()
	}
	return reason
}
