package decision

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestClipMeasuresWhatJSONWrites: jsonLen is the length encoding/json gives a string (without
// quotes) for every kind of character, so clip's bound holds in the ledger's encoding; and
// what clip returns carries no control character.
func TestClipMeasuresWhatJSONWrites(t *testing.T) {
	t.Parallel()
	alphabet := []rune{'a', '"', '\\', '\n', '\r', '\t', '\b', '\f', 0, 0x1b, 0x7f, '<', '>', '&', '\u2028', '\u2029', 'é', '€', '😀', utf8.RuneError}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(4) == 0 {
			b.WriteByte(0xff) // invalid UTF-8
		}
		s := b.String()
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonLen(s), len(enc)-2; got != want {
			t.Fatalf("jsonLen(%q) = %d, encoding/json writes %d", s, got, want)
		}
		for _, limit := range []int{60, 80, 200} {
			c := clip(s, limit)
			enc, _ := json.Marshal(c)
			if len(enc)-2 > limit {
				t.Fatalf("clip(%q, %d) = %q: %d bytes encoded", s, limit, c, len(enc)-2)
			}
			if strings.ContainsFunc(c, unicode.IsControl) {
				t.Fatalf("clip(%q, %d) = %q keeps a control character", s, limit, c)
			}
			if jsonLen(visible(s)) <= limit && c != visible(s) {
				t.Fatalf("clip changed %q, which fits in %d", s, limit)
			}
		}
	}
}
