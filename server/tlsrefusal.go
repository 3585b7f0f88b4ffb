package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/credentials"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/metrics"
)

// How the server tells refused TLS clients apart, and why it does not verify client chains
// itself.
//
// Client chains are verified by crypto/tls (tls.RequireAndVerifyClientCert against the client
// CA pool, extended key usage clientAuth), as before, and the identity is then authorized in
// VerifyConnection. Verifying by hand (tls.RequireAnyClientCert and x509 Verify in a hook)
// would see every failure, but crypto/tls then leaves ConnectionState.VerifiedChains empty,
// and the client identity is read from VerifiedChains everywhere: access.Authorizer, the gRPC
// service (signerapi, from the peer's credentials.TLSInfo) and the webhook
// (r.TLS.VerifiedChains). Keeping crypto/tls's verification keeps the server exactly as
// strict as it was and every identity read where it was; crypto/tls also already answers
// each failure with its own alert, which the client names (signerclient.HandshakeError):
// certificate_required (none presented), unknown_ca (self-signed, another CA),
// certificate_expired (expired or not yet valid) and bad_certificate (a usage without client
// authentication; an identity VerifyConnection refuses, since crypto/tls sends
// bad_certificate whatever error that hook returns, a tls.AlertError included).
//
// A failed verification never reaches a hook of the tls.Config, so it is read from the
// handshake's error instead: a *tls.CertificateVerificationError carries the certificates
// and the x509 error (refusalReason). Both listeners hand every failed handshake to
// handshakeFailed: the gRPC listener's credentials (refusingCreds), and the webhook's
// listener, which runs the handshakes itself rather than leave them to net/http (so no
// "http: TLS handshake error" line either; webhook.Options.HandshakeFailed). A refusal of
// VerifyConnection (identity_not_configured) is reported by the hook, which sees the
// certificate, and is not reported again from the handshake's error (reportedError).

// Rate of the refusal log: at most refusalLogBurst lines at once, refusalLogPerSecond a
// second after that; a line logged after some were left out says how many ("suppressed").
// signet_server_tls_client_refused_total counts them all.
const (
	refusalLogBurst     = 10
	refusalLogPerSecond = 2
)

// refusalLog reports TLS clients refused for their certificate: a WARN line "refused a TLS
// client" (rate-limited) and signet_server_tls_client_refused_total{reason}. It is safe for
// concurrent use.
type refusalLog struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	mu         sync.Mutex
	limiter    *rate.Limiter
	suppressed int
}

// newRefusalLog returns a refusalLog writing to log and m, timed by now.
func newRefusalLog(log *slog.Logger, m *metrics.Metrics, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, metrics: m, now: now, limiter: rate.NewLimiter(refusalLogPerSecond, refusalLogBurst)}
}

// refused counts one client at remote refused for reason (a metrics.TLSRefused* value),
// with its leaf certificate (nil when it sent none) and the error, and logs it unless the
// rate is exceeded. The line names the certificate by identity, subject, issuer, serial and
// NotAfter, never the certificate itself.
func (r *refusalLog) refused(remote net.Addr, reason string, leaf *x509.Certificate, err error) {
	r.metrics.ObserveTLSClientRefused(reason)
	r.mu.Lock()
	if !r.limiter.AllowN(r.now(), 1) {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	attrs := []any{"remote_address", addrString(remote), "reason", reason}
	if leaf != nil {
		attrs = append(attrs, "identity", access.Identity(leaf), "subject", leaf.Subject.String(), "issuer", leaf.Issuer.String(),
			"serial", hex.EncodeToString(leaf.SerialNumber.Bytes()), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	attrs = append(attrs, "error", err.Error())
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	r.log.Warn("refused a TLS client", attrs...)
}

// handshakeFailed reports a failed server handshake with remote: a refusal of the client's
// certificate goes to refused, unless VerifyConnection reported it already (reportedError);
// any other failure (the client gave up, did not trust this server, or spoke no TLS) is
// logged at debug level only.
func (r *refusalLog) handshakeFailed(remote net.Addr, err error) {
	var reported reportedError
	if errors.As(err, &reported) {
		return
	}
	reason, leaf, ok := refusalReason(err, r.now())
	if !ok {
		r.log.Debug("TLS handshake failed", "remote_address", addrString(remote), "error", err.Error())
		return
	}
	r.refused(remote, reason, leaf, err)
}

// refusalReason names why crypto/tls refused the client's certificate in a server handshake
// that failed with err, judged at now, and returns the client's leaf (nil if none was sent);
// ok is false when err is not such a refusal.
func refusalReason(err error, now time.Time) (reason string, leaf *x509.Certificate, ok bool) {
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		// crypto/tls's own words when ClientAuth requires a certificate and none came.
		if strings.Contains(err.Error(), "client didn't provide a certificate") {
			return metrics.TLSRefusedNoCertificate, nil, true
		}
		return "", nil, false
	}
	if len(cve.UnverifiedCertificates) > 0 {
		leaf = cve.UnverifiedCertificates[0]
	}
	var (
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.As(cve.Err, &unknown):
		return metrics.TLSRefusedUnknownCA, leaf, true
	case errors.As(cve.Err, &invalid) && invalid.Reason == x509.Expired:
		if invalid.Cert != nil && now.Before(invalid.Cert.NotBefore) {
			return metrics.TLSRefusedNotYetValid, leaf, true
		}
		return metrics.TLSRefusedExpired, leaf, true
	case errors.As(cve.Err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return metrics.TLSRefusedWrongUsage, leaf, true
	}
	return metrics.TLSRefusedInvalid, leaf, true
}

// reportedError is a refusal VerifyConnection has reported already.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }
func (e reportedError) Unwrap() error { return e.err }

// addrString is a's string, or "" for nil.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// refusingCreds are the gRPC listener's TLS credentials, reporting every failed handshake to
// refusals.
type refusingCreds struct {
	credentials.TransportCredentials
	refusals *refusalLog
}

// ServerHandshake runs the TLS handshake and reports its failure.
func (c refusingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil && c.refusals != nil {
		c.refusals.handshakeFailed(raw.RemoteAddr(), err)
	}
	return conn, info, err
}

// Clone returns a copy of c reporting to the same log.
func (c refusingCreds) Clone() credentials.TransportCredentials {
	return refusingCreds{TransportCredentials: c.TransportCredentials.Clone(), refusals: c.refusals}
}
