package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// blockSize is how many consecutive seqs share one value of the pos bucket: block b holds
// seqs b*blockSize+1 … (b+1)*blockSize.
const blockSize = 64

// The flags byte that starts each entry of a block.
const (
	flagState   = 1 << 0 // the entry is a State record
	flagSegment = 1 << 1 // a segment number follows (it differs from the previous entry's)
	flagOffset  = 1 << 2 // an offset follows (the line does not start where the previous ended)
	flagsKnown  = flagState | flagSegment | flagOffset
)

// slot is one record as a block holds it.
type slot struct {
	pos   Pos
	nanos int64 // Time as clampNanos gives it
	state bool
}

// blockOf returns the block holding seq (≥ 1) and seq's index within it.
func blockOf(seq uint64) (block uint64, i int) {
	return (seq - 1) / blockSize, int((seq - 1) % blockSize)
}

// blockKey is the pos bucket's key of block b: 8 bytes, big-endian, so blocks sort by seq
// and are appended at the end of the bucket.
func blockKey(b uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), b)
}

// appendSlot encodes s after prev (the zero slot for a block's first entry) and appends it
// to dst. An entry is: flags; the segment (uvarint) if it differs from prev's; the offset
// (uvarint) unless the line starts right after prev's line and its newline (or at 0 in a
// new segment); the length (uvarint); the time as a signed varint difference from prev's.
// A record of a busy ledger takes about 6 bytes.
func appendSlot(dst []byte, prev, s slot) []byte {
	var flags byte
	if s.state {
		flags |= flagState
	}
	want := prev.pos.Offset + int64(prev.pos.Length) + 1
	if s.pos.Segment != prev.pos.Segment {
		flags |= flagSegment
		want = 0
	}
	if s.pos.Offset != want {
		flags |= flagOffset
	}
	dst = append(dst, flags)
	if flags&flagSegment != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.pos.Segment))
	}
	if flags&flagOffset != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.pos.Offset))
	}
	dst = binary.AppendUvarint(dst, uint64(s.pos.Length))
	// The difference wraps around for far-apart times; decoding wraps it back.
	return binary.AppendVarint(dst, int64(uint64(s.nanos)-uint64(prev.nanos)))
}

// walkBlock decodes the block value v entry by entry, calling fn with each entry's index
// and slot until fn returns false. It returns how many entries it decoded and the last one.
func walkBlock(v []byte, fn func(i int, s slot) bool) (n int, last slot, err error) {
	var prev slot
	for len(v) > 0 {
		if n == blockSize {
			return n, prev, fmt.Errorf("%w: block holds more than %d entries", ErrCorrupt, blockSize)
		}
		var s slot
		flags := v[0]
		v = v[1:]
		if flags&^flagsKnown != 0 {
			return n, prev, fmt.Errorf("%w: entry %d of a block has unknown flags %#x", ErrCorrupt, n, flags)
		}
		s.state = flags&flagState != 0
		s.pos.Segment = prev.pos.Segment
		want := prev.pos.Offset + int64(prev.pos.Length) + 1
		var u uint64
		if flags&flagSegment != 0 {
			if u, v, err = uvarint(v); err != nil || u > math.MaxUint32 {
				return n, prev, fmt.Errorf("%w: segment of entry %d of a block", ErrCorrupt, n)
			}
			s.pos.Segment = uint32(u)
			want = 0
		}
		s.pos.Offset = want
		if flags&flagOffset != 0 {
			if u, v, err = uvarint(v); err != nil || u > math.MaxInt64 {
				return n, prev, fmt.Errorf("%w: offset of entry %d of a block", ErrCorrupt, n)
			}
			s.pos.Offset = int64(u)
		}
		if u, v, err = uvarint(v); err != nil || u > math.MaxUint32 {
			return n, prev, fmt.Errorf("%w: length of entry %d of a block", ErrCorrupt, n)
		}
		s.pos.Length = uint32(u)
		d, k := binary.Varint(v)
		if k <= 0 {
			return n, prev, fmt.Errorf("%w: time of entry %d of a block", ErrCorrupt, n)
		}
		v = v[k:]
		s.nanos = int64(uint64(prev.nanos) + uint64(d))
		prev = s
		n++
		if fn != nil && !fn(n-1, s) {
			return n, prev, nil
		}
	}
	return n, prev, nil
}

// uvarint reads one uvarint off the front of v.
func uvarint(v []byte) (uint64, []byte, error) {
	u, k := binary.Uvarint(v)
	if k <= 0 {
		return 0, v, ErrCorrupt
	}
	return u, v[k:], nil
}

// minTime and maxTime bound the times a block can hold exactly (UnixNano's range, 1678 to
// 2262); clampNanos moves a time outside to the nearest bound.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// clampNanos returns t as nanoseconds since the Unix epoch, clamped to the int64 range. The
// clamping keeps the order of times (not strictly), which is all FirstSince needs.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// timeKey is the since bucket's key of a time: its nanoseconds with the sign bit flipped,
// big-endian, so keys sort as times do.
func timeKey(nanos int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(nanos)^(1<<63))
}

// keyNanos is the inverse of timeKey.
func keyNanos(k []byte) (int64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: time key of %d bytes", ErrCorrupt, len(k))
	}
	return int64(binary.BigEndian.Uint64(k) ^ (1 << 63)), nil
}
