// Package attesttest checks an attest.State implementation against what the attestation
// service relies on, for every implementation alike (the memory state, a fleet's database).
package attesttest

import (
	"errors"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/attest"
)

// Check runs the State contract on a and b, two handles on one state (two servers of a fleet;
// the same value twice for one server): what one does, the other sees. The state must start
// empty.
func Check(t *testing.T, a, b attest.State) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)

	// A challenge is taken once, by either server, and not after it lapsed.
	if err := a.PutChallenge("c1", attest.Pending{Node: "n", Secret: []byte("s"), Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if p, ok := b.TakeChallenge("c1", now); !ok || p.Node != "n" || string(p.Secret) != "s" || !p.Expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("the other server took %+v, %v; want the challenge as put", p, ok)
	}
	if _, ok := a.TakeChallenge("c1", now); ok {
		t.Fatal("a challenge was taken twice")
	}
	if err := a.PutChallenge("c2", attest.Pending{Secret: []byte("s"), Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.TakeChallenge("c2", now.Add(time.Minute)); ok {
		t.Fatal("a lapsed challenge was taken")
	}

	// A ticket is spent by one holder across the servers; the same holder may present it
	// again.
	if err := a.SpendTicket("t1", now.Add(time.Minute), "scope/hash-a", now); err != nil {
		t.Fatal(err)
	}
	if err := b.SpendTicket("t1", now.Add(time.Minute), "scope/hash-a", now); err != nil {
		t.Fatalf("the same request presenting its ticket again: %v", err)
	}
	if err := b.SpendTicket("t1", now.Add(time.Minute), "scope/hash-b", now); !errors.Is(err, attest.ErrTicketSpent) {
		t.Fatalf("another request spending a spent ticket: %v", err)
	}
	if !b.TicketSpent("t1", "scope/hash-b") || a.TicketSpent("t1", "scope/hash-a") || a.TicketSpent("t2", "x") {
		t.Fatal("TicketSpent disagrees with SpendTicket")
	}

	// One EK binds one node, one node one EK, whichever server binds.
	if err := a.Bind("node-a", "ek1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Bind("node-a", "ek1"); err != nil {
		t.Fatalf("binding the same pair again: %v", err)
	}
	for _, c := range [][2]string{{"node-a", "ek2"}, {"node-b", "ek1"}} {
		if err := b.Bind(c[0], c[1]); !errors.Is(err, attest.ErrBound) {
			t.Fatalf("Bind(%s, %s) = %v, want ErrBound", c[0], c[1], err)
		}
	}
	if _, ok := b.Binding("node-b"); ok {
		t.Fatal("a refused binding was kept")
	}
	b.Unbind("node-a", "ek2") // not that binding: nothing changes
	if ek, ok := b.Binding("node-a"); !ok || ek != "ek1" {
		t.Fatalf("Binding(node-a) = %q, %v", ek, ok)
	}
	if node, ok := a.NodeOf("ek1"); !ok || node != "node-a" {
		t.Fatalf("NodeOf(ek1) = %q, %v", node, ok)
	}
	b.Unbind("node-a", "ek1")
	if _, ok := a.NodeOf("ek1"); ok {
		t.Fatal("the EK is still bound after Unbind")
	}
	if err := a.Bind("node-b", "ek1"); err != nil {
		t.Fatalf("binding the EK to another node after Unbind: %v", err)
	}
}
