package ledger_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
)

// rehash returns line with its record changed by edit and re-hashed, as a forger would.
func rehash(t *testing.T, line string, edit func(*ledger.Record)) string {
	t.Helper()
	var r ledger.Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	edit(&r)
	r.Hash = ""
	b, _ := json.Marshal(r)
	r.Hash = sha256Hex(b)
	b, _ = json.Marshal(r)
	return string(b) + "\n"
}

// tamperCase edits a 30-record ledger's lines; Verify must report want at line, with good
// intact records before it.
type tamperCase struct {
	name   string
	tamper func(t *testing.T, lines []string) []string
	want   string
	line   int
	good   int
}

func tamperCases() []tamperCase {
	const (
		changed = "record 17 (line 17 of ledger-000001.jsonl): hash mismatch — the record was changed"
		removed = "record 12 missing: expected seq 12, found 13 at line 12 of ledger-000001.jsonl — a record was removed"
		swapped = "records 20 and 21 out of order (lines 20 and 21 of ledger-000001.jsonl) — the records were reordered"
	)
	return []tamperCase{
		{"one byte of a field", func(_ *testing.T, l []string) []string {
			l[16] = strings.Replace(l[16], "example.com/signer", "example.com/signes", 1)
			return l
		}, changed, 17, 16},
		{"one byte of the hash", func(_ *testing.T, l []string) []string {
			i := strings.Index(l[16], `"hash":"`) + len(`"hash":"`)
			l[16] = l[16][:i] + flip(l[16][i]) + l[16][i+1:]
			return l
		}, changed, 17, 16},
		{"record deleted", func(_ *testing.T, l []string) []string {
			return append(l[:11:11], l[12:]...)
		}, removed, 12, 11},
		{"first record deleted", func(_ *testing.T, l []string) []string {
			return l[1:]
		}, "record 1 missing: expected seq 1, found 2 at line 1 of ledger-000001.jsonl — a record was removed", 1, 0},
		{"three records deleted", func(_ *testing.T, l []string) []string {
			return append(l[:11:11], l[14:]...)
		}, "records 12–14 missing: expected seq 12, found 15 at line 12 of ledger-000001.jsonl — records were removed", 12, 11},
		{"two lines swapped", func(_ *testing.T, l []string) []string {
			l[19], l[20] = l[20], l[19]
			return l
		}, swapped, 20, 19},
		{"record duplicated", func(_ *testing.T, l []string) []string {
			return append(l[:5:5], append([]string{l[4]}, l[5:]...)...)
		}, "record 5 out of order: expected seq 6, found 5 at line 6 of ledger-000001.jsonl — a record was duplicated, inserted or reordered", 6, 5},
		{"record changed and re-hashed", func(t *testing.T, l []string) []string {
			l[8] = rehash(t, l[8], func(r *ledger.Record) { r.Requester = "system:admin" })
			return l
		}, "record 10 (line 10 of ledger-000001.jsonl): chain broken — prevHash does not match the hash of record 9 (a record before it was changed and re-hashed, or replaced)", 10, 9},
		{"line rewritten non-canonically", func(_ *testing.T, l []string) []string {
			l[2] = strings.Replace(l[2], `"seq":3,`, `"seq": 3,`, 1)
			return l
		}, "record 3 (line 3 of ledger-000001.jsonl): not in canonical encoding — the line was rewritten", 3, 2},
		{"last record swollen past a ledger line and re-hashed", func(t *testing.T, l []string) []string {
			// Verify once let it through; Open then panicked adding it to the tree.
			l[29] = rehash(t, l[29], func(r *ledger.Record) { r.Requester = strings.Repeat("a", 1<<20) })
			return l
		}, "line 30 of ledger-000001.jsonl: 1048", 30, 29},
		{"garbage line", func(_ *testing.T, l []string) []string {
			l[8] = "not json\n"
			return l
		}, "line 9 of ledger-000001.jsonl: not a ledger record", 9, 8},
		{"unterminated garbage before the end", func(_ *testing.T, l []string) []string {
			l[8] = l[8][:40]
			return l
		}, "line 9 of ledger-000001.jsonl: not a ledger record", 9, 8},
	}
}

// TestVerifyDetectsTampering runs every case on a ledger as the Ledger left it (records, then
// free space) and on one without free space (as written before free space existed).
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	for _, tc := range tamperCases() {
		for _, freeSpace := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/free space %v", tc.name, freeSpace), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				f.fill(t, 30)
				lines := f.lines(t)
				tampered := tc.tamper(t, lines[:len(lines)-1])
				if freeSpace {
					tampered = append(tampered, lines[len(lines)-1])
				}
				f.write(t, tampered)

				rep, err := ledger.Verify(f.dir)
				var ce *ledger.CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrCorrupt) {
					t.Fatalf("Verify: err = %v, want a CorruptionError", err)
				}
				if !strings.HasPrefix(ce.Problem, tc.want) || ce.Line != tc.line || ce.File != segment {
					t.Errorf("problem = %q at %s:%d\nwant      %q at line %d", ce.Problem, ce.File, ce.Line, tc.want, tc.line)
				}
				if at := int64(len(strings.Join(tampered[:tc.line-1], ""))); ce.Offset != at {
					t.Errorf("problem at offset %d, want %d (the start of line %d)", ce.Offset, at, tc.line)
				}
				if rep.Records != tc.good {
					t.Errorf("report counts %d intact records, want %d", rep.Records, tc.good)
				}
				// With its index, a start reads only the end of the ledger: it refuses a
				// tampering that moved the last indexed record, and otherwise the record
				// is refused when it is read (checked against its leaf in the tree).
				if l, err := ledger.Open(f.dir, f.options()); err == nil {
					refused := false
					for seq := uint64(1); seq <= 30; seq++ {
						if _, err := l.Line(seq); err != nil {
							if !errors.Is(err, ledger.ErrCorrupt) {
								t.Errorf("Line(%d): %v, want ErrCorrupt", seq, err)
							}
							refused = true
						}
					}
					l.Close()
					if !refused {
						t.Error("Open took the tampered ledger and every record read back: the tampering went unseen")
					}
				} else if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), f.dir) {
					t.Errorf("Open: err = %v, want a CorruptionError naming the directory", err)
				}
				// Without it (a v0.1.0 ledger, or a reindex), the start reads everything and
				// refuses the same problem as Verify.
				for _, name := range []string{"index.db", "tiles"} {
					if err := os.RemoveAll(filepath.Join(f.dir, name)); err != nil {
						t.Fatal(err)
					}
				}
				_, err = ledger.Open(f.dir, f.options())
				if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f.dir) {
					t.Errorf("Open without the index: err = %v, want the same problem naming the directory", err)
				}
			})
		}
	}
}

func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}
