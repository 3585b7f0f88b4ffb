package ledgerproof

import (
	"crypto/sha256"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// Reference implementations written from the RFCs, independent of tlog: RFC 6962's Merkle
// Tree Hash, and the proof verification algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2 that a
// third-party auditor would use. The Tree's roots and proofs must agree with them, so the
// package documentation can point auditors at the RFCs.

// mth is RFC 6962 §2.1's Merkle Tree Hash.
func mth(leaves [][]byte) [32]byte {
	switch n := len(leaves); n {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0x00}, leaves[0]...))
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		l, r := mth(leaves[:k]), mth(leaves[k:])
		return sha256.Sum256(append(append([]byte{0x01}, l[:]...), r[:]...))
	}
}

// node is RFC 6962's interior node hash.
func node(l, r tlog.Hash) tlog.Hash {
	return sha256.Sum256(append(append([]byte{0x01}, l[:]...), r[:]...))
}

// rfc9162Inclusion is RFC 9162 §2.1.3.2.
func rfc9162Inclusion(index, size int64, leaf tlog.Hash, path []tlog.Hash, root tlog.Hash) bool {
	if index >= size {
		return false
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = node(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	return sn == 0 && r == root
}

// rfc9162Consistency is RFC 9162 §2.1.4.2 (for 0 < first < second).
func rfc9162Consistency(first, second int64, firstHash, secondHash tlog.Hash, path []tlog.Hash) bool {
	if len(path) == 0 {
		return false
	}
	if first&(first-1) == 0 { // a power of 2
		path = append([]tlog.Hash{firstHash}, path...)
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = node(c, fr), node(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = node(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	return fr == firstHash && sr == secondHash && sn == 0
}

func TestProofsVerifyWithRFC9162(t *testing.T) {
	const maxSize = 40
	tr := buildTree(t, maxSize)
	for n := int64(1); n <= maxSize; n++ {
		root, err := tr.RootAt(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p, err := tr.ProveInclusion(i, n)
			if err != nil {
				t.Fatal(err)
			}
			if !rfc9162Inclusion(i, n, LeafHash(record(i+1)), p, root) {
				t.Fatalf("inclusion of %d at size %d fails RFC 9162 verification", i, n)
			}
			if rfc9162Inclusion(i, n, LeafHash(record(i+2)), p, root) {
				t.Fatalf("RFC 9162 check accepts the wrong leaf: the reference is broken")
			}
		}
		for m := int64(1); m < n; m++ {
			old, err := tr.RootAt(m)
			if err != nil {
				t.Fatal(err)
			}
			p, err := tr.ProveConsistency(m, n)
			if err != nil {
				t.Fatal(err)
			}
			if !rfc9162Consistency(m, n, old, root, p) {
				t.Fatalf("consistency %d → %d fails RFC 9162 verification", m, n)
			}
			if rfc9162Consistency(m, n, flipBit(old, 3), root, p) {
				t.Fatalf("RFC 9162 check accepts a wrong old root: the reference is broken")
			}
		}
	}
}
