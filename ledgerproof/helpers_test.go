package ledgerproof

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const testOrigin = "signet.example/ledger"

// record returns a ledger-like line (without newline) for seq.
func record(seq int64) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"decision":"issued","signer":"example.com/serving","serial":"%x"}`, seq, seq*7919)
}

// buildTree returns a Tree of n records.
func buildTree(t testing.TB, n int64) *Tree {
	t.Helper()
	var tr Tree
	for i := range n {
		idx, err := tr.Append(append(record(i+1), '\n'))
		if err != nil || idx != i {
			t.Fatalf("Append(record %d) = %d, %v", i+1, idx, err)
		}
	}
	return &tr
}

var (
	edSeed = [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	edKey  = ed25519.NewKeyFromSeed(edSeed[:])

	ecOnce sync.Once
	ecKey  *ecdsa.PrivateKey
)

func ecdsaKey(t testing.TB) *ecdsa.PrivateKey {
	ecOnce.Do(func() {
		var err error
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
	return ecKey
}

// testKey is a signer and its verifier, both named testOrigin.
type testKey struct {
	alg string
	s   note.Signer
	v   note.Verifier
}

// testKeys returns an Ed25519 and an ECDSA P-256 test key.
func testKeys(t testing.TB) []testKey {
	t.Helper()
	var out []testKey
	for _, k := range []struct {
		alg string
		key crypto.Signer
	}{{"ed25519", edKey}, {"ecdsa-p256", ecdsaKey(t)}} {
		s, err := NewNoteSigner(testOrigin, k.key)
		if err != nil {
			t.Fatal(err)
		}
		v, err := NewNoteVerifier(testOrigin, k.key.Public())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, testKey{k.alg, s, v})
	}
	return out
}

// signed returns the checkpoint of the first size leaves of tr, signed by s.
func signed(t testing.TB, tr *Tree, size int64, s note.Signer) (Checkpoint, []byte) {
	t.Helper()
	h, err := tr.RootAt(size)
	if err != nil {
		t.Fatal(err)
	}
	c := Checkpoint{Origin: testOrigin, Size: size, Hash: h}
	sig, err := SignCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	return c, sig
}

// flipBit returns a copy of h with bit i (mod 256) flipped.
func flipBit(h tlog.Hash, i int) tlog.Hash {
	h[(i/8)%32] ^= 1 << (i % 8)
	return h
}
