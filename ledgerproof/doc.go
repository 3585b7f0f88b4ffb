// Package ledgerproof makes Signet's decision ledger verifiable: the ledger's records are the
// leaves of an RFC 6962 Merkle tree, the server publishes signed checkpoints in the C2SP
// formats, and anyone holding the checkpoint key's public half can check that a record is in
// the log (inclusion) and that the log only grew between two checkpoints (consistency).
//
// The package is the shared, dependency-light code of the server (Tree, SignCheckpoint), the
// watcher acting as a witness and `signetctl ledger audit|prove` (OpenCheckpoint, the
// Verify functions and the bundle encodings). It imports nothing of Signet's; the Merkle math
// and the note framing are golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note.
// What follows is enough to write an independent verifier.
//
// # Leaves
//
// The ledger is JSON lines: record seq s is the line number s, one canonical JSON object
// followed by "\n". Its leaf is at index s-1, and the leaf data is exactly the bytes of the
// line as stored, minus the newline. The leaf hash (LeafHash) is
//
//	SHA-256(0x00 || line without "\n")
//
// An inclusion proof binds a line to an index; a verifier of a Signet record also checks that
// the record's own "seq" is index+1.
//
// # Tree
//
// The tree is RFC 6962 §2.1's Merkle Tree Hash over the leaves in order: an interior node is
// SHA-256(0x01 || left || right), the left subtree holding the largest power of two of the
// leaves strictly less than their number, and the empty tree's root is SHA-256 of the empty
// string, e3b0c442…b855 (EmptyRoot). Inclusion proofs are RFC 6962 §2.1.1 audit paths and
// consistency proofs RFC 6962 §2.1.2 proofs, with the hashes in the order the RFCs give them
// (from the leaf, or the older tree, upward): RFC 9162 §2.1.3.2 and §2.1.4.2 verify them
// as they are (the tests check this with an implementation written from RFC 9162).
//
// # Checkpoints
//
// A checkpoint (https://c2sp.org/tlog-checkpoint) is a note whose text is the origin (the
// log's name), the tree size in decimal and the base64 root hash, one per line, each line
// ending in "\n"; optional extension lines may follow (Signet writes none). ParseCheckpoint
// accepts exactly one encoding of each checkpoint (no leading zeros, canonical padded base64,
// no CR or other control characters, a non-empty origin without leading or trailing spaces,
// at most MaxCheckpointSize bytes) and requires a size-0 checkpoint to carry the empty tree's
// root. For example:
//
//	signet.example/ledger
//	3
//	p4whS61Sv3Xt+d35S3AYujsdm+gbtQs68p+IgFhwLlM=
//
// # Signatures
//
// A signed checkpoint is a C2SP signed note (https://c2sp.org/signed-note): the text, an
// empty line, and one line per signature: "— " (U+2014, space), the key name, a space, and
// base64(4-byte big-endian key ID || signature). Signet's key name is the origin. A verifier
// looks up the line by key name and key ID, ignores lines of other keys (witness
// cosignatures), and rejects the note if the trusted key's line does not verify. The key is
// one of Signet's keystore keys, of one of two signature types (the type byte identifies the
// algorithm in key IDs and verifier keys):
//
//   - 0x01, Ed25519: the signature is Ed25519 (RFC 8032) over the note text (every byte of
//     the checkpoint body, final newline included, not the empty line); key ID =
//     SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]. This is what
//     golang.org/x/mod/sumdb/note signs and verifies.
//   - 0x02, ECDSA P-256: the signature is ASN.1 DER ECDSA over SHA-256(note text); key ID =
//     SHA-256(DER SubjectPublicKeyInfo of the public key)[:4], with neither name nor type
//     byte. C2SP signed-note assigns 0x02 to "ECDSA signatures as implemented by
//     github.com/transparency-dev/witness", the scheme Sigstore's Rekor uses; the tests verify
//     a real Rekor checkpoint. TPMs and most HSMs have no Ed25519, hence this type.
//
// Operators publish the public key as a PEM "PUBLIC KEY" file (MarshalPublicKeyPEM,
// ParsePublicKeyPEM) or as a verifier key, "vkey" (VerifierKey, ParseVerifierKey):
// name+<key ID in 8 hex digits>+base64(type byte || key), the key being the 32 Ed25519
// bytes or the ECDSA SPKI DER. x/mod's note.NewVerifier reads Ed25519 vkeys and
// transparency-dev's witness reads ECDSA ones.
//
// A signed note is not unique: ECDSA signatures are randomized and malleable, and notes may
// gain cosignatures. Compare checkpoints by their parsed body, never by the signed bytes.
// OpenCheckpoint does require the trusted key's signature to be in canonical base64.
//
// # Inclusion bundles
//
// `signetctl ledger prove` prints an InclusionBundle, a self-contained text an auditor can
// check against the log's key:
//
//	signet-ledger-inclusion-proof v1
//	index <leaf index in decimal, = seq - 1>
//	leaf <base64 of the record line without its newline>
//	hash <base64 of a proof hash>     (zero to 64 such lines, from the leaf up)
//	checkpoint
//	<the signed checkpoint, verbatim, to the end>
//
// For a three-record ledger whose checkpoints are signed with the Ed25519 key whose vkey is
// signet.example/ledger+4d2d9824+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop (the package
// example builds it), the bundle of the record with seq 2 is:
//
//	signet-ledger-inclusion-proof v1
//	index 1
//	leaf eyJzZXEiOjIsImRlY2lzaW9uIjoicmVmdXNlZCIsInNpZ25lciI6ImV4YW1wbGUuY29tL3NlcnZpbmciLCJyZWFzb24iOiJQT0xJQ1lfVklPTEFUSU9OIn0=
//	hash KKTFVXAzqrCBcf6nl0SUstlL0CSkkjCgb6mvEblE2lA=
//	hash 8KusiFo+4zszlZDJWGC7rcPMaU6nUiZ9SAZjV8+CsvA=
//	checkpoint
//	signet.example/ledger
//	3
//	p4whS61Sv3Xt+d35S3AYujsdm+gbtQs68p+IgFhwLlM=
//
//	— signet.example/ledger TS2YJJkMcf/1xpjAWG3IB+dgVSTtre26aFJ7uSAPKA8WM24ScZ0BFzilg1v/uLQb1rZk0nRKQCSmbV6BNzk53ilHpA8=
//
// To check it by hand: verify the note's signature; decode the leaf, check its seq is 2, and
// hash it: L = SHA-256(0x00 || leaf); with index 1 in a tree of 3, RFC 9162 §2.1.3.2 gives
// root = SHA-256(0x01 || SHA-256(0x01 || h1 || L) || h2), where h1 and h2 are the two proof
// hashes in order (here the leaf hashes of records 1 and 3); compare it with the checkpoint's
// root. InclusionBundle.Verify does all of it but the seq check.
//
// # Consistency bundles
//
// A ConsistencyBundle carries two signed checkpoints and the proof between them:
//
//	signet-ledger-consistency-proof v1
//	hash <base64 of a proof hash>     (zero to 128 such lines)
//	old
//	<the older signed checkpoint, verbatim>
//	new
//	<the newer signed checkpoint, verbatim, to the end>
//
// ConsistencyBundle.Verify fails with ErrShrunk if the newer checkpoint is smaller and with
// ErrInconsistent if the proof does not hold, in particular for two different roots of one
// size: either, with both notes validly signed, is evidence that the log forked or was
// rewritten.
//
// # Errors
//
// Failures wrap one of the sentinels of errors.go, so callers can map them to reasons:
// ErrMalformed (refined as ErrMalformedNote, ErrMalformedCheckpoint, ErrMalformedBundle),
// ErrBadSignature, ErrUnknownKey, ErrOriginMismatch, ErrNotIncluded, ErrInconsistent,
// ErrShrunk and ErrUnsupportedKey.
package ledgerproof
