package attest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/attest"
)

func TestMemoryState(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s := attest.NewMemoryState()

	// A challenge is taken once, and not after it lapsed.
	if err := s.PutChallenge("c1", attest.Pending{Node: "n", Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.TakeChallenge("c1", now); !ok {
		t.Fatal("the challenge is not there")
	}
	if _, ok := s.TakeChallenge("c1", now); ok {
		t.Fatal("a challenge was taken twice")
	}
	_ = s.PutChallenge("c2", attest.Pending{Expires: now.Add(time.Minute)}, now)
	if _, ok := s.TakeChallenge("c2", now.Add(time.Minute)); ok {
		t.Fatal("a lapsed challenge was taken")
	}

	// A ticket is spent by one holder; the same holder may present it again.
	if err := s.SpendTicket("t1", now.Add(time.Minute), "scope/hash-a", now); err != nil {
		t.Fatal(err)
	}
	if err := s.SpendTicket("t1", now.Add(time.Minute), "scope/hash-a", now); err != nil {
		t.Fatalf("the same request presenting its ticket again: %v", err)
	}
	if err := s.SpendTicket("t1", now.Add(time.Minute), "scope/hash-b", now); !errors.Is(err, attest.ErrTicketSpent) {
		t.Fatalf("another request spending a spent ticket: %v", err)
	}
	if !s.TicketSpent("t1", "scope/hash-b") || s.TicketSpent("t1", "scope/hash-a") || s.TicketSpent("t2", "x") {
		t.Fatal("TicketSpent disagrees with SpendTicket")
	}

	// One EK binds one node, one node one EK.
	if err := s.Bind("node-a", "ek1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind("node-a", "ek1"); err != nil {
		t.Fatalf("binding the same pair again: %v", err)
	}
	for _, c := range [][2]string{{"node-a", "ek2"}, {"node-b", "ek1"}} {
		if err := s.Bind(c[0], c[1]); !errors.Is(err, attest.ErrBound) {
			t.Fatalf("Bind(%s, %s) = %v, want ErrBound", c[0], c[1], err)
		}
	}
	s.Unbind("node-a", "ek2") // not that binding: nothing changes
	if ek, ok := s.Binding("node-a"); !ok || ek != "ek1" {
		t.Fatalf("Binding(node-a) = %q, %v", ek, ok)
	}
	s.Unbind("node-a", "ek1")
	if _, ok := s.NodeOf("ek1"); ok {
		t.Fatal("the EK is still bound after Unbind")
	}
	if err := s.Bind("node-b", "ek1"); err != nil {
		t.Fatalf("binding the EK to another node after Unbind: %v", err)
	}
}
