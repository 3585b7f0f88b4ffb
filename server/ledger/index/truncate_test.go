package index

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomEntries makes n entries from seq first on with serials and UIDs drawn from small
// pools (so they repeat), times that step back now and then, a State record in six.
func randomEntries(rng *rand.Rand, first uint64, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		seq := first + uint64(i)
		es[i] = Entry{
			Seq: seq, Pos: Pos{Segment: 1 + uint32(seq/100), Offset: int64(seq%100) * 300, Length: 299},
			Time: t0.Add(time.Duration(int(seq)-rng.IntN(30)) * time.Second), Hash: fmt.Sprintf("%x", rng.Uint64()),
			ObjectUID: fmt.Sprintf("uid-%d", rng.IntN(40)), State: rng.IntN(6) == 0,
		}
		if rng.IntN(3) > 0 {
			es[i].Serial = fmt.Sprintf("%x", rng.IntN(60))
		}
		if rng.IntN(5) == 0 {
			es[i].ObjectUID = ""
		}
	}
	return es
}

func TestTruncateAfterThenAdd(t *testing.T) {
	x, path := openTest(t)
	rng := rand.New(rand.NewPCG(10, 11))
	var m model
	m.add(t, x, randomEntries(rng, 1, 500))
	if err := x.SetFormat(7); err != nil {
		t.Fatal(err)
	}
	// The same seq; within a block; at the end and at the start of a block; the first; none.
	for _, seq := range []uint64{500, 321, 320, 257, 64, 65, 1, 0} {
		m.truncate(t, x, seq)
		m.check(t, x)
		if meta, _ := x.Meta(); meta.Format != 7 {
			t.Fatalf("Format after TruncateAfter(%d) = %d, want 7", seq, meta.Format)
		}
		m.add(t, x, randomEntries(rng, seq+1, 1+rng.IntN(150)))
		m.check(t, x)
	}
	x = reopen(t, x, path, Options{NoSync: true})
	m.check(t, x)
	n := uint64(len(m.entries))
	wantErr(t, x.TruncateAfter(n+1, "h", 0), []error{ErrBehind}, fmt.Sprint(n+1), fmt.Sprint(n))
	wantErr(t, x.TruncateAfter(n, "h", -1), []error{ErrInvalidEntry})
	m.check(t, x)
}

// TestRandomOperations runs Add, TruncateAfter and reopening in a random order and checks
// every answer after each.
func TestRandomOperations(t *testing.T) {
	defer func(n int) { truncateChunk = n }(truncateChunk)
	truncateChunk = 3 // several passes over the groups, also when a pass deletes its last
	x, path := openTest(t)
	rng := rand.New(rand.NewPCG(12, 13))
	var m model
	for range 40 {
		switch r := rng.IntN(10); {
		case r < 6:
			m.add(t, x, randomEntries(rng, uint64(len(m.entries))+1, 1+rng.IntN(200)))
		case r < 9:
			m.truncate(t, x, uint64(rng.IntN(len(m.entries)+1)))
		default:
			x = reopen(t, x, path, Options{NoSync: true})
		}
		m.check(t, x)
	}
}
