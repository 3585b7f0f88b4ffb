package ledgerproof

import (
	"errors"
	"fmt"
)

// The sentinel errors of the package. Every error a function returns wraps at most one of the
// verification sentinels below (and ErrMalformed through its three refinements), so a caller
// such as the watcher or signetctl can turn errors.Is into a reason without reading messages.
var (
	// ErrMalformed is wrapped by every error about input that does not parse: a note, a
	// checkpoint or a proof bundle. errors.Is(err, ErrMalformed) holds for each of the three
	// refinements below.
	ErrMalformed = errors.New("malformed")
	// ErrMalformedNote: the signed note is not a well-formed C2SP signed note (framing,
	// control characters, signature line syntax, size).
	ErrMalformedNote = fmt.Errorf("%w signed note", ErrMalformed)
	// ErrMalformedCheckpoint: the note text is not a well-formed C2SP checkpoint body.
	ErrMalformedCheckpoint = fmt.Errorf("%w checkpoint", ErrMalformed)
	// ErrMalformedBundle: a proof bundle's text encoding is not well formed.
	ErrMalformedBundle = fmt.Errorf("%w proof bundle", ErrMalformed)

	// ErrBadSignature: a signature line names the trusted key (name and key ID) but its
	// signature does not verify. The note has been tampered with, or was signed by another
	// key with a colliding key ID.
	ErrBadSignature = errors.New("bad signature")
	// ErrUnknownKey: the note carries no signature line from the trusted key (only lines
	// from other names or key IDs, which are ignored as C2SP signed-note requires).
	ErrUnknownKey = errors.New("no signature by the trusted key")
	// ErrOriginMismatch: the checkpoint is genuine but belongs to another log (origin), or
	// two checkpoints compared for consistency name different origins.
	ErrOriginMismatch = errors.New("wrong origin")

	// ErrNotIncluded: an inclusion proof does not prove the leaf at the index under the
	// checkpoint's root (wrong leaf, index, proof hash or root), or the index is not below
	// the checkpoint's size.
	ErrNotIncluded = errors.New("inclusion proof does not verify")
	// ErrInconsistent: a consistency proof does not prove that the newer checkpoint's tree
	// extends the older one's, or two checkpoints of one size have different roots.
	ErrInconsistent = errors.New("checkpoints are not consistent")
	// ErrShrunk: the newer checkpoint has fewer leaves than the older one: an append-only
	// log never shrinks, so this is evidence of a fork or a rollback.
	ErrShrunk = errors.New("log shrank")

	// ErrUnsupportedKey: the key is neither Ed25519 nor ECDSA P-256.
	ErrUnsupportedKey = errors.New("unsupported checkpoint key type")
)
