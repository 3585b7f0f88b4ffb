package index

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"
)

var hexSerial = regexp.MustCompile(`^(0[xX])?[0-9a-fA-F]+$`)

// FuzzNormalizeSerial checks that a serial is accepted exactly when it is hex, that its
// normal form is the number's lower-case hex, and that the stored id is the number's.
func FuzzNormalizeSerial(f *testing.F) {
	for _, s := range []string{"0x0A", "a", "0", "00", "0x", "", "g", "-1", "+a", "1_0", "0x0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeSerial(s)
		if (err == nil) != hexSerial.MatchString(s) {
			t.Fatalf("NormalizeSerial(%q) = %q, %v", s, got, err)
		}
		if err != nil {
			return
		}
		v, _ := new(big.Int).SetString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16)
		if got != v.Text(16) {
			t.Fatalf("NormalizeSerial(%q) = %q, want %q", s, got, v.Text(16))
		}
		id, err := serialID(s)
		if err != nil {
			t.Fatal(err)
		}
		num := v.Bytes()
		if len(num) == 0 {
			num = []byte{0}
		}
		if want := appendID(nil, num, false); !bytes.Equal(id, want) {
			t.Fatalf("serialID(%q) = %x, want %x (the number's big-endian bytes)", s, id, want)
		}
	})
}

// FuzzUIDID checks that stored UIDs are equal exactly when the UIDs are, and that none is a
// prefix of another's (what makes a run block's entries decode one way).
func FuzzUIDID(f *testing.F) {
	const u = "0b7cbb4c-5d76-4d7e-9a55-3f2d4b6a7c8e"
	raw, _ := parseUUID(u)
	f.Add("ab", "abc")
	f.Add(u, strings.ToUpper(u))
	f.Add(u, string(raw[:]))
	f.Add("\x00", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		ia, ib := uidID(a), uidID(b)
		if bytes.Equal(ia, ib) != (a == b) || (a != b && (bytes.HasPrefix(ia, ib) || bytes.HasPrefix(ib, ia))) {
			t.Fatalf("uidID(%q) = %x, uidID(%q) = %x", a, ia, b, ib)
		}
		want := []runEntry{{h: 7, seq: 5, id: ia}, {h: 7, seq: 9, id: ib}}
		v := appendRunEntry(appendRunEntry(nil, want[0]), want[1])
		var got []runEntry
		if err := walkRunBlock(v, func(e runEntry) bool { got = append(got, e); return true }); err != nil ||
			len(got) != 2 || got[0].compare(want[0]) != 0 || got[1].compare(want[1]) != 0 ||
			!bytes.Equal(got[0].id, ia) || !bytes.Equal(got[1].id, ib) {
			t.Fatalf("walkRunBlock(%x) = %v, %v; want %v", v, got, err, want)
		}
	})
}

// FuzzBlock checks that any bytes decode as a block or fail without panicking, and that
// slots made from the bytes round-trip through a block.
func FuzzBlock(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add(bytes.Repeat([]byte{0xff}, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = walkBlock(data, func(int, slot) bool { return true })
		_ = walkRunBlock(data, func(runEntry) bool { return true })
		var slots []slot
		for r := bytes.NewReader(data); len(slots) < blockSize; {
			var raw struct {
				Flags   uint8
				Segment uint32
				Offset  int64
				Length  uint32
				Nanos   int64
			}
			if binary.Read(r, binary.LittleEndian, &raw) != nil {
				break
			}
			s := slot{pos: Pos{Segment: raw.Segment, Offset: raw.Offset & math.MaxInt64, Length: raw.Length}, nanos: raw.Nanos, state: raw.Flags&1 == 1}
			if raw.Flags&2 == 2 && len(slots) > 0 { // the line after the previous one
				p := slots[len(slots)-1].pos
				s.pos.Segment, s.pos.Offset = p.Segment, p.Offset+int64(p.Length)+1
			}
			slots = append(slots, s)
		}
		var v []byte
		var prev slot
		for _, s := range slots {
			v = appendSlot(v, prev, s)
			prev = s
		}
		var got []slot
		n, _, err := walkBlock(v, func(_ int, s slot) bool { got = append(got, s); return true })
		if err != nil || n != len(slots) {
			t.Fatalf("walkBlock of %d slots = %d, %v", len(slots), n, err)
		}
		for i := range slots {
			if got[i] != slots[i] {
				t.Fatalf("slot %d = %+v, want %+v", i, got[i], slots[i])
			}
		}
	})
}

func TestClampNanos(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Time{}, minTime.UnixNano()}, {minTime, minTime.UnixNano()}, {maxTime, maxTime.UnixNano()},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), maxTime.UnixNano()}, {time.Unix(0, 42), 42},
	} {
		if got := clampNanos(tc.t); got != tc.want {
			t.Errorf("clampNanos(%s) = %d, want %d", tc.t, got, tc.want)
		}
	}
}
