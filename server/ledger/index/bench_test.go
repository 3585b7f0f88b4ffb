package index

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ledgerLike makes n entries from seq first on, shaped like a busy ledger's: lines of 1.5 to
// 4 KiB one after the other in 64 MiB segments, a millisecond or so apart with the clock
// stepping back a second now and then, nine in ten issued (a random 128-bit serial), all
// with an object UID (a UUID), one in a thousand a State record.
func ledgerLike(rng *rand.Rand, first uint64, n int, start time.Time) []Entry {
	es := make([]Entry, n)
	seg, off := uint32(1), int64(0)
	t := start
	for i := range es {
		length := uint32(1500 + rng.IntN(2500))
		if off+int64(length)+1 > 64<<20 {
			seg, off = seg+1, 0
		}
		t = t.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
		if rng.IntN(10000) == 0 {
			t = t.Add(-time.Second)
		}
		e := Entry{
			Seq:       first + uint64(i),
			Pos:       Pos{Segment: seg, Offset: off, Length: length},
			Time:      t,
			Hash:      fmt.Sprintf("%064x", rng.Uint64()),
			ObjectUID: uuid(rng),
			State:     rng.IntN(1000) == 0,
		}
		if rng.IntN(10) != 0 {
			e.Serial = fmt.Sprintf("%x%016x", rng.Uint64()>>1, rng.Uint64())
		}
		es[i] = e
		off += int64(length) + 1
	}
	return es
}

func uuid(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, 0x8000|b>>48&0x3fff, b&0xffffffffffff)
}

// BenchmarkAdd builds a 1 M-entry index in batches of 512, durably (NoSync false), and
// reports the rate and the file's bytes per entry. Run it with -benchtime=1x.
func BenchmarkAdd(b *testing.B) {
	const total, batch = 1 << 20, 512
	rng := rand.New(rand.NewPCG(1, 2))
	es := ledgerLike(rng, 1, total, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "index.db")
		x, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for i := 0; i < total; i += batch {
			if err := x.Add(es[i:i+batch], int64(i+batch)); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		st := x.Stats()
		if err := x.Close(); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "entries/s")
		b.ReportMetric(float64(fi.Size())/total, "file-B/entry")
		b.ReportMetric(float64(st.DataSize)/total, "data-B/entry")
		b.StartTimer()
	}
}

// BenchmarkLookup queries a 1 M-entry index (built without fsync; the file is then in the
// page cache): BySerial and ByObjectUID of ids held by one record each, Pos, FirstSince.
func BenchmarkLookup(b *testing.B) {
	const total, batch = 1 << 20, 512
	rng := rand.New(rand.NewPCG(3, 4))
	es := ledgerLike(rng, 1, total, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	x, err := Open(filepath.Join(b.TempDir(), "index.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for i := 0; i < total; i += batch {
		if err := x.Add(es[i:i+batch], int64(i+batch)); err != nil {
			b.Fatal(err)
		}
	}
	var issued []Entry
	for _, e := range es {
		if e.Serial != "" {
			issued = append(issued, e)
		}
	}
	// pick walks the entries in a scattered order.
	pick := func(i int, es []Entry) Entry { return es[(i*7919)%len(es)] }
	b.Run("BySerial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e := pick(i, issued)
			if seqs, err := x.BySerial(e.Serial); err != nil || len(seqs) != 1 || seqs[0] != e.Seq {
				b.Fatal(seqs, err)
			}
			i++
		}
	})
	b.Run("ByObjectUID", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e := pick(i, es)
			if seqs, err := x.ByObjectUID(e.ObjectUID); err != nil || len(seqs) != 1 || seqs[0] != e.Seq {
				b.Fatal(seqs, err)
			}
			i++
		}
	})
	b.Run("Pos", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e := pick(i, es)
			if p, ok, err := x.Pos(e.Seq); err != nil || !ok || p != e.Pos {
				b.Fatal(p, ok, err)
			}
			i++
		}
	})
	b.Run("FirstSince", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := x.FirstSince(pick(i, es).Time); err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}
