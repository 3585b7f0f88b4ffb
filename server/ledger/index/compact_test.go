package index

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// randomEntries makes n entries from seq first on with serials and UIDs drawn from small
// pools (so they repeat, across runs), times that step back now and then, a State record in six.
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

// compactAll runs Compact until it has no work left.
func compactAll(t *testing.T, x *Index, budget int) (steps int) {
	t.Helper()
	for {
		more, err := x.Compact(budget)
		if err != nil {
			t.Fatalf("Compact(%d): %v", budget, err)
		}
		if !more {
			return steps
		}
		steps++
	}
}

// checkRuns checks the runs against their definition once compaction is done: no level holds
// fanout runs, the dir's counts add up to the ids indexed, and no block belongs to a run the
// dir does not list.
func checkRuns(t *testing.T, x *Index, m *model) {
	t.Helper()
	var serials, uids uint64
	for _, e := range m.entries {
		if _, err := serialID(e.Serial); e.Serial != "" && err == nil {
			serials++
		}
		if e.ObjectUID != "" {
			uids++
		}
	}
	err := x.db.View(func(tx *bolt.Tx) error {
		for _, tc := range []struct {
			t    table
			want uint64
		}{{tableSerial, serials}, {tableUID, uids}} {
			_, infos, err := listRuns(tx, tc.t)
			if err != nil {
				return err
			}
			var n uint64
			levels := map[uint8]int{}
			for _, info := range infos {
				n += info.count
				if levels[info.level]++; levels[info.level] >= fanout {
					return fmt.Errorf("%s: level %d holds %d runs after compaction", tc.t.name, info.level, levels[info.level])
				}
			}
			if n != tc.want {
				return fmt.Errorf("%s: the runs hold %d entries, want %d", tc.t.name, n, tc.want)
			}
		}
		g, err := findGarbage(tx)
		if err == nil && len(g) > 0 {
			err = fmt.Errorf("blocks of unlisted runs remain: %v", g)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCompactionRandomOperations runs Add, compaction steps of any budget, and reopening
// (also in the middle of a merge, whose output is then deleted and the merge done again) in a
// random order, with ids that repeat across runs and share hashes, and checks every answer
// after each operation.
func TestCompactionRandomOperations(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			x, path := openTest(t)
			x.hashShift = 59 // 32 hashes for 100 ids: blocks and runs full of collisions
			rng := rand.New(rand.NewPCG(uint64(round), 14))
			var m model
			for range 70 {
				switch r := rng.IntN(20); {
				case r < 10:
					m.add(t, x, randomEntries(rng, uint64(len(m.entries))+1, 1+rng.IntN(40)))
				case r < 19:
					for range 1 + rng.IntN(6) {
						if _, err := x.Compact(1 + rng.IntN(40)); err != nil {
							t.Fatal(err)
						}
					}
				default:
					x = reopen(t, x, path, Options{NoSync: true})
				}
				m.check(t, x)
			}
			compactAll(t, x, 1+rng.IntN(40))
			m.check(t, x)
			checkRuns(t, x, &m)
			if s, u, pending, err := x.Runs(); err != nil || pending || s > 3*(fanout-1) || u > 3*(fanout-1) {
				t.Fatalf("Runs() = %d, %d, %t, %v; want at most %d each (35 adds: three levels), none pending", s, u, pending, err, 3*(fanout-1))
			}
		})
	}
}

// TestMergeCutShortIsDoneAgain: a merge that stored part of its run when the index closed is
// not listed; the next Open finds its blocks, Compact deletes them and merges again.
func TestMergeCutShortIsDoneAgain(t *testing.T) {
	x, path := openTest(t)
	var m model
	for i := range fanout {
		m.add(t, x, entries(uint64(i*500+1), 500))
	}
	if more, err := x.Compact(100); err != nil || !more {
		t.Fatalf("first merge step: %t, %v", more, err)
	}
	x = reopen(t, x, path, Options{NoSync: true})
	var garbage []garbageRun
	if err := x.db.View(func(tx *bolt.Tx) (err error) { garbage, err = findGarbage(tx); return err }); err != nil || len(garbage) != 1 {
		t.Fatalf("after reopening mid-merge: unlisted runs %v, %v; want the merge's output", garbage, err)
	}
	m.check(t, x)
	if steps := compactAll(t, x, 100); steps < 2 {
		t.Fatalf("compaction took %d steps, want the deletion and the merge again", steps)
	}
	m.check(t, x)
	checkRuns(t, x, &m)
}

// TestAddWritesIndependentOfHistory: what one Add writes is proportional to its batch, not to
// the ids already indexed. bbolt counts the pages each transaction writes: an Add of 2,000
// ids into an index of 200,000 must write about what it writes into one of 10,000. (A hash
// table whose groups each Add appends to rewrites the pages the batch falls in, more of them
// as the table grows.)
func TestAddWritesIndependentOfHistory(t *testing.T) {
	x, _ := openTest(t)
	rng := rand.New(rand.NewPCG(3, 4))
	start := t0
	seq := uint64(1)
	grow := func(to int) {
		for int(seq) <= to {
			n := min(20000, to+1-int(seq))
			if err := x.Add(ledgerLike(rng, seq, n, start), int64(seq)+int64(n)-1); err != nil {
				t.Fatal(err)
			}
			seq += uint64(n)
			compactAll(t, x, 1<<16)
		}
	}
	written := func() int64 {
		st := x.db.Stats()
		before := st.TxStats.GetWrite()
		n := 2000
		if err := x.Add(ledgerLike(rng, seq, n, start), int64(seq)+int64(n)-1); err != nil {
			t.Fatal(err)
		}
		seq += uint64(n)
		st = x.db.Stats()
		return st.TxStats.GetWrite() - before
	}
	grow(10000)
	small := written()
	grow(200000)
	large := written()
	t.Logf("pages written by an Add of 2,000: %d at 10,000 records, %d at 200,000", small, large)
	if float64(large) > 1.5*float64(small) {
		t.Fatalf("an Add of 2,000 wrote %d pages at 200,000 records and %d at 10,000: it grows with the history", large, small)
	}
}
