package checkpoint_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/checkpoint"
)

// signedBy returns tree's checkpoint under bodyOrigin, signed with k.
func signedBy(t testing.TB, tree *ledgerproof.Tree, bodyOrigin string, k key) []byte {
	t.Helper()
	cp, err := tree.Checkpoint(bodyOrigin)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(cp, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// otherHistory returns a tree of n records that differs from history "a" in record 3 only.
func otherHistory(t testing.TB, n int64) *ledgerproof.Tree {
	t.Helper()
	tree := newTree(t, "a", 2)
	grow(t, tree, "b", 1)
	grow(t, tree, "a", n-3)
	return tree
}

// checkCase is a ledger checked against a checkpoint, and the result: nil, ErrBehind, or
// another error wrapping want.
type checkCase struct {
	name   string
	tree   *ledgerproof.Tree
	signed []byte
	want   error
}

// checkCases are the cases of Check and CheckFile for a checkpoint of five records of history
// "a" signed with k (nil: the checkpointer's own).
func checkCases(t testing.TB, alg string, k key, signed []byte) []checkCase {
	tree5 := newTree(t, "a", 5)
	if signed == nil {
		signed = signedBy(t, tree5, origin, k)
	}
	tampered := bytes.Replace(signed, []byte("\n5\n"), []byte("\n4\n"), 1)
	return []checkCase{
		{"the same ledger", tree5, signed, nil},
		{"a longer ledger", newTree(t, "a", 8), signed, nil},
		{"a checkpoint of the empty ledger", newTree(t, "b", 3), signedBy(t, newTree(t, "a", 0), origin, k), nil},
		{"a shorter ledger", newTree(t, "a", 3), signed, checkpoint.ErrBehind},
		{"an empty ledger", newTree(t, "a", 0), signed, checkpoint.ErrBehind},
		{"another history of the same size", otherHistory(t, 5), signed, checkpoint.ErrBehind},
		{"another history, longer", otherHistory(t, 9), signed, checkpoint.ErrBehind},
		{"signed by another key", tree5, signedBy(t, tree5, origin, newKey(t, alg, origin)), ledgerproof.ErrUnknownKey},
		{"another log's checkpoint", tree5, signedBy(t, tree5, "signet.example/other", newKey(t, alg, "signet.example/other")), ledgerproof.ErrUnknownKey},
		{"another origin signed with this key", tree5, signedBy(t, tree5, "signet.example/other", k), ledgerproof.ErrOriginMismatch},
		{"a changed checkpoint", tree5, tampered, ledgerproof.ErrBadSignature},
		{"half a checkpoint", tree5, signed[:len(signed)/2], ledgerproof.ErrMalformed},
		{"not a checkpoint", tree5, []byte("hello\n"), ledgerproof.ErrMalformed},
		{"an empty file", tree5, []byte{}, ledgerproof.ErrMalformed},
	}
}

// wantCheck compares err with want: nil, ErrBehind, or another error wrapping want and not
// ErrBehind; an error must name what.
func wantCheck(t testing.TB, err, want error, what string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("err = %v, want nil", err)
	case want == nil:
	case err == nil:
		t.Errorf("err = nil, want %v", want)
	case !errors.Is(err, want):
		t.Errorf("err = %v, want %v", err, want)
	case want != checkpoint.ErrBehind && errors.Is(err, checkpoint.ErrBehind):
		t.Errorf("err = %v: a checkpoint that cannot be verified is not ErrBehind", err)
	case !strings.Contains(err.Error(), what):
		t.Errorf("err = %v, want it to name %q", err, what)
	}
}

// TestCheck: a ledger passes if it extends the checkpoint; ErrBehind if it is shorter or
// another history; another error if the checkpoint cannot be verified.
func TestCheck(t *testing.T) {
	for _, alg := range algs {
		k := newKey(t, alg, origin)
		for _, tt := range checkCases(t, alg, k, nil) {
			t.Run(alg+"/"+tt.name, func(t *testing.T) {
				const what = "the witnessed checkpoint /etc/signet/witnessed"
				err := checkpoint.Check(tt.tree, tt.signed, origin, k.verifier, what)
				wantCheck(t, err, tt.want, what)
			})
		}
	}
}

// TestCheckFile: Check against the checkpoint file New writes; no file passes, a damaged one
// fails.
func TestCheckFile(t *testing.T) {
	for _, alg := range algs {
		k := newKey(t, alg, origin)
		// The file New writes for five records.
		dir := t.TempDir()
		opts := options(t, k, &observer{}, 0, nil)
		opts.Dir = dir
		if _, err := checkpoint.New(newTree(t, "a", 5), opts); err != nil {
			t.Fatal(err)
		}
		written, err := os.ReadFile(filepath.Join(dir, checkpoint.FileName))
		if err != nil {
			t.Fatal(err)
		}
		cases := checkCases(t, alg, k, written)
		cases = append(cases, checkCase{"zeros after the checkpoint", newTree(t, "a", 5), append(bytes.Clone(written), make([]byte, 4096)...), nil})
		for _, tt := range cases {
			t.Run(alg+"/"+tt.name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, checkpoint.FileName)
				if err := os.WriteFile(path, tt.signed, 0o600); err != nil {
					t.Fatal(err)
				}
				wantCheck(t, checkpoint.CheckFile(tt.tree, dir, origin, k.verifier), tt.want, path)
			})
		}
		t.Run(alg+"/no file", func(t *testing.T) {
			if err := checkpoint.CheckFile(newTree(t, "a", 0), t.TempDir(), origin, k.verifier); err != nil {
				t.Errorf("CheckFile of a directory without a checkpoint: %v, want nil", err)
			}
		})
		t.Run(alg+"/unreadable file", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, checkpoint.FileName), 0o700); err != nil {
				t.Fatal(err)
			}
			err := checkpoint.CheckFile(newTree(t, "a", 5), dir, origin, k.verifier)
			if err == nil || errors.Is(err, checkpoint.ErrBehind) {
				t.Errorf("CheckFile of a directory named %s: %v, want an error, not ErrBehind", checkpoint.FileName, err)
			}
		})
	}
}
