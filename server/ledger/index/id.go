package index

import (
	"encoding/binary"
	"strings"

	"github.com/signet-pki/signet/server/ledger/record"
)

// NormalizeSerial is record.NormalizeSerial: the canonical form of a hex serial.
func NormalizeSerial(serial string) (string, error) { return record.NormalizeSerial(serial) }

// serialID is how the serial lookup stores a serial: the normalized number's big-endian
// bytes (zero is one zero byte), after a uvarint of their count times two.
func serialID(serial string) ([]byte, error) {
	id, ok := appendSerialID(nil, serial)
	if !ok {
		_, err := NormalizeSerial(serial)
		return nil, err
	}
	return id, nil
}

// appendSerialID appends serialID(serial) to dst without allocating beyond dst; ok is false
// (and dst unchanged) for a serial NormalizeSerial refuses.
func appendSerialID(dst []byte, serial string) (_ []byte, ok bool) {
	s := serial
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if s == "" {
		return dst, false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return dst, false
		}
	}
	s = strings.TrimLeft(s, "0")
	if s == "" {
		s = "0"
	}
	dst = binary.AppendUvarint(dst, uint64((len(s)+1)/2)<<1)
	if len(s)%2 == 1 {
		dst, s = append(dst, unhexAny(s[0])), s[1:]
	}
	for i := 0; i < len(s); i += 2 {
		dst = append(dst, unhexAny(s[i])<<4|unhexAny(s[i+1]))
	}
	return dst, true
}

// uidID is how the uid lookup stores an object UID: a canonical (lower-case) UUID as its 16
// bytes, any other UID as its bytes, after a uvarint of the byte count times two, plus one
// for a UUID. Being length-prefixed and tagged, no id is a prefix of another.
func uidID(uid string) []byte { return appendUIDID(nil, uid) }

// appendUIDID appends uidID(uid) to dst.
func appendUIDID(dst []byte, uid string) []byte {
	if b, ok := parseUUID(uid); ok {
		return appendID(dst, b[:], true)
	}
	return appendID(dst, []byte(uid), false)
}

func appendID(dst, b []byte, uuid bool) []byte {
	tag := uint64(len(b)) << 1
	if uuid {
		tag |= 1
	}
	dst = binary.AppendUvarint(dst, tag)
	return append(dst, b...)
}

// parseUUID parses the canonical text form of a UUID, lower-case hex in groups of 8-4-4-4-12
// (the form Kubernetes writes). Any other form, upper case included, is not a UUID here, so
// that the text round-trips.
func parseUUID(s string) (b [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	for j, i := range uuidPairs {
		hi, lo := s[i], s[i+1]
		if !isLowerHex(hi) || !isLowerHex(lo) {
			return b, false
		}
		b[j] = unhexAny(hi)<<4 | unhexAny(lo)
	}
	return b, true
}

// uuidPairs are where the 16 hex pairs of a UUID's text start.
var uuidPairs = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// unhexAny is the value of a hex digit of either case.
func unhexAny(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
