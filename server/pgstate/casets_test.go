package pgstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/ledger/record"
)

func authority(state string) record.Authority {
	return record.Authority{CAs: []record.AuthorityCA{{Fingerprint: "ab12", State: state, Certificate: "-----BEGIN CERTIFICATE-----\n…"}}}
}

// TestCASetsSwapAndReachEveryServer: a CA staged on server A is seen by B within 2 s, with no
// reload of B; B's change over a version it did not see is refused (ErrVersion), over the one
// it saw taken, and seen by A; after the database restarts, B's watch comes back and tells
// it to reload.
func TestCASetsSwapAndReachEveryServer(t *testing.T) {
	s := pgtest.Start(t)
	a := NewCASets(migrated(t, s, "casets"))
	b := NewCASets(secondPool(t, s, "casets"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seenA, seenB := make(chan string, 16), make(chan string, 16)
	go func() { _ = a.Watch(ctx, func(signer string) { seenA <- signer }, nil) }()
	go func() { _ = b.Watch(ctx, func(signer string) { seenB <- signer }, nil) }()
	wait := func(ch chan string, want string) {
		t.Helper()
		deadline := time.After(2 * time.Second)
		for {
			select {
			case got := <-ch:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("%q not seen within 2 s", want)
			}
		}
	}
	wait(seenA, "")
	wait(seenB, "")

	v, err := a.Swap(ctx, "example.com/signer", 0, authority("staged"))
	if err != nil || v != 1 {
		t.Fatalf("A stages: %d, %v", v, err)
	}
	wait(seenB, "example.com/signer")
	sets, err := b.Load(ctx)
	if err != nil || sets["example.com/signer"].Version != 1 || sets["example.com/signer"].Authority.CAs[0].State != "staged" {
		t.Fatalf("B loads: %+v, %v", sets, err)
	}
	if _, err := b.Swap(ctx, "example.com/signer", 0, authority("active")); !errors.Is(err, ErrVersion) {
		t.Fatalf("B over a version it did not see: %v, want ErrVersion", err)
	}
	if v, err := b.Swap(ctx, "example.com/signer", 1, authority("active")); err != nil || v != 2 {
		t.Fatalf("B activates over version 1: %d, %v", v, err)
	}
	wait(seenA, "example.com/signer")

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	wait2 := func(ch chan string) {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got := <-ch:
				if got == "" {
					return
				}
			case <-deadline:
				t.Fatal("the watch did not come back after the database restarted")
			}
		}
	}
	wait2(seenB)
	for i := 0; ; i++ { // A's pooled connections died with the database: a first call may meet one
		_, err := a.Swap(ctx, "example.com/signer", 2, authority("retired"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || i == 20 {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wait(seenB, "example.com/signer")
}
