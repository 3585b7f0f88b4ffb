package signetv1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"strings"
	"unicode"
)

// The wire contract beyond the messages: what a client may rely on in the errors and health
// of a signet.v1 server. Hand-written; the rest of the package is generated from signet.proto.

// ErrorDomain is the google.rpc.ErrorInfo domain of every error a signet.v1 server returns.
// An ErrorInfo of this domain carries ReasonName of an ErrorReason.
const ErrorDomain = "signet.dev"

// HealthService is the name under which the server reports its readiness in the standard
// grpc.health.v1 service: SERVING while it can record decisions, NOT_SERVING otherwise. It is
// SignerService's full name (TestHealthServiceIsTheServiceName), a constant so that a client's
// service config can embed it.
const HealthService = "signet.v1.SignerService"

// ClientVersionHeader is the gRPC metadata key under which a client sends its own version
// (internal/version's Version: v0.3.1, or a development build's) on every call; signerclient
// sends it on every call, and signetctl on every call but GetServerInfo (so that `signetctl
// version` always answers). Before any signet.v1 call the server checks it against its skew policy
// (docs/compatibility.md: clients of its own minor version and of the one before it, never
// newer ones; a development build on either side is accepted) and refuses a client outside it
// with FAILED_PRECONDITION and the ErrorInfo reason ReasonUnsupportedClientVersion. A call
// without the header (grpcurl, a client in another language) is not checked.
const ClientVersionHeader = "signet-client-version"

// ReasonUnsupportedClientVersion is the ErrorInfo reason (domain ErrorDomain) of a call
// refused because the client's version (ClientVersionHeader) is outside the server's skew
// policy; the ErrorInfo's metadata name both versions (server_version, client_version) and the
// message says which versions the server accepts. It is no ErrorReason: the gRPC door answers
// it before any decision, so nothing is recorded in the ledger. It is not final (FinalName):
// the request is fine, and upgrading the client or the server lets it through, so a forwarder
// keeps its objects waiting rather than failing them.
const ReasonUnsupportedClientVersion = "UNSUPPORTED_CLIENT_VERSION"

// reasonPrefix is the prefix of every ErrorReason's enum name.
const reasonPrefix = "ERROR_REASON_"

// ReasonName is the ErrorInfo reason of r: its enum name without ERROR_REASON_, e.g.
// "MALFORMED_REQUEST".
func ReasonName(r ErrorReason) string {
	return strings.TrimPrefix(r.String(), reasonPrefix)
}

// ParseReason returns the ErrorReason whose ReasonName (or full enum name) is name, and
// whether there is one.
func ParseReason(name string) (ErrorReason, bool) {
	v, ok := ErrorReason_value[reasonPrefix+strings.TrimPrefix(name, reasonPrefix)]
	return ErrorReason(v), ok
}

// finality is the one decision, for every ErrorReason, of whether it is final: true when a
// retry of the same request can never succeed (the request, the caller's rights or what it
// holds must change first), false when a later try, on this server or another, can. The
// server's answer table (server/wire) chooses each reason's gRPC code and Retry-After from
// it, and clients (signerclient.Classify) fail or retry an object by it. Every ErrorReason
// has an entry (TestFinalDecidesEveryReason).
var finality = map[ErrorReason]bool{
	// Never sent; decides nothing (FinalName reports it unknown, so a client falls back on
	// the gRPC code). Not final: nothing is known against the request.
	ErrorReason_ERROR_REASON_UNSPECIFIED: false,
	// The PKCS#10 request or another field cannot be parsed: the same bytes never will.
	ErrorReason_ERROR_REASON_MALFORMED_REQUEST: true,
	// The request's signature does not verify (no proof of possession): it never will.
	ErrorReason_ERROR_REASON_INVALID_SIGNATURE: true,
	// The key type or size is not accepted: the requester must use another key.
	ErrorReason_ERROR_REASON_UNSUPPORTED_KEY: true,
	// The signer's policy refuses the request: the request must change.
	ErrorReason_ERROR_REASON_POLICY_VIOLATION: true,
	// The server does not serve this signer name. Not final: it is the caller's configuration
	// against the server's, not the request, and a fix of either (a roll-out in progress)
	// lets the same request through; a forwarder waits, within its object's deadline.
	ErrorReason_ERROR_REASON_UNKNOWN_SIGNER: false,
	// The caller may not use this signer: not final, as UNKNOWN_SIGNER.
	ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED: false,
	// The server failed; the request may succeed on retry.
	ErrorReason_ERROR_REASON_INTERNAL: false,
	// A rate limit is exhausted; it refills, and a retry later succeeds.
	ErrorReason_ERROR_REASON_RATE_LIMITED: false,
	// The object UID was already used with a different request: the same key gets the same
	// refusal for ever.
	ErrorReason_ERROR_REASON_IDEMPOTENCY_CONFLICT: true,
	// The certificate the request would produce fails the lint gate: it would again.
	ErrorReason_ERROR_REASON_LINT_FAILED: true,
	// The decision could not be recorded durably; the ledger recovers and a retry succeeds.
	ErrorReason_ERROR_REASON_LEDGER_UNAVAILABLE: false,
	// The request carries unverified user annotations the signer does not recognise.
	ErrorReason_ERROR_REASON_UNKNOWN_ANNOTATION: true,
	// The CA key cannot be used now; the server re-opens it by itself.
	ErrorReason_ERROR_REASON_KEY_UNAVAILABLE: false,
	// The call needs the admin role, which the caller does not have: not final, as
	// UNKNOWN_SIGNER (a grant cures it).
	ErrorReason_ERROR_REASON_ADMIN_REQUIRED: false,
	// The rotation step cannot be taken in the signer's current state: the same call is
	// refused until that state changes (the message says what is missing and, when time alone
	// will fix it, from when); an operator takes the step again then, nothing retries it.
	ErrorReason_ERROR_REASON_ROTATION_REFUSED: true,
	// The CA given to stage cannot be used: another CA must be given.
	ErrorReason_ERROR_REASON_INVALID_CA: true,
	// This server's ledger needs an operator and a restart; the request itself is fine, and
	// another server, or this one once restarted, can take it.
	ErrorReason_ERROR_REASON_LEDGER_RESTART_REQUIRED: false,
	// Nothing the caller may see matches what it asked for: asking again finds nothing more.
	ErrorReason_ERROR_REASON_NOT_FOUND: true,
	// The record exists and a checkpoint covers it within a second: a retry succeeds.
	ErrorReason_ERROR_REASON_CHECKPOINT_PENDING: false,
	// The caller holds a checkpoint larger than the server's latest: a ledger that lost
	// records is a finding to audit, not a wait.
	ErrorReason_ERROR_REASON_LEDGER_BEHIND: true,
	// The TPM evidence fails a check, or was already used; evidence is single-use, so the
	// node must attest again and send a new request.
	ErrorReason_ERROR_REASON_ATTESTATION_FAILED: true,
}

// Final reports whether r is final: a retry of the same request can never succeed, so a
// client should give up on it (a watcher marks the object Failed or Denied) rather than retry.
// It is false for the transient reasons (RATE_LIMITED, INTERNAL, LEDGER_UNAVAILABLE,
// KEY_UNAVAILABLE, LEDGER_RESTART_REQUIRED, CHECKPOINT_PENDING), for the reasons about the
// caller's configuration rather than the request (UNKNOWN_SIGNER, SIGNER_NOT_ALLOWED,
// ADMIN_REQUIRED: a configuration change lets the same request through), for UNSPECIFIED and
// for a value that is no ErrorReason. The decision of each reason, with why, is the table finality.
func Final(r ErrorReason) bool { return finality[r] }

// FinalName is Final for an ErrorInfo reason (ReasonName, with or without ERROR_REASON_):
// final is Final of the reason, and known whether name is an ErrorReason that decides
// anything. known is false for a name that is no ErrorReason (a newer server's, another
// domain's) and for UNSPECIFIED, which no server sends: a client then judges by the gRPC code.
// ReasonUnsupportedClientVersion, the one reason of the contract that is no ErrorReason, is
// known and not final.
func FinalName(name string) (final, known bool) {
	if strings.TrimPrefix(name, reasonPrefix) == ReasonUnsupportedClientVersion {
		return false, true
	}
	r, ok := ParseReason(name)
	if !ok || r == ErrorReason_ERROR_REASON_UNSPECIFIED {
		return false, false
	}
	final, known = finality[r]
	return final, known
}

// ConditionReason converts an ErrorInfo reason (UPPER_SNAKE, with or without ERROR_REASON_)
// to the TitleCase form Kubernetes condition reasons take: "UNSUPPORTED_KEY" →
// "UnsupportedKey". Any character other than an ASCII letter or digit separates words and is
// dropped.
func ConditionReason(reason string) string {
	var b strings.Builder
	startWord := true
	for _, r := range strings.TrimPrefix(reason, reasonPrefix) {
		isAlnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
		switch {
		case !isAlnum:
			startWord = true
		case startWord:
			b.WriteRune(unicode.ToUpper(r))
			startWord = false
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// CanonicalBundle is a trust bundle as a ClusterTrustBundle holds it, and as bundle hashes
// (GetTrustAnchorsResponse.bundle_hash, ReportTrustBundleRequest.bundle_hash) are computed:
// the DER certificates ders, each once, sorted by their bytes, PEM-encoded without headers.
func CanonicalBundle(ders [][]byte) string {
	sorted := slices.Clone(ders)
	slices.SortFunc(sorted, bytes.Compare)
	sorted = slices.CompactFunc(sorted, bytes.Equal)
	var out bytes.Buffer
	for _, der := range sorted {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: der}) // a bytes.Buffer does not fail
	}
	return out.String()
}

// BundleHash is the lower-case hex SHA-256 of a bundle's text: of CanonicalBundle for the
// server, of a ClusterTrustBundle's spec.trustBundle for a watcher's report. The two are equal
// when the cluster publishes exactly the server's anchors.
func BundleHash(bundle string) string {
	sum := sha256.Sum256([]byte(bundle))
	return hex.EncodeToString(sum[:])
}

// Where a signer's trust lives in a cluster, for the rotation gate: which publication of a
// staged CA proves that the cluster's relying parties trust it. A ClusterTrustBundle
// (TrustSourceBundle) for every signer but the kubernetes.io ones whose relying party is the
// API server itself: the client signers' certificates are trusted through kube-apiserver's
// --client-ca-file, which the API server publishes as client-ca-file in the ConfigMap
// kube-system/extension-apiserver-authentication (TrustSourceAPIServerClientCA, reported by
// the watcher); kubelet-serving's through --kubelet-certificate-authority, which nothing
// publishes (TrustSourceKubeletCA, confirmed by an admin).
const (
	TrustSourceBundle            = ""
	TrustSourceAPIServerClientCA = "apiserver-client-ca"
	TrustSourceKubeletCA         = "kubelet-certificate-authority"
)

// TrustSource returns where the trust of signerName lives (the TrustSource constants).
func TrustSource(signerName string) string {
	switch signerName {
	case "kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet":
		return TrustSourceAPIServerClientCA
	case "kubernetes.io/kubelet-serving":
		return TrustSourceKubeletCA
	}
	return TrustSourceBundle
}
