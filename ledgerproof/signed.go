package ledgerproof

import (
	"encoding/base64"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
)

// SignCheckpoint returns the signed note of c, signed by s: the checkpoint body, a blank
// line, and the line "— <s.Name()> <base64(key ID || signature)>" (note.Sign). Signet signs
// with a key named after c.Origin. A checkpoint ParseCheckpoint would refuse is not signed
// (the error wraps ErrMalformedCheckpoint), nor is one whose note would exceed
// MaxSignedCheckpointSize.
func SignCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("signing checkpoint: no signer")
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("signing checkpoint: %w", err)
	}
	signed, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s)
	if err != nil {
		return nil, fmt.Errorf("signing checkpoint of %s at size %d: %w", c.Origin, c.Size, err)
	}
	if len(signed) > MaxSignedCheckpointSize {
		return nil, fmt.Errorf("signing checkpoint of %s: %w: %d bytes, more than the %d allowed", c.Origin, ErrMalformedNote, len(signed), MaxSignedCheckpointSize)
	}
	return signed, nil
}

// OpenCheckpoint verifies a signed checkpoint and returns its body, parsed:
//
//  1. note.Open with v as the only known key: the note must be at most
//     MaxSignedCheckpointSize bytes and well formed (else ErrMalformedNote); a signature
//     line with v's name and key ID must be present (else ErrUnknownKey; lines of other keys,
//     such as witness cosignatures, are ignored as C2SP signed-note requires) and verify
//     (else ErrBadSignature) and be in canonical base64 (else ErrMalformedNote: x/mod's
//     note.Open ignores the unused low bits of the last base64 character, which would give
//     one signature several encodings);
//  2. ParseCheckpoint of the verified text (else ErrMalformedCheckpoint);
//  3. when origin is not empty, the checkpoint's origin must be origin (else
//     ErrOriginMismatch): a genuine checkpoint of another log proves nothing about this one.
//
// The signature line is looked up by v.Name(), which for Signet is the origin.
func OpenCheckpoint(signed []byte, origin string, v note.Verifier) (Checkpoint, error) {
	if v == nil {
		return Checkpoint{}, fmt.Errorf("opening checkpoint: no verifier")
	}
	if len(signed) > MaxSignedCheckpointSize {
		return Checkpoint{}, fmt.Errorf("opening checkpoint: %w: %d bytes, more than the %d allowed", ErrMalformedNote, len(signed), MaxSignedCheckpointSize)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("opening checkpoint with key %s+%08x: %w", v.Name(), v.KeyHash(), classifyOpen(err))
	}
	for _, sig := range n.Sigs {
		// note.Open decodes signatures leniently: bits past the end of the last base64
		// quantum are ignored, so one signature had several encodings. Accept only the
		// canonical one, so that a signed checkpoint has a single text form.
		raw, err := base64.StdEncoding.Strict().DecodeString(sig.Base64)
		if err != nil || base64.StdEncoding.EncodeToString(raw) != sig.Base64 {
			return Checkpoint{}, fmt.Errorf("opening checkpoint: %w: the signature of %s+%08x is not canonical base64", ErrMalformedNote, sig.Name, sig.Hash)
		}
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("opening checkpoint: %w", err)
	}
	if origin != "" && c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("opening checkpoint: %w: %q, want %q", ErrOriginMismatch, c.Origin, origin)
	}
	return c, nil
}

// classifyOpen maps note.Open's errors to the package's sentinels, keeping the original.
func classifyOpen(err error) error {
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		var names []string
		for _, s := range unverified.Note.UnverifiedSigs {
			names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return fmt.Errorf("%w (signed only by %v)", ErrUnknownKey, names)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	default:
		// note.Open's other errors are its malformed-note error and, for a Verifiers that
		// answers with another key, a mismatch; VerifierList never does that.
		return fmt.Errorf("%w: %w", ErrMalformedNote, err)
	}
}
