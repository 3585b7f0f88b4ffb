package idempotency_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// windowed is entry(uid, request) replayable until t0 + window.
func windowed(uid, request string, window time.Duration) idempotency.Entry {
	e := entry(uid, request)
	e.ReplayUntil = t0.Add(window)
	return e
}

// TestReplayUntil: an answer with a ReplayUntil is a Hit before it and Reissued from it on,
// when Do issues anew and the new answer replaces the old one; another request for the UID is
// a Conflict whether or not the window is over, until retention ends.
func TestReplayUntil(t *testing.T) {
	t.Parallel()
	s, clk := newStore(idempotency.Options{})
	s.Remember(windowed("uid-1", "pcr", 4*time.Minute))
	clk.SetTime(t0.Add(4*time.Minute - time.Nanosecond))
	if got, res := s.Lookup("uid-1", hashOf("pcr")); res != idempotency.Hit || got.Serial != "0a1b" {
		t.Fatalf("just before ReplayUntil: %v, want a hit", res)
	}
	clk.SetTime(t0.Add(4 * time.Minute))
	if got, res := s.Lookup("uid-1", hashOf("pcr")); res != idempotency.Reissued || got.Chain != nil {
		t.Fatalf("at ReplayUntil: %v %+v, want reissued and no entry", res, got)
	}
	if _, res := s.Lookup("uid-1", hashOf("other")); res != idempotency.Conflict {
		t.Errorf("another request past the window: %v, want conflict", res)
	}
	renewed := entry("uid-1", "pcr")
	renewed.Serial, renewed.ReplayUntil = "0c0d", t0.Add(8*time.Minute)
	got, res, err := s.Do(context.Background(), "uid-1", hashOf("pcr"), func(context.Context) (idempotency.Entry, error) { return renewed, nil })
	if err != nil || res != idempotency.Reissued || got.Serial != "0c0d" {
		t.Fatalf("Do past the window = %v %v %+v, want the new answer, reissued", err, res, got)
	}
	if got, res := s.Lookup("uid-1", hashOf("pcr")); res != idempotency.Hit || got.Serial != "0c0d" || !got.IssuedAt.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("after the reissue: %v %+v, want a hit on the new answer", res, got)
	}
	if st := s.Stats(); st.Entries != 1 {
		t.Errorf("%d entries, want the one replaced", st.Entries)
	}
	clk.SetTime(t0.Add(4*time.Minute + idempotency.DefaultRetention))
	if _, res := s.Lookup("uid-1", hashOf("other")); res != idempotency.Miss {
		t.Errorf("another request after retention: %v, want miss", res)
	}
}

// TestReplayUntilConcurrent: callers arriving together after the window get one new answer.
func TestReplayUntilConcurrent(t *testing.T) {
	t.Parallel()
	s, clk := newStore(idempotency.Options{})
	s.Remember(windowed("uid-1", "pcr", time.Minute))
	clk.SetTime(t0.Add(time.Hour))
	var runs atomic.Int32
	serials := make([]string, 8)
	var wg sync.WaitGroup
	for i := range serials {
		wg.Go(func() {
			e, _, err := s.Do(context.Background(), "uid-1", hashOf("pcr"), func(context.Context) (idempotency.Entry, error) {
				n := runs.Add(1)
				time.Sleep(10 * time.Millisecond)
				e := windowed("uid-1", "pcr", 2*time.Hour)
				e.Serial = "new-" + string(rune('0'+n))
				return e, nil
			})
			if err != nil {
				t.Error(err)
			}
			serials[i] = e.Serial
		})
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Errorf("fn ran %d times, want once", runs.Load())
	}
	for i, sn := range serials {
		if sn != "new-1" {
			t.Errorf("caller %d got %q, want the one new answer", i, sn)
		}
	}
}

// TestLoadReplayUntil: Options.ReplayUntil gives loaded answers their window, and of two
// records for the same request the later replaces the earlier once the earlier's window is
// over, so a restart serves the most recent issuance.
func TestLoadReplayUntil(t *testing.T) {
	t.Parallel()
	window := func(r ledger.Record) time.Time { return r.NotBefore.Add(4 * time.Minute) }
	s, clk := newStore(idempotency.Options{ReplayUntil: window})
	rec := func(serial string, nb time.Time) ledger.Record {
		e := entry("uid-1", "pcr")
		return ledger.Record{
			Seq: 1, Time: nb.Add(time.Minute), Decision: ledger.Issued, Client: "watcher", ObjectUID: "uid-1", RequestHash: hex.EncodeToString(e.RequestHash),
			Serial: serial, NotBefore: nb, NotAfter: nb.Add(time.Hour), Certificate: string(e.Chain),
		}
	}
	clk.SetTime(t0.Add(6 * time.Minute))
	if n := s.Load(rec("first", t0.Add(-time.Minute)), rec("second", t0.Add(4*time.Minute))); n != 2 {
		t.Fatalf("Load stored %d answers, want both (the second replacing the first)", n)
	}
	if got, res := s.Lookup(idempotency.Scope("watcher", "uid-1"), hashOf("pcr")); res != idempotency.Hit || got.Serial != "second" || !got.ReplayUntil.Equal(t0.Add(8*time.Minute)) {
		t.Errorf("after Load: %v %+v, want a hit on the second issuance until t0+8m", res, got)
	}
	clk.SetTime(t0.Add(8 * time.Minute))
	if _, res := s.Lookup(idempotency.Scope("watcher", "uid-1"), hashOf("pcr")); res != idempotency.Reissued {
		t.Errorf("at the loaded window's end: %v, want reissued", res)
	}
}

// TestPodRequestHashSeparatesEveryField: every field that shapes or gates a pod certificate
// changes the hash, map order does not, and a pod request never hashes like a CSR request.
func TestPodRequestHashSeparatesEveryField(t *testing.T) {
	t.Parallel()
	base := func() issuance.PodRequest {
		return issuance.PodRequest{
			SignerName: "example.com/pods",
			Pod: issuance.PodIdentity{Namespace: "ns", PodName: "p", PodUID: "pu", ServiceAccountName: "sa",
				ServiceAccountUID: "su", NodeName: "n", NodeUID: "nu"},
			StubPKCS10Request: []byte{1, 2}, MaxExpirationSeconds: 3600,
			UnverifiedUserAnnotations: map[string]string{"a.io/x": "1", "b.io/y": "2"},
		}
	}
	edits := map[string]func(*issuance.PodRequest){
		"signer":           func(r *issuance.PodRequest) { r.SignerName = "example.com/other" },
		"namespace":        func(r *issuance.PodRequest) { r.Pod.Namespace = "ns2" },
		"namespace/pod":    func(r *issuance.PodRequest) { r.Pod.Namespace, r.Pod.PodName = "nsp", "" },
		"pod name":         func(r *issuance.PodRequest) { r.Pod.PodName = "p2" },
		"pod UID":          func(r *issuance.PodRequest) { r.Pod.PodUID = "pu2" },
		"service account":  func(r *issuance.PodRequest) { r.Pod.ServiceAccountName = "sa2" },
		"SA UID":           func(r *issuance.PodRequest) { r.Pod.ServiceAccountUID = "su2" },
		"node":             func(r *issuance.PodRequest) { r.Pod.NodeName = "n2" },
		"node UID":         func(r *issuance.PodRequest) { r.Pod.NodeUID = "nu2" },
		"stub":             func(r *issuance.PodRequest) { r.StubPKCS10Request = []byte{1, 3} },
		"stub as key":      func(r *issuance.PodRequest) { r.StubPKCS10Request, r.PKIXPublicKey = nil, []byte{1, 2} },
		"key as proof":     func(r *issuance.PodRequest) { r.StubPKCS10Request, r.ProofOfPossession = nil, []byte{1, 2} },
		"max expiration":   func(r *issuance.PodRequest) { r.MaxExpirationSeconds = 3601 },
		"annotation value": func(r *issuance.PodRequest) { r.UnverifiedUserAnnotations["a.io/x"] = "2" },
		"annotation key":   func(r *issuance.PodRequest) { r.UnverifiedUserAnnotations["c.io/z"] = "" },
		"annotation shift": func(r *issuance.PodRequest) {
			r.UnverifiedUserAnnotations = map[string]string{"a.io/x1": "", "b.io/y": "2"}
		},
	}
	seen := map[string]string{hex.EncodeToString(idempotency.PodRequestHash(base())): "base"}
	for name, edit := range edits {
		r := base()
		edit(&r)
		h := hex.EncodeToString(idempotency.PodRequestHash(r))
		if other, dup := seen[h]; dup {
			t.Errorf("%s hashes like %s", name, other)
		}
		seen[h] = name
	}
	reordered := base()
	reordered.UnverifiedUserAnnotations = map[string]string{"b.io/y": "2", "a.io/x": "1"}
	if !bytes.Equal(idempotency.PodRequestHash(reordered), idempotency.PodRequestHash(base())) {
		t.Error("the same request hashes differently")
	}
	if bytes.Equal(idempotency.PodRequestHash(issuance.PodRequest{}), idempotency.RequestHash("", nil, nil, nil, "", "", nil, nil)) {
		t.Error("an empty pod request hashes like an empty CSR request")
	}
}
