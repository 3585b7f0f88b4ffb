package index

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// entries makes n plain entries from seq first on: consecutive lines of segment 1, a
// second apart from t0, each with its own serial and UID.
func entries(first uint64, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		seq := first + uint64(i)
		es[i] = Entry{
			Seq: seq, Pos: Pos{Segment: 1, Offset: int64(seq) * 1000, Length: 999},
			Time: t0.Add(time.Duration(seq) * time.Second), Hash: fmt.Sprintf("h%d", seq),
			Serial: fmt.Sprintf("%x", 0x1000+seq), ObjectUID: fmt.Sprintf("uid-%d", seq),
		}
	}
	return es
}

func TestAddMetaPosRoundtrip(t *testing.T) {
	x, path := openTest(t)
	var m model
	m.check(t, x)
	rng := rand.New(rand.NewPCG(5, 6))
	seq := uint64(1)
	seg, off := uint32(1), int64(0)
	// Batches that start, end and straddle blocks; positions that follow one another, jump,
	// go back to 0, change segment, lie past 4 GiB; zero lengths; state and plain records.
	for _, n := range []int{1, 62, 1, 64, 100, 7, 200, 1} {
		es := make([]Entry, n)
		for i := range es {
			switch rng.IntN(8) {
			case 0:
				seg, off = seg+1, 0
			case 1:
				seg, off = seg+1, int64(rng.IntN(100))
			case 2:
				off += 1 << 33
			case 3:
				off = 0
			}
			length := uint32(rng.IntN(5000))
			if rng.IntN(10) == 0 {
				length = 0
			}
			es[i] = Entry{Seq: seq, Pos: Pos{Segment: seg, Offset: off, Length: length},
				Time: t0.Add(time.Duration(seq) * time.Millisecond), Hash: fmt.Sprintf("%064x", seq),
				State: rng.IntN(5) == 0}
			off += int64(length) + 1
			seq++
		}
		m.add(t, x, es)
		m.check(t, x)
	}
	x = reopen(t, x, path, Options{NoSync: true})
	m.check(t, x)
	x = reopen(t, x, path, Options{ReadOnly: true})
	m.check(t, x)
}

func TestAddRefusesAndStoresNothing(t *testing.T) {
	x, _ := openTest(t)
	var m model
	m.add(t, x, entries(1, 10))
	bad := entries(11, 3)
	bad[2].Seq = 14
	noSegment := entries(11, 2)
	noSegment[1].Pos.Segment = 0
	backwards := entries(11, 2)
	backwards[1].Pos.Offset = -1
	for _, tc := range []struct {
		name    string
		es      []Entry
		tree    int64
		targets []error
		texts   []string
	}{
		{"gap", entries(12, 3), 14, []error{ErrBehind}, []string{"seq 12", "seq 10"}},
		{"overlap", entries(10, 3), 13, []error{ErrOverlap}, []string{"seq 10", "seq 10"}},
		{"from the start", entries(1, 20), 20, []error{ErrOverlap}, []string{"seq 1,", "seq 10"}},
		{"hole inside", bad, 13, []error{ErrNotConsecutive}, []string{"seq 14", "seq 12"}},
		{"seq 0", entries(0, 1), 1, []error{ErrInvalidEntry}, []string{"seq 0"}},
		{"segment 0", noSegment, 12, []error{ErrInvalidEntry}, []string{"seq 12"}},
		{"offset", backwards, 12, []error{ErrInvalidEntry}, []string{"seq 12"}},
		{"tree size", entries(11, 1), -1, []error{ErrInvalidEntry}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, x.Add(tc.es, tc.tree), tc.targets, tc.texts...)
			m.check(t, x)
			for _, e := range tc.es {
				if e.Seq > 10 {
					if _, ok, _ := x.Pos(e.Seq); ok {
						t.Fatalf("seq %d stored", e.Seq)
					}
					if got, _ := x.ByObjectUID(e.ObjectUID); len(got) != 0 {
						t.Fatalf("UID of seq %d stored: %v", e.Seq, got)
					}
				}
			}
		})
	}
	if st := x.Stats(); st.Added != 10 || st.Batches != 1 || st.FileSize == 0 || st.DataSize == 0 {
		t.Fatalf("Stats() = %+v", st)
	}
	if err := x.Add(nil, 99); err != nil {
		t.Fatal(err)
	}
	m.check(t, x)
	m.add(t, x, entries(11, 5))
	m.check(t, x)
}

func TestNormalizeSerial(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "A": "a", "0a": "a", "0x0A": "a", "0X0a": "a", "000a": "a", "0": "0", "00": "0",
		"0x0": "0", "0x": "", "a0": "a0", "0100": "100", "DeadBeef": "deadbeef", "": "", "g": "",
		"0xg": "", " a": "", "a ": "", "-a": "", "+a": "", "0x0x1": "", "x1": "", "１": "",
	} {
		got, err := NormalizeSerial(in)
		if want == "" {
			wantErr(t, err, []error{ErrInvalidSerial})
			continue
		}
		if err != nil || got != want {
			t.Errorf("NormalizeSerial(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestBySerial(t *testing.T) {
	x, _ := openTest(t)
	x.hashShift = 60 // 16 hashes: ids share them, and only the ids tell them apart
	serials := []string{"0a", "a0", "0", "0X0A", "00", "fF", "100", "1", strings.Repeat("7f", 20), "A"}
	// Two serials with one hash, one a prefix of the other in hex: only the id tells them apart.
	same := findSameHash(t, x, func(s string) []byte { id, _ := serialID(s); return id }, "ab", func(i int) string { return "ab" + strconv.FormatInt(int64(i), 16) })
	serials = append(serials, "ab", same)
	es := entries(1, len(serials))
	for i := range es {
		es[i].Serial = serials[i]
	}
	var m model
	m.add(t, x, es[:4])
	m.add(t, x, es[4:])
	m.check(t, x)
	for q, want := range map[string][]uint64{
		"a": {1, 4, 10}, "0x0a": {1, 4, 10}, "0A": {1, 4, 10}, "A0": {2}, "0": {3, 5}, "0x00": {3, 5},
		"ff": {6}, "0100": {7}, "1": {8}, "10": {}, "b": {}, strings.Repeat("7F", 20): {9},
		"0xab": {11}, same: {12}, "a" + same: {},
	} {
		if got, err := x.BySerial(q); err != nil || !slices.Equal(got, want) {
			t.Errorf("BySerial(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	for _, q := range []string{"", "0x", "g", "0xg", " a", "a\x00", "-1"} {
		_, err := x.BySerial(q)
		wantErr(t, err, []error{ErrInvalidSerial})
	}
}

func TestByObjectUID(t *testing.T) {
	x, path := openTest(t)
	x.hashShift = 60
	rng := rand.New(rand.NewPCG(7, 8))
	long := make([]byte, 4096)
	for i := range long {
		long[i] = byte(rng.UintN(256))
	}
	longer := string(long) + "\x00"
	other := []byte(string(long))
	other[4095] ^= 0xff
	const u = "0b7cbb4c-5d76-4d7e-9a55-3f2d4b6a7c8e"
	raw, _ := parseUUID(u)
	uids := []string{"ab", "abc", "a", "ab\x00", "ab\xff", "\x00", "\xff\xfe", "\x00\x00",
		string(long), longer, string(long[:4095]), string(other),
		u, strings.ToUpper(u), u + "0", u[:35], string(raw[:])}
	// Prefix-sharing UIDs that also share a hash, so the ids themselves are compared.
	uids = append(uids,
		findSameHash(t, x, uidID, "ab", func(i int) string { return "ab" + strconv.Itoa(i) }),
		findSameHash(t, x, uidID, "ab\x00", func(i int) string { return "ab\x00" + strconv.Itoa(i) }),
		findSameHash(t, x, uidID, u, func(i int) string { return u + strconv.Itoa(i) }))
	var m model
	seq := uint64(1)
	for round := 0; round < 3; round++ {
		es := entries(seq, len(uids))
		for i := range es {
			es[i].ObjectUID = uids[(i+round)%len(uids)]
			if round == 2 && i%2 == 0 {
				es[i].ObjectUID = "" // none
			}
		}
		m.add(t, x, es)
		seq += uint64(len(es))
	}
	m.check(t, x)
	x = reopen(t, x, path, Options{ReadOnly: true})
	m.check(t, x)
	for _, q := range append(slices.Clone(uids), "", "b", "ab\x00\x00", string(long[:100]), u[:8]) {
		got, err := x.ByObjectUID(q)
		if err != nil || !slices.Equal(got, m.byUID(q)) {
			t.Errorf("ByObjectUID(%q) = %v, %v; want %v", truncate(q), got, err, m.byUID(q))
		}
		if q != "" && slices.Contains(uids, q) && len(got) < 2 {
			t.Errorf("ByObjectUID(%q) = %v, want at least 2 seqs", truncate(q), got)
		}
	}
}

// findSameHash returns the first of next(0), next(1), … whose id (as encode makes it) has
// the hash of base's (x.hashShift makes that likely).
func findSameHash(t *testing.T, x *Index, encode func(string) []byte, base string, next func(int) string) string {
	t.Helper()
	want := x.hashID(encode(base))
	for i := 0; i < 1<<22; i++ {
		if s := next(i); x.hashID(encode(s)) == want {
			return s
		}
	}
	t.Fatalf("no id with the hash of %q", base)
	return ""
}

// TestConcurrentUse adds from two goroutines racing for the same seqs while others query:
// each batch is stored once, the loser told ErrOverlap, and readers see whole batches.
func TestConcurrentUse(t *testing.T) {
	x, _ := openTest(t)
	const batches, size = 40, 16
	done := make(chan error, 4)
	for w := 0; w < 2; w++ {
		go func() {
			for b := 0; b < batches; b++ {
				es := entries(uint64(b*size+1), size)
				for {
					err := x.Add(es, int64((b+1)*size))
					if err == nil || errors.Is(err, ErrOverlap) {
						break
					}
					if !errors.Is(err, ErrBehind) {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	for r := 0; r < 2; r++ {
		go func() {
			for {
				meta, err := x.Meta()
				if err != nil {
					done <- err
					return
				}
				if meta.Seq%size != 0 || meta.TreeSize != int64(meta.Seq) {
					done <- fmt.Errorf("meta %+v is not that of a whole batch", meta)
					return
				}
				if meta.Seq > 0 {
					if got, err := x.ByObjectUID(fmt.Sprintf("uid-%d", meta.Seq)); err != nil || !slices.Equal(got, []uint64{meta.Seq}) {
						done <- fmt.Errorf("ByObjectUID of seq %d = %v, %v", meta.Seq, got, err)
						return
					}
				}
				if meta.Seq == batches*size {
					done <- nil
					return
				}
			}
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	m := model{entries: entries(1, batches*size), treeSize: batches * size, lastHash: fmt.Sprintf("h%d", batches*size)}
	m.check(t, x)
	if st := x.Stats(); st.Added != batches*size || st.Batches != batches {
		t.Fatalf("Stats() = %+v, want %d entries in %d batches", st, batches*size, batches)
	}
}

// TestIDHashIsKeyedPerIndex: the hash of an id depends on the index's own secret, kept across
// reopens, so ids a caller picks to share one hash in one index do not in another.
func TestIDHashIsKeyedPerIndex(t *testing.T) {
	a, pathA := openTest(t)
	b, _ := openTest(t)
	if bytes.Equal(a.secret, b.secret) || len(a.secret) != 16 {
		t.Fatalf("two indexes share the id hash key %x", a.secret)
	}
	a.hashShift, b.hashShift = 48, 48 // 2^16 hashes: colliding ids can be found
	same := findSameHash(t, a, uidID, "ab", func(i int) string { return "ab" + strconv.Itoa(i) })
	if b.hashID(uidID(same)) == b.hashID(uidID("ab")) {
		// One chance in 2^16: try the next colliding id before failing.
		other := findSameHash(t, a, uidID, same, func(i int) string { return same + strconv.Itoa(i) })
		if b.hashID(uidID(other)) == b.hashID(uidID("ab")) {
			t.Fatal("ids colliding under one index's key collide under another's")
		}
	}
	secret := bytes.Clone(a.secret)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := Open(pathA, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !bytes.Equal(a.secret, secret) {
		t.Error("the id hash key changed on reopen: lookups would miss every id")
	}
}

// TestNonHexSerialIsNotIndexed: an entry whose serial is not a hex number is stored (its
// position and UID are found) but left out of the serial lookups, which refuse such a serial.
func TestNonHexSerialIsNotIndexed(t *testing.T) {
	x, _ := openTest(t)
	es := entries(1, 3)
	es[1].Serial = "12g4"
	if err := x.Add(es, 3); err != nil {
		t.Fatalf("Add with a non-hex serial: %v", err)
	}
	if _, ok, err := x.Pos(2); !ok || err != nil {
		t.Fatalf("Pos(2) = %v, %v; want the entry stored", ok, err)
	}
	if got, err := x.ByObjectUID(es[1].ObjectUID); err != nil || !slices.Equal(got, []uint64{2}) {
		t.Fatalf("ByObjectUID = %v, %v; want [2]", got, err)
	}
	if _, err := x.BySerial("12g4"); !errors.Is(err, ErrInvalidSerial) {
		t.Fatalf("BySerial(12g4): %v, want ErrInvalidSerial", err)
	}
	if got, err := x.BySerial(es[2].Serial); err != nil || !slices.Equal(got, []uint64{3}) {
		t.Fatalf("BySerial of the next entry = %v, %v; want [3]", got, err)
	}
}
