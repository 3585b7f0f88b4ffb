package ledgerproof

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Headers (first lines) of the bundle text encodings, and their bounds.
const (
	InclusionBundleHeader   = "signet-ledger-inclusion-proof v1"
	ConsistencyBundleHeader = "signet-ledger-consistency-proof v1"
	// MaxInclusionHashes bounds an inclusion proof: 63 hashes suffice for any int64 size.
	MaxInclusionHashes = 64
	// MaxConsistencyHashes bounds a consistency proof (RFC 6962 proofs have at most about
	// 2·log₂ n hashes).
	MaxConsistencyHashes = 128
)

// InclusionBundle is everything an auditor needs to check that one ledger record is in the
// log: the record, its index, the audit path and the signed checkpoint it leads to. Its text
// encoding (Marshal, ParseInclusionBundle) is what `signetctl ledger prove` prints:
//
//	signet-ledger-inclusion-proof v1
//	index <leaf index, decimal: record seq - 1>
//	leaf <base64 of the record line, without its newline>
//	hash <base64 of a 32-byte node hash>      zero to 64 lines, tlog.RecordProof order
//	checkpoint
//	<the signed checkpoint note, verbatim, to the end of the text>
//
// Numbers are canonical decimal, base64 is padded standard (RFC 4648 §4) in canonical form,
// every line ends in "\n". The package documentation has a complete example.
type InclusionBundle struct {
	// Index is the leaf index: the record's seq minus 1.
	Index int64
	// Leaf is the record's line without its newline (Marshal drops one if present).
	Leaf []byte
	// Proof is the audit path from the leaf to the checkpoint's root.
	Proof tlog.RecordProof
	// SignedCheckpoint is the signed note of a checkpoint of size > Index.
	SignedCheckpoint []byte
}

// Marshal returns the bundle's text encoding. For every text ParseInclusionBundle accepts,
// Marshal of the result returns that text byte for byte.
func (b InclusionBundle) Marshal() []byte {
	var buf bytes.Buffer
	buf.WriteString(InclusionBundleHeader + "\nindex ")
	buf.WriteString(strconv.FormatInt(b.Index, 10))
	buf.WriteString("\nleaf ")
	buf.WriteString(base64.StdEncoding.EncodeToString(leafData(b.Leaf)))
	buf.WriteByte('\n')
	writeHashes(&buf, b.Proof)
	buf.WriteString("checkpoint\n")
	buf.Write(b.SignedCheckpoint)
	return buf.Bytes()
}

// ParseInclusionBundle parses the text encoding strictly: the exact header, then index, leaf
// (non-empty, at most MaxLeafSize bytes, no newline), at most MaxInclusionHashes hash lines,
// "checkpoint", and a non-empty note ending in "\n" of at most MaxSignedCheckpointSize
// bytes. It checks syntax only: Verify checks the signature and the proof. Errors wrap
// ErrMalformedBundle and name the line.
func ParseInclusionBundle(text []byte) (InclusionBundle, error) {
	if limit := maxBundleSize(1, MaxInclusionHashes) + base64.StdEncoding.EncodedLen(MaxLeafSize); len(text) > limit {
		return InclusionBundle{}, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrMalformedBundle, len(text), limit)
	}
	r := &lines{rest: text}
	var b InclusionBundle
	if err := r.expect(InclusionBundleHeader); err != nil {
		return InclusionBundle{}, err
	}
	v, err := r.field("index")
	if err == nil {
		b.Index, err = parseSize(v)
		err = r.wrap("index", err)
	}
	if err != nil {
		return InclusionBundle{}, err
	}
	if v, err = r.field("leaf"); err != nil {
		return InclusionBundle{}, err
	}
	if b.Leaf, err = parseLeaf(v); err != nil {
		return InclusionBundle{}, r.wrap("leaf", err)
	}
	proof, err := r.hashes(MaxInclusionHashes)
	if err != nil {
		return InclusionBundle{}, err
	}
	b.Proof = tlog.RecordProof(proof)
	if err := r.expect("checkpoint"); err != nil {
		return InclusionBundle{}, err
	}
	if b.SignedCheckpoint, err = r.noteToEnd(); err != nil {
		return InclusionBundle{}, err
	}
	return b, nil
}

// Verify opens the bundle's checkpoint with v (OpenCheckpoint: signature, then body, then
// origin when origin is not empty) and checks the leaf's inclusion in it (VerifyInclusion).
// It returns the verified checkpoint; errors wrap the sentinels of those two functions.
func (b InclusionBundle) Verify(origin string, v note.Verifier) (Checkpoint, error) {
	c, err := OpenCheckpoint(b.SignedCheckpoint, origin, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("verifying inclusion bundle: %w", err)
	}
	if err := VerifyInclusion(b.Leaf, b.Index, b.Proof, c); err != nil {
		return Checkpoint{}, fmt.Errorf("verifying inclusion bundle: %w", err)
	}
	return c, nil
}

// ConsistencyBundle proves that a newer signed checkpoint extends an older one. Its text
// encoding, for a witness or an auditor keeping the last checkpoint it saw:
//
//	signet-ledger-consistency-proof v1
//	hash <base64 of a 32-byte node hash>      zero to 128 lines, tlog.TreeProof order
//	old
//	<the older signed checkpoint note, verbatim>
//	new
//	<the newer signed checkpoint note, verbatim, to the end of the text>
//
// The older note ends at its last signature line: its body has no empty line (a checkpoint's
// never has), the first empty line ends the body, and the signature lines after it all start
// with "— ", so the "new" line is unambiguous.
type ConsistencyBundle struct {
	// Old and New are signed checkpoint notes, Old of the smaller (or equal) size.
	Old, New []byte
	// Proof is the consistency proof from Old's size to New's.
	Proof tlog.TreeProof
}

// Marshal returns the bundle's text encoding. For every text ParseConsistencyBundle
// accepts, Marshal of the result returns that text byte for byte.
func (b ConsistencyBundle) Marshal() []byte {
	var buf bytes.Buffer
	buf.WriteString(ConsistencyBundleHeader + "\n")
	writeHashes(&buf, b.Proof)
	buf.WriteString("old\n")
	buf.Write(b.Old)
	buf.WriteString("new\n")
	buf.Write(b.New)
	return buf.Bytes()
}

// ParseConsistencyBundle parses the text encoding strictly, as ParseInclusionBundle does;
// it checks syntax only. Errors wrap ErrMalformedBundle and name the line.
func ParseConsistencyBundle(text []byte) (ConsistencyBundle, error) {
	if limit := maxBundleSize(2, MaxConsistencyHashes); len(text) > limit {
		return ConsistencyBundle{}, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrMalformedBundle, len(text), limit)
	}
	r := &lines{rest: text}
	var b ConsistencyBundle
	if err := r.expect(ConsistencyBundleHeader); err != nil {
		return ConsistencyBundle{}, err
	}
	proof, err := r.hashes(MaxConsistencyHashes)
	if err != nil {
		return ConsistencyBundle{}, err
	}
	b.Proof = tlog.TreeProof(proof)
	if err := r.expect("old"); err != nil {
		return ConsistencyBundle{}, err
	}
	if b.Old, err = r.noteUntil("new"); err != nil {
		return ConsistencyBundle{}, err
	}
	if b.New, err = r.noteToEnd(); err != nil {
		return ConsistencyBundle{}, err
	}
	return b, nil
}

// Verify opens both checkpoints with v (and origin, as OpenCheckpoint) and checks the proof
// (VerifyConsistency). It returns the verified older and newer checkpoints; errors wrap the
// sentinels of those two functions, ErrShrunk and ErrInconsistent included.
func (b ConsistencyBundle) Verify(origin string, v note.Verifier) (older, newer Checkpoint, err error) {
	if older, err = OpenCheckpoint(b.Old, origin, v); err != nil {
		return Checkpoint{}, Checkpoint{}, fmt.Errorf("verifying consistency bundle: old: %w", err)
	}
	if newer, err = OpenCheckpoint(b.New, origin, v); err != nil {
		return Checkpoint{}, Checkpoint{}, fmt.Errorf("verifying consistency bundle: new: %w", err)
	}
	if err := VerifyConsistency(older, newer, b.Proof); err != nil {
		return Checkpoint{}, Checkpoint{}, fmt.Errorf("verifying consistency bundle: %w", err)
	}
	return older, newer, nil
}

func writeHashes(buf *bytes.Buffer, hs []tlog.Hash) {
	for _, h := range hs {
		buf.WriteString("hash ")
		buf.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		buf.WriteByte('\n')
	}
}

// maxBundleSize bounds a bundle of notes signed checkpoints and hashes hash lines, before
// its leaf.
func maxBundleSize(notes, hashes int) int {
	return notes*MaxSignedCheckpointSize + hashes*(len("hash \n")+44) + 256
}

func parseLeaf(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("empty leaf")
	}
	if len(s) > base64.StdEncoding.EncodedLen(MaxLeafSize) {
		return nil, fmt.Errorf("leaf of more than %d bytes", MaxLeafSize)
	}
	data, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad base64: %v", err)
	}
	if base64.StdEncoding.EncodeToString(data) != s {
		return nil, fmt.Errorf("not canonical base64")
	}
	if err := checkLeaf(data); err != nil {
		return nil, err
	}
	return data, nil
}

// lines reads a bundle line by line, counting lines for errors.
type lines struct {
	rest []byte
	n    int // lines read
}

// next returns the next line without its newline.
func (r *lines) next() (string, error) {
	i := bytes.IndexByte(r.rest, '\n')
	if i < 0 {
		if len(r.rest) == 0 {
			return "", fmt.Errorf("%w: line %d: unexpected end of text", ErrMalformedBundle, r.n+1)
		}
		return "", fmt.Errorf("%w: line %d: missing newline", ErrMalformedBundle, r.n+1)
	}
	r.n++
	l := string(r.rest[:i])
	r.rest = r.rest[i+1:]
	return l, nil
}

// peek returns the next line without consuming it ("" and false at the end).
func (r *lines) peek() (string, bool) {
	i := bytes.IndexByte(r.rest, '\n')
	if i < 0 {
		return "", false
	}
	return string(r.rest[:i]), true
}

func (r *lines) expect(want string) error {
	l, err := r.next()
	if err != nil {
		return err
	}
	if l != want {
		return fmt.Errorf("%w: line %d: got %.40q, want %q", ErrMalformedBundle, r.n, l, want)
	}
	return nil
}

// field reads the line "<key> <value>" and returns value.
func (r *lines) field(key string) (string, error) {
	l, err := r.next()
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(l, key+" ")
	if !ok {
		return "", fmt.Errorf("%w: line %d: got %.40q, want %q", ErrMalformedBundle, r.n, l, key+" …")
	}
	return v, nil
}

func (r *lines) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: line %d (%s): %w", ErrMalformedBundle, r.n, what, err)
}

// hashes reads consecutive "hash <base64>" lines, at most max.
func (r *lines) hashes(limit int) ([]tlog.Hash, error) {
	var hs []tlog.Hash
	for {
		l, ok := r.peek()
		if !ok || !strings.HasPrefix(l, "hash ") {
			return hs, nil
		}
		if len(hs) == limit {
			return nil, fmt.Errorf("%w: line %d: more than %d proof hashes", ErrMalformedBundle, r.n+1, limit)
		}
		v, _ := r.field("hash")
		h, err := parseHash(v)
		if err != nil {
			return nil, r.wrap("hash", err)
		}
		hs = append(hs, h)
	}
}

// noteToEnd returns the rest of the text as a signed note: non-empty, ending in a newline,
// at most MaxSignedCheckpointSize bytes.
func (r *lines) noteToEnd() ([]byte, error) {
	n := r.rest
	switch {
	case len(n) == 0:
		return nil, fmt.Errorf("%w: line %d: missing signed checkpoint", ErrMalformedBundle, r.n+1)
	case len(n) > MaxSignedCheckpointSize:
		return nil, fmt.Errorf("%w: line %d: signed checkpoint of %d bytes, more than the %d allowed", ErrMalformedBundle, r.n+1, len(n), MaxSignedCheckpointSize)
	case n[len(n)-1] != '\n':
		return nil, fmt.Errorf("%w: the signed checkpoint does not end in a newline", ErrMalformedBundle)
	}
	r.rest = nil
	return bytes.Clone(n), nil
}

// noteUntil returns the signed checkpoint note that starts here, ending after the signature
// lines that follow its first empty line, and consumes the line marker after it.
func (r *lines) noteUntil(marker string) ([]byte, error) {
	start, first := r.rest, r.n+1
	for body := true; ; {
		l, err := r.next()
		if err != nil {
			return nil, err
		}
		switch {
		case body && l == "":
			body = false
			if l, _ := r.peek(); !strings.HasPrefix(l, "— ") {
				return nil, fmt.Errorf("%w: line %d: no signature line after the note's empty line", ErrMalformedBundle, r.n+1)
			}
		case !body && !strings.HasPrefix(l, "— "):
			if l != marker {
				return nil, fmt.Errorf("%w: line %d: got %.40q, want %q or a signature line", ErrMalformedBundle, r.n, l, marker)
			}
			n := start[:len(start)-len(r.rest)-len(marker)-1]
			if len(n) > MaxSignedCheckpointSize {
				return nil, fmt.Errorf("%w: line %d: signed checkpoint of %d bytes, more than the %d allowed", ErrMalformedBundle, first, len(n), MaxSignedCheckpointSize)
			}
			return bytes.Clone(n), nil
		}
	}
}
