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
