package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestFirstSinceClockSteps(t *testing.T) {
	x, _ := openTest(t)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// seq:  1   2  3   4   5   6   7   8
	// time: 10  20 5   30  25  30  29  31 (seconds after t0)
	es := entries(1, 8)
	for i, s := range []int{10, 20, 5, 30, 25, 30, 29, 31} {
		es[i].Time = sec(s)
	}
	var m model
	m.add(t, x, es[:3])
	m.add(t, x, es[3:])
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{
		{time.Time{}, 1}, {sec(-100), 1}, {sec(5), 1}, {sec(10), 1}, {sec(10).Add(1), 2},
		{sec(6), 1}, {sec(21), 4}, {sec(25), 4}, {sec(30), 4}, {sec(30).Add(1), 8}, {sec(31), 8},
		{sec(31).Add(1), 0}, {sec(1000), 0}, {time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		got, ok, err := x.FirstSince(tc.at)
		if err != nil || got != tc.want || ok != (tc.want != 0) {
			t.Errorf("FirstSince(t0%+v) = %d, %t, %v; want %d", tc.at.Sub(t0), got, ok, err, tc.want)
		}
	}
	m.check(t, x)
}

// TestFirstSinceTies: with the latest time repeated across a block boundary, the first
// record with it is the answer, at every size from the tie's first record on.
func TestFirstSinceTies(t *testing.T) {
	x, _ := openTest(t)
	es := entries(1, 140)
	for i := range es {
		es[i].Time = t0.Add(time.Duration(min(i, 59)) * time.Second)
	}
	var m model
	m.add(t, x, es[:60])
	for i := 60; i < len(es); i += 4 {
		m.add(t, x, es[i:i+4])
		if got, ok, err := x.FirstSince(es[59].Time); err != nil || !ok || got != 60 {
			t.Fatalf("at seq %d: FirstSince(time of seqs 60 on) = %d, %t, %v; want 60", i+4, got, ok, err)
		}
		m.check(t, x)
	}
}

func TestFirstSinceEmpty(t *testing.T) {
	x, _ := openTest(t)
	if seq, ok, err := x.FirstSince(time.Time{}); ok || err != nil {
		t.Fatalf("FirstSince on an empty index = %d, %t, %v", seq, ok, err)
	}
}

// TestFirstSinceRandomSteps checks FirstSince against brute force over times that mostly
// rise, sometimes repeat and sometimes step back (a little or a lot, within a block and
// across blocks), added in batches of any size.
func TestFirstSinceRandomSteps(t *testing.T) {
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			x, _ := openTest(t)
			rng := rand.New(rand.NewPCG(uint64(round), 9))
			var m model
			now := t0
			seq := uint64(1)
			for seq < 700 {
				es := entries(seq, 1+rng.IntN(90))
				for i := range es {
					switch r := rng.IntN(20); {
					case r == 0:
						now = now.Add(-time.Duration(rng.IntN(100)) * time.Second)
					case r == 1:
						now = now.Add(-time.Duration(rng.IntN(1000)) * time.Nanosecond)
					case r < 4: // the same time again
					case r == 4:
						now = t0.Add(time.Duration(rng.IntN(1000)) * time.Second) // anywhere
					default:
						now = now.Add(time.Duration(rng.IntN(int(time.Second))))
					}
					es[i].Time = now
				}
				m.add(t, x, es)
				seq += uint64(len(es))
			}
			m.check(t, x)
		})
	}
}

func TestStateSeqs(t *testing.T) {
	x, path := openTest(t)
	if got, err := x.StateSeqs(); err != nil || len(got) != 0 {
		t.Fatalf("StateSeqs() on an empty index = %v, %v", got, err)
	}
	es := entries(1, 300)
	want := []uint64{}
	for i := range es {
		if i%37 == 0 || i == 299 || i == 64 {
			es[i].State = true
			want = append(want, es[i].Seq)
		}
	}
	var m model
	m.add(t, x, es[:65])
	m.add(t, x, es[65:])
	x = reopen(t, x, path, Options{ReadOnly: true})
	if got, err := x.StateSeqs(); err != nil || !slices.Equal(got, want) {
		t.Fatalf("StateSeqs() = %v, %v; want %v", got, err, want)
	}
	m.check(t, x)
}
