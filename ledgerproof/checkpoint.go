package ledgerproof

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"
)

// Bounds on what ParseCheckpoint, OpenCheckpoint and the bundle parsers accept. They are far
// above anything Signet produces and low enough that a hostile input costs little.
const (
	// MaxCheckpointSize bounds a checkpoint body (the note text): origin, size, hash and
	// extension lines, newlines included.
	MaxCheckpointSize = 64 << 10
	// MaxSignedCheckpointSize bounds a signed checkpoint note, body and signature lines.
	// C2SP signed-note asks verifiers to accept at least 16 signatures of up to ~5 kB
	// (post-quantum); 1 MiB leaves room for the 100 that x/mod's note.Open allows.
	MaxSignedCheckpointSize = 1 << 20
	// maxSizeDigits is the number of digits of the largest int64.
	maxSizeDigits = 19
)

// emptyRoot is the root of the empty tree: RFC 6962 §2.1 defines MTH({}) as SHA-256 of the
// empty string, and tlog.TreeHash(0, nil) returns exactly that.
var emptyRoot, _ = tlog.TreeHash(0, nil)

// EmptyRoot returns the root hash of the tree with no leaves, SHA-256("") per RFC 6962 §2.1
// (e3b0c442…b855). A checkpoint of size 0 must carry it.
func EmptyRoot() tlog.Hash { return emptyRoot }

// Checkpoint is a C2SP tlog-checkpoint body (https://c2sp.org/tlog-checkpoint): the log's
// origin, its size (number of leaves) and the RFC 6962 root hash of its first Size leaves,
// plus optional extension lines (Signet writes none; C2SP does not recommend them because
// monitors cannot audit them).
type Checkpoint struct {
	// Origin names the log. Signet uses a schema-less URL such as "signet.example/ledger"
	// and signs with a note key of the same name.
	Origin string
	// Size is the number of leaves (ledger records) the checkpoint commits to.
	Size int64
	// Hash is the root of the Merkle tree of the first Size leaves.
	Hash tlog.Hash
	// Extensions are the opaque lines after the hash, without their newlines.
	Extensions []string
}

// Marshal returns the checkpoint body:
//
//	<origin>\n<size in decimal>\n<base64 of hash>\n[<extension>\n]...
//
// Marshal does not validate: the body of a checkpoint ParseCheckpoint would refuse (an empty
// origin, a negative size…) is refused by ParseCheckpoint and by SignCheckpoint. For every
// body ParseCheckpoint accepts, Marshal of the result returns the body byte for byte.
func (c Checkpoint) Marshal() []byte {
	b := make([]byte, 0, len(c.Origin)+maxSizeDigits+tlog.HashSize*2+8)
	b = append(b, c.Origin...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, c.Size, 10)
	b = append(b, '\n')
	b = base64.StdEncoding.AppendEncode(b, c.Hash[:])
	b = append(b, '\n')
	for _, e := range c.Extensions {
		b = append(b, e...)
		b = append(b, '\n')
	}
	return b
}

// ParseCheckpoint parses a checkpoint body strictly, accepting exactly the canonical
// encodings Marshal produces, so that one checkpoint has one encoding:
//
//   - the body is at most MaxCheckpointSize bytes of valid UTF-8 with no control characters
//     (unicode.IsControl: C0 including CR and TAB, DEL, C1) other than the newline ending
//     each line; every line, the last included, ends in "\n";
//   - line 1, the origin: non-empty, no leading or trailing space, printable characters
//     only (unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII
//     space; internal spaces are allowed, as in Sigstore's "rekor.sigstore.dev - 2605…");
//   - line 2, the size: "0", or a decimal without sign or leading zero that fits an int64;
//   - line 3, the root hash: 44 characters of padded standard base64 (RFC 4648 §4) in
//     canonical form, decoding to exactly 32 bytes; for size 0 it must be EmptyRoot()
//     (SHA-256 of the empty string, RFC 6962 §2.1), any other value being provably false;
//   - lines 4 and after, the extensions: each non-empty.
//
// The returned Extensions is nil when there are none. Errors wrap ErrMalformedCheckpoint
// and say which line is wrong and how.
func ParseCheckpoint(body []byte) (Checkpoint, error) {
	if len(body) > MaxCheckpointSize {
		return Checkpoint{}, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrMalformedCheckpoint, len(body), MaxCheckpointSize)
	}
	if len(body) == 0 {
		return Checkpoint{}, fmt.Errorf("%w: empty", ErrMalformedCheckpoint)
	}
	lines := strings.Split(string(body), "\n")
	last := len(lines) - 1
	if lines[last] != "" {
		return Checkpoint{}, lineErr(len(lines), "", "missing the final newline")
	}
	lines = lines[:last]
	for i, l := range lines {
		if err := checkText(l); err != nil {
			return Checkpoint{}, lineErr(i+1, lineRole(i), err.Error())
		}
	}
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: %d lines, want at least 3 (origin, size, root hash)", ErrMalformedCheckpoint, len(lines))
	}
	var c Checkpoint
	var err error
	if c.Origin, err = parseOrigin(lines[0]); err != nil {
		return Checkpoint{}, lineErr(1, "origin", err.Error())
	}
	if c.Size, err = parseSize(lines[1]); err != nil {
		return Checkpoint{}, lineErr(2, "size", err.Error())
	}
	if c.Hash, err = parseHash(lines[2]); err != nil {
		return Checkpoint{}, lineErr(3, "root hash", err.Error())
	}
	if c.Size == 0 && c.Hash != emptyRoot {
		return Checkpoint{}, lineErr(3, "root hash", fmt.Sprintf("size 0 needs the empty tree's root %s, not %s", emptyRoot, c.Hash))
	}
	for i, e := range lines[3:] {
		if e == "" {
			return Checkpoint{}, lineErr(i+4, "extension", "empty extension line")
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// validate reports whether c is a checkpoint ParseCheckpoint accepts, with its error.
func (c Checkpoint) validate() error {
	body := c.Marshal()
	got, err := ParseCheckpoint(body)
	if err != nil {
		return err
	}
	// An extension holding a newline marshals to extra lines: parsing shows it.
	if len(got.Extensions) != len(c.Extensions) {
		return fmt.Errorf("%w: an extension line contains a newline", ErrMalformedCheckpoint)
	}
	if got.Origin != c.Origin {
		return fmt.Errorf("%w: the origin contains a newline", ErrMalformedCheckpoint)
	}
	return nil
}

func lineRole(i int) string {
	switch i {
	case 0:
		return "origin"
	case 1:
		return "size"
	case 2:
		return "root hash"
	}
	return "extension"
}

func lineErr(n int, role, msg string) error {
	if role == "" {
		return fmt.Errorf("%w: line %d: %s", ErrMalformedCheckpoint, n, msg)
	}
	return fmt.Errorf("%w: line %d (%s): %s", ErrMalformedCheckpoint, n, role, msg)
}

// checkText refuses invalid UTF-8 and control characters (the line's newline is already
// removed).
func checkText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		case r == '\r':
			return fmt.Errorf("carriage return at byte %d (CRLF line endings?)", i)
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	return nil
}

func parseOrigin(s string) (string, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("empty origin")
	case strings.HasPrefix(s, " ") || strings.HasSuffix(s, " "):
		return "", fmt.Errorf("leading or trailing space in %q", s)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return "", fmt.Errorf("non-printable character %U at byte %d", r, i)
		}
	}
	return s, nil
}

// parseSize parses a canonical non-negative decimal int64 (also used by the bundle parsers).
func parseSize(s string) (int64, error) {
	switch {
	case s == "":
		return 0, fmt.Errorf("empty number")
	case len(s) > maxSizeDigits:
		return 0, fmt.Errorf("%d digits, more than an int64 holds", len(s))
	case s[0] == '0' && len(s) > 1:
		return 0, fmt.Errorf("leading zero in %q", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number without sign", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q does not fit an int64", s)
	}
	return n, nil
}

// parseHash parses a 32-byte hash in canonical padded standard base64 (also used by the
// bundle parsers).
func parseHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	if want := base64.StdEncoding.EncodedLen(tlog.HashSize); len(s) != want {
		return h, fmt.Errorf("%d characters, want %d (base64 of 32 bytes)", len(s), want)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return h, fmt.Errorf("bad base64 %q: %v", s, err)
	}
	if len(raw) != tlog.HashSize {
		return h, fmt.Errorf("%q decodes to %d bytes, want %d", s, len(raw), tlog.HashSize)
	}
	copy(h[:], raw)
	if base64.StdEncoding.EncodeToString(h[:]) != s {
		return h, fmt.Errorf("%q is not canonical base64", s)
	}
	return h, nil
}
