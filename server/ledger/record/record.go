// Package record is the ledger's record: what the signing service decided for one request,
// and its canonical encoding (the line a ledger stores, hashed into the chain and the Merkle
// tree). Every journal writes and reads it this way: the file ledger (server/ledger) and a
// fleet's database (server/pgstate). It imports nothing of either.
package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Decision is what the server decided for one request.
type Decision string

// The decisions a record can hold.
const (
	// Issued: a certificate was signed; the record carries it.
	Issued Decision = "issued"
	// Refused: the request was refused; Reason and Message say why.
	Refused Decision = "refused"
	// Rotated: a signer's CA set changed (a CA staged, activated or removed, through the
	// admin API or the configuration); Authority is the set after the change.
	Rotated Decision = "rotated"
	// Published: a cluster reported a newly published trust bundle for a signer while a CA
	// was staged, the proof of propagation that activation waits for (Cluster, BundleHash,
	// Anchors).
	Published Decision = "published"
	// Bound: TPM attestation saw an endorsement key for the first time and bound it to a node
	// name (trust on first use): Node and EK, with the request that showed it (Signer, Client,
	// Requester, ObjectUID). From then on that key proves that node only, and that node is
	// proved by that key only, until an operator clears the binding.
	Bound Decision = "bound"
	// Unbound: an admin cleared the binding of a node to an endorsement key (signetctl attest
	// forget): Node and EK, the admin (Client) and the reason (Message).
	Unbound Decision = "unbound"
	// Migrated: the server changed how it keeps the ledger beside its records (the records
	// themselves never change): Message says what, Grounds how many records it read to do it.
	// Written once, by the first start of a server that keeps an index and tree tiles on a
	// ledger written without them.
	Migrated Decision = "migrated"
)

// Started: the first record of a new history, which an operator started with
// StartNewHistory (signetctl ledger new-history) after the previous one was lost or could not
// be trusted. Client names the operator, Message the reason, Grounds the previous history
// (where it was archived, how many records it held, its last hash, what Verify said of it).
const Started Decision = "started"

// ErrInvalidRecord: a record that must not be stored as is (Validate, Seal).
var ErrInvalidRecord = errors.New("invalid ledger record")

// IsState reports whether records of decision d rebuild the server's state whatever their
// age (a signer's CA set, a propagation report, an attestation binding, a new history, a
// migration): every decision but Issued and Refused. Open replays them all.
func (d Decision) IsState() bool { return d != Issued && d != Refused }

// ZeroHash is the PrevHash of the first record.
var ZeroHash = strings.Repeat("0", sha256.Size*2)

// Record is one decision of the signing service. Append fills Seq, Time, PrevHash and Hash;
// the caller fills the rest. See the package doc for the canonical encoding.
type Record struct {
	// Seq is the record's position in the ledger, starting at 1.
	Seq uint64 `json:"seq"`
	// Time is when the record was appended (UTC, RFC 3339 with nanoseconds on disk).
	Time time.Time `json:"time"`
	// Decision is Issued or Refused.
	Decision Decision `json:"decision"`
	// Signer is the signer name the request was for; empty only in the refusal of a request
	// that named none.
	Signer string `json:"signer"`
	// Client is the mTLS identity of the caller (the watcher or a webhook client).
	Client string `json:"client,omitempty"`
	// Requester is the Kubernetes username the request was made by.
	Requester string `json:"requester,omitempty"`
	// ObjectUID is the UID of the CertificateSigningRequest or PodCertificateRequest.
	ObjectUID string `json:"objectUID,omitempty"`
	// ObjectKind is the kind of that object: "CertificateSigningRequest" or
	// "PodCertificateRequest". Records written before the field existed have none (they are
	// all CertificateSigningRequests); being empty it is left out of the encoding, so they
	// still verify.
	ObjectKind string `json:"objectKind,omitempty"`
	// IdempotencyKey is idempotency.Key(ObjectUID, request hash).
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// RequestHash is the hex SHA-256 of the canonical request (idempotency.RequestHash).
	RequestHash string `json:"requestHash,omitempty"`
	// Serial is the issued certificate's serial number in hex.
	Serial string `json:"serial,omitempty"`
	// NotBefore is the issued certificate's NotBefore.
	NotBefore time.Time `json:"notBefore,omitzero"`
	// NotAfter is the issued certificate's NotAfter.
	NotAfter time.Time `json:"notAfter,omitzero"`
	// Reason is the ErrorReason name (without prefix) of a refusal.
	Reason string `json:"reason,omitempty"`
	// Message is the human-readable detail of the decision.
	Message string `json:"message,omitempty"`
	// Grounds names the rule that admitted the request when it is not the ordinary one, e.g.
	// `bootstrap: requester in group "system:bootstrappers"` for a node's first client
	// certificate (issuance.Decision.Grounds). Records without it leave it out of the
	// encoding, so records written before the field existed still verify.
	Grounds string `json:"grounds,omitempty"`
	// Certificate is the issued chain in PEM (leaf first) for Issued records.
	Certificate string `json:"certificate,omitempty"`
	// CA is the lower-case hex SHA-256 of the DER of the certificate of the CA that signed an
	// Issued record's leaf. Records written before the field existed have none.
	CA string `json:"ca,omitempty"`
	// Cluster is the cluster of a Published record.
	Cluster string `json:"cluster,omitempty"`
	// BundleHash is the hex SHA-256 of the trust bundle a Published record reports.
	BundleHash string `json:"bundleHash,omitempty"`
	// Anchors are the hex SHA-256 fingerprints of the certificates of that bundle.
	Anchors []string `json:"anchors,omitempty"`
	// Source is where a Published record's bundle lives: empty for the ClusterTrustBundle,
	// "apiserver-client-ca" (the API server's client-ca-file, as the watcher read it) or
	// "kubelet-certificate-authority" (an admin's confirmation, signetctl ca confirm).
	Source string `json:"source,omitempty"`
	// Authority is a signer's CA set after the change a Rotated record records.
	Authority *Authority `json:"authority,omitempty"`
	// Node is the node name of a Bound record.
	Node string `json:"node,omitempty"`
	// EK is the fingerprint (hex SHA-256 of the PKIX public key) of the endorsement key of a
	// Bound record.
	EK string `json:"ek,omitempty"`
	// PrevHash is the previous record's Hash; 64 zeros for the first record.
	PrevHash string `json:"prevHash"`
	// Hash is the hex SHA-256 of the record's canonical encoding without Hash.
	Hash string `json:"hash,omitempty"`
}

// Validate checks the fields the caller of Append is responsible for.
func (r *Record) Validate() error {
	switch r.Decision {
	case Issued:
		if r.Certificate == "" || r.Serial == "" {
			return fmt.Errorf("%w: an issued record needs its certificate and serial", ErrInvalidRecord)
		}
		if r.Signer == "" {
			return fmt.Errorf("%w: signer is empty", ErrInvalidRecord)
		}
	case Refused:
		if r.Reason == "" {
			return fmt.Errorf("%w: a refused record needs a reason", ErrInvalidRecord)
		}
	case Rotated:
		if r.Signer == "" || r.Authority == nil || len(r.Authority.CAs) == 0 {
			return fmt.Errorf("%w: a rotated record needs its signer and CA set", ErrInvalidRecord)
		}
	case Published:
		if r.Signer == "" || r.Cluster == "" || r.BundleHash == "" {
			return fmt.Errorf("%w: a published record needs its signer, cluster and bundle hash", ErrInvalidRecord)
		}
	case Started:
		if r.Client == "" || r.Message == "" {
			return fmt.Errorf("%w: a started record needs the operator (client) and the reason (message)", ErrInvalidRecord)
		}
	case Migrated:
		if r.Message == "" {
			return fmt.Errorf("%w: a migrated record needs what changed (message)", ErrInvalidRecord)
		}
	case Bound, Unbound:
		if r.Node == "" || r.EK == "" || r.Signer == "" {
			return fmt.Errorf("%w: a %s record needs its signer, node and endorsement key", ErrInvalidRecord, r.Decision)
		}
		if r.Decision == Unbound && (r.Client == "" || r.Message == "") {
			return fmt.Errorf("%w: an unbound record needs the admin (client) and the reason (message)", ErrInvalidRecord)
		}
	default:
		return fmt.Errorf("%w: decision %q (want one of %q, %q, %q, %q, %q, %q, %q, %q)", ErrInvalidRecord, r.Decision, Issued, Refused, Rotated, Published, Started, Bound, Unbound, Migrated)
	}
	return nil
}

// Authority is a signer's CA set as a Rotated record holds it: enough to rebuild the set at
// start (server/authority).
type Authority struct {
	// CAs are the signer's CAs, removed ones included.
	CAs []AuthorityCA `json:"cas"`
	// Clusters are the clusters that must publish the staged CA before it is activated, as
	// known when it was staged.
	Clusters []string `json:"clusters,omitempty"`
}

// AuthorityCA is one CA of an Authority.
type AuthorityCA struct {
	// Fingerprint is the hex SHA-256 of the certificate's DER.
	Fingerprint string `json:"fingerprint"`
	// State is active, staged, retired or removed.
	State string `json:"state"`
	// Since is when the CA entered State; zero for a CA whose state came from the
	// configuration before the signer's first rotation.
	Since time.Time `json:"since,omitzero"`
	// By is who put the CA in State: "configuration" or an admin client's identity.
	By string `json:"by,omitempty"`
	// Key is the key URI (any PIN redacted); empty for a CA that has none.
	Key string `json:"key,omitempty"`
	// Certificate is the CA certificate in PEM.
	Certificate string `json:"certificate"`
	// Intermediates are the PEM certificates appended to the chains it issues.
	Intermediates string `json:"intermediates,omitempty"`
}

// Normalize makes r encode to what it decodes from: valid UTF-8 strings and UTC times without
// a monotonic reading. Append normalizes before hashing, so the returned record equals the
// stored one.
func (r *Record) Normalize() {
	strs := []*string{
		&r.Signer, &r.Client, &r.Requester, &r.ObjectUID, &r.ObjectKind, &r.IdempotencyKey, &r.RequestHash,
		&r.Serial, &r.Reason, &r.Message, &r.Grounds, &r.Certificate, &r.CA, &r.Cluster, &r.BundleHash,
	}
	for i := range r.Anchors {
		strs = append(strs, &r.Anchors[i])
	}
	times := []*time.Time{&r.Time, &r.NotBefore, &r.NotAfter}
	if r.Authority != nil {
		for i := range r.Authority.Clusters {
			strs = append(strs, &r.Authority.Clusters[i])
		}
		for i := range r.Authority.CAs {
			ca := &r.Authority.CAs[i]
			strs = append(strs, &ca.Fingerprint, &ca.State, &ca.By, &ca.Key, &ca.Certificate, &ca.Intermediates)
			times = append(times, &ca.Since)
		}
	}
	for _, s := range strs {
		if !utf8.ValidString(*s) { // checks 8 bytes at a time where ToValidUTF8 decodes each rune
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
	}
	for _, t := range times {
		if !t.IsZero() {
			*t = t.UTC().Round(0)
		}
	}
}

// Seal sets r.Hash from the canonical encoding and returns the record's line (with "\n").
// Hash is the last field and omitted when empty, so the line is the hashed encoding with
// `,"hash":"…"` spliced in before its closing brace: exactly what json.Marshal gives, at the
// cost of one encoding instead of two.
func (r *Record) Seal() ([]byte, error) {
	r.Hash = ""
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding record %d: %w", r.Seq, err)
	}
	sum := sha256.Sum256(b)
	r.Hash = hex.EncodeToString(sum[:])
	line := make([]byte, 0, len(b)+len(r.Hash)+len(`,"hash":""`)+1)
	line = append(line, b[:len(b)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, r.Hash...)
	return append(line, '"', '}', '\n'), nil
}

// Body is a record's canonical encoding between its time and its prevHash: the fields a
// caller gives, encoded by the caller's goroutine (encodeBody) so that the batch writer, which
// alone knows Seq, Time and PrevHash, only splices them in (sealBody). The writer works
// through a batch record by record while every caller waits: what it leaves to the callers
// runs in parallel.
type Body []byte

// bodyPrefix and bodySuffix enclose the Body in the encoding of a record whose Seq, Time and
// PrevHash are zero.
const (
	bodyPrefix = `{"seq":0,"time":"0001-01-01T00:00:00Z",`
	bodySuffix = `"prevHash":""}`
)

// EncodeBody returns r's Body (nil if r cannot be encoded that way; sealBody then encodes it
// whole).
func (r Record) EncodeBody() Body {
	r.Seq, r.Time, r.PrevHash, r.Hash = 0, time.Time{}, "", ""
	b, err := json.Marshal(r)
	if err != nil || !bytes.HasPrefix(b, []byte(bodyPrefix)) || !bytes.HasSuffix(b, []byte(bodySuffix)) ||
		len(b) < len(bodyPrefix)+len(bodySuffix) {
		return nil
	}
	return b[len(bodyPrefix) : len(b)-len(bodySuffix)]
}

// SealBody is seal for a record whose Body (its fields but Seq, Time, PrevHash and Hash)
// EncodeBody made: the same bytes, without encoding the Body again.
func (r *Record) SealBody(b Body) ([]byte, error) {
	if b == nil || !isHex(r.PrevHash) {
		return r.Seal()
	}
	t, err := r.Time.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding record %d: %w", r.Seq, err)
	}
	line := make([]byte, 0, len(b)+len(r.PrevHash)+150)
	line = append(line, `{"seq":`...)
	line = strconv.AppendUint(line, r.Seq, 10)
	line = append(line, `,"time":`...)
	line = append(line, t...)
	line = append(line, ',')
	line = append(line, b...)
	line = append(line, `"prevHash":"`...)
	line = append(line, r.PrevHash...)
	line = append(line, '"', '}')
	sum := sha256.Sum256(line)
	r.Hash = hex.EncodeToString(sum[:])
	line = append(line[:len(line)-1], `,"hash":"`...)
	line = append(line, r.Hash...)
	return append(line, '"', '}', '\n'), nil
}

// isHex reports whether s is lower-case hex digits, which encode in JSON as themselves.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ComputeHash returns the hex SHA-256 of r's canonical encoding with Hash empty.
func (r Record) ComputeHash() (string, error) {
	r.Hash = ""
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding record %d: %w", r.Seq, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Decode parses one line (without "\n") and reports whether it is in canonical form.
func Decode(line []byte) (Record, bool, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, false, err
	}
	again, err := json.Marshal(r)
	if err != nil {
		return r, false, err
	}
	return r, string(again) == string(line), nil
}

// ErrInvalidSerial: a serial is not hexadecimal (an optional 0x prefix, then one or more hex
// digits).
var ErrInvalidSerial = errors.New("serial is not hexadecimal")

// NormalizeSerial returns the canonical form of a certificate serial written in hex: without
// a 0x or 0X prefix, in lower case, without leading zeros ("0" for zero). "0x0A", "a", "0a"
// and "A" all give "a". A string that is not one or more hex digits after the optional prefix
// is refused with ErrInvalidSerial.
func NormalizeSerial(serial string) (string, error) {
	s := serial
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if s == "" {
		return "", fmt.Errorf("%w: %q", ErrInvalidSerial, shorten(serial))
	}
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return "", fmt.Errorf("%w: %q", ErrInvalidSerial, shorten(serial))
		}
	}
	s = strings.TrimLeft(strings.ToLower(s), "0")
	if s == "" {
		s = "0"
	}
	return s, nil
}

// shorten shortens s for an error message.
func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
