package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// hostileStrings are field values whose JSON encoding escapes or replaces something.
var hostileStrings = []string{
	"", "a", "<script>&amp;</script>", "\u2028\u2029", "\x00\x01\x1f\x7f", `"quoted" \back\slash/`,
	"ünï©ødé 日本 🙂", "\xff\xfe broken \xc3", "tab\tnew\nline\rcr", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	"0123456789abcdef", "\ufffd", "\u00e9\u0301",
}

// randomRecord fills every field of a record, or leaves it empty, at random.
func randomRecord(rng *rand.Rand) Record {
	str := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return hostileStrings[rng.IntN(len(hostileStrings))]
	}
	tm := func() time.Time {
		if rng.IntN(3) == 0 {
			return time.Time{}
		}
		return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("x", 3600))
	}
	r := Record{
		Decision: []Decision{Issued, Refused, Rotated, Published, Bound, Migrated}[rng.IntN(6)],
		Signer:   str(), Client: str(), Requester: str(), ObjectUID: str(), ObjectKind: str(), IdempotencyKey: str(),
		RequestHash: str(), Serial: str(), NotBefore: tm(), NotAfter: tm(), Reason: str(), Message: str(),
		Grounds: str(), Certificate: str(), CA: str(), Cluster: str(), BundleHash: str(), Source: str(),
		Node: str(), EK: str(),
	}
	for range rng.IntN(3) {
		r.Anchors = append(r.Anchors, str())
	}
	if rng.IntN(3) == 0 {
		r.Authority = &Authority{}
		for range rng.IntN(3) {
			r.Authority.CAs = append(r.Authority.CAs, AuthorityCA{Fingerprint: str(), State: str(), Since: tm(), By: str(),
				Key: str(), Certificate: str(), Intermediates: str()})
		}
		for range rng.IntN(3) {
			r.Authority.Clusters = append(r.Authority.Clusters, str())
		}
	}
	return r
}

// TestSealBodyIsSeal: the line the batch writer splices from the caller's body is, byte for
// byte, the line encoding the whole record gives, and so is its hash, for records with every
// field present or absent and strings that JSON escapes.
func TestSealBodyIsSeal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		r := randomRecord(rng)
		r.Normalize()
		b := r.EncodeBody()
		if b == nil {
			t.Fatalf("record %d: encodeBody gave no body for %+v", i, r)
		}
		r.Seq, r.Time = uint64(rng.Int64N(1<<62))+1, time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()
		r.PrevHash = ZeroHash
		if rng.IntN(2) == 0 {
			r.PrevHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		}
		want, werr := r.Seal()
		wantHash := r.Hash
		got, gerr := r.SealBody(b)
		if werr != nil || gerr != nil || !bytes.Equal(got, want) || r.Hash != wantHash {
			t.Fatalf("record %d:\nsealBody = %s (%v)\nseal     = %s (%v)", i, got, gerr, want, werr)
		}
	}
}

// FuzzSealBody: the same for any strings in the fields a caller sets.
func FuzzSealBody(f *testing.F) {
	f.Add("signer", "<&>", "\u2028", "\xff", uint64(1))
	f.Fuzz(func(t *testing.T, signer, message, cert, uid string, seq uint64) {
		r := Record{Decision: Issued, Signer: signer, Message: message, Certificate: cert, ObjectUID: uid,
			Anchors: []string{uid}, Authority: &Authority{CAs: []AuthorityCA{{Fingerprint: signer, Certificate: cert}}}}
		r.Normalize()
		b := r.EncodeBody()
		r.Seq, r.Time, r.PrevHash = seq, time.Unix(1800000000, 5).UTC(), ZeroHash
		want, werr := r.Seal()
		got, gerr := r.SealBody(b)
		if werr != nil || gerr != nil || !bytes.Equal(got, want) {
			t.Fatalf("sealBody = %s (%v)\nseal     = %s (%v)", got, gerr, want, werr)
		}
	})
}
