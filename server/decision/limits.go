package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/signet-pki/signet/server/issuance"
)

// The limits on what a caller may send, checked at the edge of the core: after the
// client's own rate limit, before the signer is looked up. A request over one is refused
// with MALFORMED_REQUEST naming the field and the limit, and recorded (with the caller's
// strings clipped, see clip). They sit well above anything a Kubernetes client sends, and
// where Kubernetes has a limit of its own for the field they are that limit; the gRPC
// receive limit (server.maxRecvMsgSize, 4 MiB) sits above the largest object an apiserver
// can store (etcd's 1.5 MiB), so that every request an apiserver can hold gets an answer
// from Signet and not a transport error. docs/security.md lists them.
const (
	// MaxSignerNameBytes is Kubernetes' own limit on a signer name (ValidateSignerName).
	MaxSignerNameBytes = 571
	// MaxObjectUIDBytes bounds object.uid, the idempotency key; it must also be printable
	// ASCII. Kubernetes UIDs are 36-byte UUIDs.
	MaxObjectUIDBytes = 128
	// MaxObjectNameBytes is Kubernetes' limit on an object name (a DNS subdomain).
	MaxObjectNameBytes = 253
	// MaxUserStringBytes bounds requester.username and requester.uid.
	MaxUserStringBytes = 1024
	// MaxGroups bounds requester.groups, each group at most MaxUserStringBytes.
	MaxGroups = 1024
	// MaxExtraKeys bounds the keys of requester.extra.
	MaxExtraKeys = 64
	// MaxRequesterAttributeBytes bounds the groups, extra keys and extra values together.
	MaxRequesterAttributeBytes = 64 << 10
	// MaxUsages bounds the usages of a CertificateSigningRequest, each at most
	// MaxUsageBytes. Kubernetes defines 24 usages.
	MaxUsages     = 32
	MaxUsageBytes = 64
	// MaxCSRBytes bounds the PEM of a CertificateSigningRequest's request. A kubelet's is
	// about 1 KiB; one with an RSA-4096 key and issuance.MaxSANs names fits.
	MaxCSRBytes = 64 << 10
	// MaxPodKeyFieldBytes bounds a PodCertificateRequest's pkix_public_key,
	// proof_of_possession and stub_pkcs10_request: Kubernetes' own limit for each
	// (MaxPKIXPublicKeySize, MaxProofOfPossessionSize, MaxStubPKCS10RequestSize).
	MaxPodKeyFieldBytes = 10 << 10
	// MaxNamespaceBytes is Kubernetes' limit on a namespace name (a DNS label).
	MaxNamespaceBytes = 63
	// MaxPodUIDBytes is Kubernetes' limit on the pod, service account and node UIDs of a
	// PodCertificateRequest.
	MaxPodUIDBytes = 128
	// MaxAnnotationBytes is Kubernetes' limit on annotations (TotalAnnotationSizeLimitB),
	// which it applies to unverified_user_annotations: keys and values together.
	MaxAnnotationBytes = 256 << 10
	// MaxNodeAddresses bounds the node addresses forwarded with a request, each field at most
	// MaxNodeAddressBytes. A Node has a handful.
	MaxNodeAddresses    = 64
	MaxNodeAddressBytes = 256
)

// malformed is the MALFORMED_REQUEST refusal of a field over its limit.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", issuance.ErrMalformedRequest, fmt.Sprintf(format, args...))
}

// maxBytes refuses a string or byte field longer than limit.
func maxBytes[T ~string | ~[]byte](field string, v T, limit int) error {
	if len(v) > limit {
		return malformed("%s is %d bytes long, more than the %d Signet accepts", field, len(v), limit)
	}
	return nil
}

// checkCommon checks the fields every signing call has: the signer name and the object.
func checkCommon(signer string, object Object) error {
	if signer == "" {
		return malformed("signer_name is required")
	}
	if err := maxBytes("signer_name", signer, MaxSignerNameBytes); err != nil {
		return err
	}
	if err := printable("signer_name", signer); err != nil {
		return err
	}
	uid := object.UID
	if err := maxBytes("object.uid", uid, MaxObjectUIDBytes); err != nil {
		return err
	}
	for i := 0; i < len(uid); i++ {
		if uid[i] < 0x21 || uid[i] > 0x7e {
			return malformed("object.uid must be printable ASCII without spaces (byte %d is 0x%02x)", i, uid[i])
		}
	}
	if err := maxBytes("object.name", object.Name, MaxObjectNameBytes); err != nil {
		return err
	}
	return printable("object.name", object.Name)
}

// printable refuses a string holding a control character (C0, DEL or C1). Kubernetes object
// names, UIDs, user names, groups and extra values never hold one (the apiserver validates
// names as DNS labels and subdomains, and authenticators produce user info from tokens and
// certificates that cannot carry them); a request that does was forged or broken on the way,
// and would carry an escape sequence into logs and tools that show it.
func printable(field, v string) error {
	i := strings.IndexFunc(v, unicode.IsControl)
	if i < 0 {
		return nil
	}
	r, _ := utf8.DecodeRuneInString(v[i:])
	return malformed("%s holds the control character %U at byte %d; Kubernetes names and user info never do", field, r, i)
}

// checkCSR checks a CertificateSigningRequest (a signing call's, or the request of an
// Explain) against the limits. Fields are named as in signet.v1.
func checkCSR(req CSR) error {
	r := req.Request
	if err := checkCommon(r.SignerName, req.Object); err != nil {
		return err
	}
	if err := maxBytes("request", r.PEM, MaxCSRBytes); err != nil {
		return err
	}
	if len(r.Usages) > MaxUsages {
		return malformed("usages has %d entries, more than the %d Signet accepts", len(r.Usages), MaxUsages)
	}
	for i, u := range r.Usages {
		if err := maxBytes(fmt.Sprintf("usages[%d]", i), u, MaxUsageBytes); err != nil {
			return err
		}
	}
	if err := checkNodeAddresses(r.NodeAddresses); err != nil {
		return err
	}
	return checkRequester(r.Requester)
}

// checkNodeAddresses checks the forwarded node addresses: how many, sizes, no control
// characters.
func checkNodeAddresses(addrs []issuance.NodeAddress) error {
	if len(addrs) > MaxNodeAddresses {
		return malformed("node_addresses has %d entries, more than the %d Signet accepts", len(addrs), MaxNodeAddresses)
	}
	for i, a := range addrs {
		for _, f := range []struct{ name, v string }{{"type", a.Type}, {"address", a.Address}} {
			field := fmt.Sprintf("node_addresses[%d].%s", i, f.name)
			if err := maxBytes(field, f.v, MaxNodeAddressBytes); err != nil {
				return err
			}
			if err := printable(field, f.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRequester checks the requester's user info: sizes, and no control characters.
func checkRequester(who issuance.Requester) error {
	if err := maxBytes("requester.username", who.Username, MaxUserStringBytes); err != nil {
		return err
	}
	if err := maxBytes("requester.uid", who.UID, MaxUserStringBytes); err != nil {
		return err
	}
	if len(who.Groups) > MaxGroups {
		return malformed("requester.groups has %d entries, more than the %d Signet accepts", len(who.Groups), MaxGroups)
	}
	if len(who.Extra) > MaxExtraKeys {
		return malformed("requester.extra has %d keys, more than the %d Signet accepts", len(who.Extra), MaxExtraKeys)
	}
	total := 0
	for i, g := range who.Groups {
		if err := maxBytes(fmt.Sprintf("requester.groups[%d]", i), g, MaxUserStringBytes); err != nil {
			return err
		}
		total += len(g)
	}
	for k, values := range who.Extra {
		total += len(k)
		for _, v := range values {
			total += len(v)
		}
	}
	if total > MaxRequesterAttributeBytes {
		return malformed("requester.groups and requester.extra hold %d bytes, more than the %d Signet accepts", total, MaxRequesterAttributeBytes)
	}
	return requesterPrintable(who)
}

// requesterPrintable refuses user info holding a control character (printable), naming the
// field. The extra keys are checked in sorted order, so that the answer does not depend on the
// map's.
func requesterPrintable(who issuance.Requester) error {
	if err := printable("requester.username", who.Username); err != nil {
		return err
	}
	if err := printable("requester.uid", who.UID); err != nil {
		return err
	}
	for i, g := range who.Groups {
		if err := printable(fmt.Sprintf("requester.groups[%d]", i), g); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(who.Extra)) {
		if err := printable("a requester.extra key", k); err != nil {
			return err
		}
		for i, v := range who.Extra[k] {
			if err := printable(fmt.Sprintf("requester.extra[%s][%d]", strconv.Quote(clip(k, 64)), i), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPod checks a PodCertificateRequest against the limits.
func checkPod(req Pod) error {
	r := req.Request
	if err := checkCommon(r.SignerName, req.Object); err != nil {
		return err
	}
	pod := r.Pod
	for _, f := range []struct {
		name  string
		value string
		limit int
	}{
		{"pod.namespace", pod.Namespace, MaxNamespaceBytes},
		{"pod.pod_name", pod.PodName, MaxObjectNameBytes},
		{"pod.pod_uid", pod.PodUID, MaxPodUIDBytes},
		{"pod.service_account_name", pod.ServiceAccountName, MaxObjectNameBytes},
		{"pod.service_account_uid", pod.ServiceAccountUID, MaxPodUIDBytes},
		{"pod.node_name", pod.NodeName, MaxObjectNameBytes},
		{"pod.node_uid", pod.NodeUID, MaxPodUIDBytes},
	} {
		if err := maxBytes(f.name, f.value, f.limit); err != nil {
			return err
		}
		if err := printable(f.name, f.value); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name  string
		value []byte
	}{
		{"stub_pkcs10_request", r.StubPKCS10Request},
		{"pkix_public_key", r.PKIXPublicKey},
		{"proof_of_possession", r.ProofOfPossession},
	} {
		if err := maxBytes(f.name, f.value, MaxPodKeyFieldBytes); err != nil {
			return err
		}
	}
	total := 0
	for k, v := range r.UnverifiedUserAnnotations {
		total += len(k) + len(v)
	}
	if total > MaxAnnotationBytes {
		return malformed("unverified_user_annotations hold %d bytes, more than the %d Signet accepts", total, MaxAnnotationBytes)
	}
	return nil
}

// The most bytes each caller-supplied string may take in a ledger record, JSON-escaped: the
// limits above (a printable value within them is never clipped; the object UID even when
// every byte is escaped) plus room, and 2 KiB for a SPIFFE ID in the client identity. With
// them a refused record's line stays under 8 KiB whatever the caller sends
// (signerapi's TestRefusedRecordIsBounded measures the worst case).
const (
	recordSignerBytes    = 640
	recordClientBytes    = 2100
	recordRequesterBytes = 1100
	recordObjectUIDBytes = 6*MaxObjectUIDBytes + 32
	recordMessageBytes   = 1536
)

// clip makes a caller's string fit for a record or a log line: control characters (C0, DEL
// and C1) are written out as visible escapes (ESC as \x1b, U+0085 as \u0085), so that no
// record or log line carries an escape sequence to a terminal; then, if its JSON encoding
// (without quotes) is over limit bytes, it is cut to the longest prefix that fits with a
// marker naming the original's length and SHA-256, e.g.
// "aaaa…[clipped: 171000 bytes, sha256 3f2a9c0e5b7d1a44]", so that a record stays bounded and
// still identifies what was sent.
func clip(s string, limit int) string {
	orig := s
	s = visible(s)
	if jsonLen(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(orig))
	marker := fmt.Sprintf("…[clipped: %d bytes, sha256 %s]", len(orig), hex.EncodeToString(sum[:8]))
	room := limit - jsonLen(marker)
	n := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if n += jsonRuneLen(r, w); n > room {
			return s[:i] + marker
		}
		i += w
	}
	return s + marker
}

// visible returns s with every control character written as an escape: \xNN below U+0080,
// \uNNNN for C1. Other characters, backslashes included, are kept as they are.
func visible(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) { // C0, DEL and C1
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// jsonLen is the length of s as encoding/json writes it, without the quotes.
func jsonLen(s string) int {
	n := 0
	for len(s) > 0 {
		r, w := utf8.DecodeRuneInString(s)
		n += jsonRuneLen(r, w)
		s = s[w:]
	}
	return n
}

// jsonRuneLen is the length encoding/json writes inside a string (HTML escaping on) for the
// rune r decoded from w bytes (an invalid byte, RuneError of width 1, becomes \ufffd).
func jsonRuneLen(r rune, w int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || (r == utf8.RuneError && w == 1):
		return 6
	default:
		return w
	}
}
