package signerclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"time"
)

// The kinds of a failed mutual TLS handshake with a signing server, for errors.Is on a
// *HandshakeError and on the error of any call that failed because of one (see
// HandshakeCredentials.Explain; the Client's calls are explained already). Each ErrClient*
// kind is also ErrClientCertificateRejected, each ErrServer* kind also
// ErrServerCertificateRejected.
var (
	// ErrClientCertificateRejected: the server refused the client certificate. It is also the
	// kind of a refusal none of the kinds below names (an alert such as certificate_revoked).
	ErrClientCertificateRejected = errors.New("the signing server refused the client certificate")
	// ErrClientNotConfigured: the certificate chains to the server's client CA, but its
	// identity is not among the server's clients (the server answers bad_certificate).
	ErrClientNotConfigured = errors.New("client identity not configured on the signing server")
	// ErrClientCertificateExpired: the server found the client certificate (or a CA
	// certificate of its chain) expired or not yet valid (alert certificate_expired).
	ErrClientCertificateExpired = errors.New("client certificate expired or not yet valid")
	// ErrClientCAUntrusted: the client certificate is not issued by a CA the server trusts
	// (alert unknown_ca, or certificate_required when crypto/tls withheld the certificate).
	ErrClientCAUntrusted = errors.New("client certificate issued by a CA the signing server does not trust")
	// ErrClientCertificateUsage: the client certificate's extended key usage does not allow
	// client authentication (the server answers bad_certificate).
	ErrClientCertificateUsage = errors.New("client certificate not for client authentication")
	// ErrClientCertificateMissing: the server requires a client certificate and got none
	// (alert certificate_required, the client having none).
	ErrClientCertificateMissing = errors.New("no client certificate")

	// ErrServerCertificateRejected: the client refused the server's certificate.
	ErrServerCertificateRejected = errors.New("the client refused the signing server's certificate")
	// ErrServerCAUntrusted: the server's certificate is not issued by a CA of the client's
	// server CA bundle.
	ErrServerCAUntrusted = errors.New("server certificate issued by a CA the client does not trust")
	// ErrServerNameMismatch: the server's certificate does not hold the name the client
	// verifies (the endpoint's host, or the configured server name).
	ErrServerNameMismatch = errors.New("server certificate does not hold the server name")
	// ErrServerCertificateInvalid: the server's certificate is trusted but expired, not yet
	// valid, not for server authentication, or otherwise invalid.
	ErrServerCertificateInvalid = errors.New("server certificate not valid")
)

// handshakeKinds are the kinds with their condition reason (HandshakeError.Reason) and side.
var handshakeKinds = []struct {
	kind   error
	reason string
	client bool
}{
	{ErrClientCertificateRejected, "ClientCertificateRejected", true},
	{ErrClientNotConfigured, "ClientNotConfigured", true},
	{ErrClientCertificateExpired, "ClientCertificateExpired", true},
	{ErrClientCAUntrusted, "ClientCAUntrusted", true},
	{ErrClientCertificateUsage, "ClientCertificateUsage", true},
	{ErrClientCertificateMissing, "ClientCertificateMissing", true},
	{ErrServerCertificateRejected, "ServerCertificateRejected", false},
	{ErrServerCAUntrusted, "ServerCAUntrusted", false},
	{ErrServerNameMismatch, "ServerNameMismatch", false},
	{ErrServerCertificateInvalid, "ServerCertificateInvalid", false},
}

// HandshakeError is a mutual TLS handshake with a signing server that failed over a
// certificate, named: Kind is one of the Err* kinds, and the message says what failed, with
// the certificate's identity, subject and issuer, and what to do. errors.Is matches Kind and
// its umbrella (ErrClientCertificateRejected or ErrServerCertificateRejected); Unwrap gives
// the TLS error.
type HandshakeError struct {
	// Kind is one of the Err* kinds above.
	Kind error
	// Server is the address of the server (the connection's remote address).
	Server string
	// Alert is the TLS alert the server sent, for a refusal of the client certificate; zero
	// when the client refused the server's certificate.
	Alert tls.AlertError
	// Certificate is the client's leaf for a refusal of the client certificate (nil if
	// unknown), the server's leaf when the client refused the server's certificate.
	Certificate *x509.Certificate
	// Err is the TLS error.
	Err error

	msg string
}

// Error is the message: what failed and what to do.
func (e *HandshakeError) Error() string { return e.msg }

// Unwrap returns the TLS error.
func (e *HandshakeError) Unwrap() error { return e.Err }

// Is reports whether target is e's kind or that kind's umbrella.
func (e *HandshakeError) Is(target error) bool {
	if target == e.Kind {
		return true
	}
	if e.clientSide() {
		return target == ErrClientCertificateRejected
	}
	return target == ErrServerCertificateRejected
}

// Reason is the kind in TitleCase, as Classify reports it: ClientNotConfigured,
// ClientCertificateExpired, ClientCAUntrusted, ClientCertificateUsage,
// ClientCertificateMissing, ClientCertificateRejected, ServerCAUntrusted, ServerNameMismatch,
// ServerCertificateInvalid or ServerCertificateRejected.
func (e *HandshakeError) Reason() string {
	for _, k := range handshakeKinds {
		if k.kind == e.Kind {
			return k.reason
		}
	}
	return "ClientCertificateRejected"
}

func (e *HandshakeError) clientSide() bool {
	for _, k := range handshakeKinds {
		if k.kind == e.Kind {
			return k.client
		}
	}
	return true
}

// TLS alerts (RFC 8446 section 6) a server sends when it refuses the client certificate.
const (
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateRevoked     tls.AlertError = 44
	alertCertificateExpired     tls.AlertError = 45
	alertCertificateUnknown     tls.AlertError = 46
	alertUnknownCA              tls.AlertError = 48
	alertAccessDenied           tls.AlertError = 49
	alertCertificateRequired    tls.AlertError = 116
)

// remoteAlert returns the TLS alert the peer sent, as err carries it. crypto/tls reports a
// received alert as a *net.OpError "remote error" around its unexported alert type (a uint8);
// a tls.AlertError in the chain is taken as well.
func remoteAlert(err error) (tls.AlertError, bool) {
	var a tls.AlertError
	if errors.As(err, &a) {
		return a, true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	v := reflect.ValueOf(op.Err)
	if v.Kind() != reflect.Uint8 || v.Type().PkgPath() != "crypto/tls" {
		return 0, false
	}
	return tls.AlertError(v.Uint()), true
}

// serverRefusal names the refusal of the client certificate leaf (nil if unknown) that the
// server at server sent as the alert in err, judged at now; nil when err carries no alert
// about the client certificate. Two alerts need the client's own leaf to be read:
//   - bad_certificate is what signet-server sends both for a chain that does not allow client
//     authentication and for an identity it does not know (crypto/tls sends it whatever
//     error a VerifyConnection hook returns): a leaf whose extended key usage lacks clientAuth
//     is the first, any other the second;
//   - certificate_required, when the client has a certificate, means crypto/tls did not send
//     it: a client with static Certificates sends none whose issuer is missing from the CAs
//     the server's request names (signetctl's case; signerclient's own credentials always
//     send theirs, and get unknown_ca).
func serverRefusal(server string, err error, leaf *x509.Certificate, now time.Time) *HandshakeError {
	a, ok := remoteAlert(err)
	if !ok {
		return nil
	}
	e := &HandshakeError{Server: server, Alert: a, Certificate: leaf, Err: err}
	who := clientWho(leaf)
	switch {
	case a == alertCertificateRequired && leaf == nil:
		e.Kind = ErrClientCertificateMissing
		e.msg = fmt.Sprintf("signing server %s requires a client certificate and none was presented; configure the client certificate and key", server)
	case a == alertUnknownCA, a == alertCertificateRequired:
		// A client configured with a certificate gets certificate_required when crypto/tls
		// did not send it: the server's request named the CAs it accepts, and not its issuer.
		e.Kind = ErrClientCAUntrusted
		e.msg = fmt.Sprintf("signing server %s does not trust the CA that issued this client certificate (%s); "+
			"the client certificate must be issued by a CA in the server's tls.clientCAFile", server, who)
	case a == alertCertificateExpired:
		e.Kind = ErrClientCertificateExpired
		e.msg = fmt.Sprintf("signing server %s refused the client certificate (%s) as expired or not yet valid: %s", server, who, expiredAdvice(leaf, now))
	case a == alertBadCertificate, a == alertAccessDenied:
		if usages := extKeyUsages(leaf); a == alertBadCertificate && !allowsClientAuth(leaf) {
			e.Kind = ErrClientCertificateUsage
			e.msg = fmt.Sprintf("signing server %s refused the client certificate (%s): its extended key usage (%s) does not include client authentication; "+
				"issue the client certificate with extended key usage clientAuth", server, who, usages)
			break
		}
		e.Kind = ErrClientNotConfigured
		e.msg = fmt.Sprintf("signing server %s refused client identity %s (%s) with %q: that identity is not among the server's clients "+
			"(the server's log names the reason); add it to the server's clients, or use a client certificate whose identity "+
			"(first URI SAN, else subject CN) is listed there", server, quoteIdentity(leaf), describeCertificate(leaf), strings.TrimPrefix(a.Error(), "tls: "))
	case a == alertUnsupportedCertificate, a == alertCertificateRevoked, a == alertCertificateUnknown:
		e.Kind = ErrClientCertificateRejected
		e.msg = fmt.Sprintf("signing server %s refused the client certificate (%s) with %q; the server's log names the reason", server, who, strings.TrimPrefix(a.Error(), "tls: "))
	default:
		return nil
	}
	return e
}

// expiredAdvice says why a server may have found leaf expired at now, and what to do.
func expiredAdvice(leaf *x509.Certificate, now time.Time) string {
	switch {
	case leaf == nil:
		return "renew the client certificate, or check the clocks of this host and the server"
	case now.After(leaf.NotAfter):
		return "it expired at " + stamp(leaf.NotAfter) + "; renew the client certificate"
	case now.Before(leaf.NotBefore):
		return "it is not valid before " + stamp(leaf.NotBefore) + "; use a certificate valid now, or check the clock of the CA that issued it"
	}
	return fmt.Sprintf("here it is valid from %s to %s, so the server's clock is off or a CA certificate of its chain has expired "+
		"(the server's log names the reason)", stamp(leaf.NotBefore), stamp(leaf.NotAfter))
}

// clientRefusal names the client's own refusal of the server's certificate, err from the
// handshake with the server at server; nil when err is not one.
func clientRefusal(server string, err error, now time.Time) *HandshakeError {
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		return nil
	}
	var leaf *x509.Certificate
	if len(cve.UnverifiedCertificates) > 0 {
		leaf = cve.UnverifiedCertificates[0]
	}
	e := &HandshakeError{Server: server, Certificate: leaf, Err: err}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(cve.Err, &unknown):
		e.Kind = ErrServerCAUntrusted
		e.msg = fmt.Sprintf("the certificate of signing server %s (%s) is not issued by a CA in the client's server CA bundle; "+
			"add the CA that issued it to that bundle, or check that %s is the signing server", server, describeCertificate(leaf), server)
	case errors.As(cve.Err, &hostname):
		e.Kind = ErrServerNameMismatch
		e.msg = fmt.Sprintf("the certificate of signing server %s does not hold %q, the server name the client verifies (it holds %s); "+
			"set the client's server name to one of those, or dial an address the certificate names", server, hostname.Host, certificateNames(hostname.Certificate))
	case errors.As(cve.Err, &invalid) && invalid.Reason == x509.Expired && leaf != nil && now.After(leaf.NotAfter):
		e.Kind = ErrServerCertificateInvalid
		e.msg = fmt.Sprintf("the certificate of signing server %s (%s) expired at %s; renew the server's TLS certificate (or fix this host's clock)", server, describeCertificate(leaf), stamp(leaf.NotAfter))
	case errors.As(cve.Err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		e.Kind = ErrServerCertificateInvalid
		e.msg = fmt.Sprintf("the certificate of signing server %s (%s) is not for server authentication (extended key usage %s); "+
			"the server's TLS certificate needs extended key usage serverAuth", server, describeCertificate(leaf), extKeyUsages(leaf))
	default:
		e.Kind = ErrServerCertificateInvalid
		e.msg = fmt.Sprintf("the certificate of signing server %s (%s) is not valid: %v", server, describeCertificate(leaf), cve.Err)
	}
	return e
}

// identityOf is the client identity a certificate carries as the server reads it
// (server/access.Identity): its first URI SAN, else its subject common name.
func identityOf(cert *x509.Certificate) string {
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String()
	}
	return cert.Subject.CommonName
}

// quoteIdentity is the identity of cert, quoted, or "(unknown)".
func quoteIdentity(cert *x509.Certificate) string {
	if cert == nil {
		return "(unknown)"
	}
	return fmt.Sprintf("%q", identityOf(cert))
}

// clientWho names the client certificate in a message: its identity, subject and serial.
func clientWho(cert *x509.Certificate) string {
	if cert == nil {
		return "identity unknown"
	}
	return "identity " + quoteIdentity(cert) + ", " + describeCertificate(cert)
}

// describeCertificate is the subject, issuer and serial of cert, for a message.
func describeCertificate(cert *x509.Certificate) string {
	if cert == nil {
		return "certificate unknown"
	}
	return fmt.Sprintf("subject %s, issuer %s, serial %s", cert.Subject, cert.Issuer, hex.EncodeToString(cert.SerialNumber.Bytes()))
}

// certificateNames lists the DNS names and IP addresses cert holds.
func certificateNames(cert *x509.Certificate) string {
	if cert == nil {
		return "no name known"
	}
	var names []string
	for _, n := range cert.DNSNames {
		names = append(names, "DNS:"+n)
	}
	for _, ip := range cert.IPAddresses {
		names = append(names, "IP:"+ip.String())
	}
	if len(names) == 0 {
		return "no DNS or IP SAN"
	}
	return strings.Join(names, ", ")
}

// allowsClientAuth reports whether cert's extended key usage allows client authentication
// (no extended key usage at all allows any); true for a nil cert, which is not judged.
func allowsClientAuth(cert *x509.Certificate) bool {
	if cert == nil || (len(cert.ExtKeyUsage) == 0 && len(cert.UnknownExtKeyUsage) == 0) {
		return true
	}
	for _, u := range cert.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// extKeyUsages names cert's extended key usages.
func extKeyUsages(cert *x509.Certificate) string {
	if cert == nil {
		return "unknown"
	}
	names := map[x509.ExtKeyUsage]string{
		x509.ExtKeyUsageAny: "any", x509.ExtKeyUsageServerAuth: "serverAuth", x509.ExtKeyUsageClientAuth: "clientAuth",
		x509.ExtKeyUsageCodeSigning: "codeSigning", x509.ExtKeyUsageEmailProtection: "emailProtection",
		x509.ExtKeyUsageTimeStamping: "timeStamping", x509.ExtKeyUsageOCSPSigning: "OCSPSigning",
	}
	var out []string
	for _, u := range cert.ExtKeyUsage {
		if n, ok := names[u]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("usage %d", u))
		}
	}
	for _, oid := range cert.UnknownExtKeyUsage {
		out = append(out, oid.String())
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// stamp formats t for a message.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
