package main

import (
	"encoding/binary"
	"slices"
	"testing"
)

// pgFrame is a typed frontend or backend message with body.
func pgFrame(t byte, body string) []byte {
	b := []byte{t, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// TestPGMessages: the counting proxy's parser finds every message, with its first body byte,
// whatever the chunks the stream arrives in, the startup message first and untyped.
func TestPGMessages(t *testing.T) {
	startup := []byte{0, 0, 0, 8, 0, 3, 0, 0}
	stream := slices.Concat(startup, pgFrame('P', "stmt\x00"), pgFrame('B', "xy"), pgFrame('E', "\x00\x00\x00\x00\x00"), pgFrame('S', ""), pgFrame('Q', "commit\x00"))
	want := []pgMessage{{0, 0}, {'P', 's'}, {'B', 'x'}, {'E', 0}, {'S', 0}, {'Q', 'c'}}
	for _, chunk := range []int{1, 2, 3, 7, len(stream)} {
		var m pgMessages
		var got []pgMessage
		for i := 0; i < len(stream); i += chunk {
			got = append(got, m.feed(stream[i:min(i+chunk, len(stream))])...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("chunks of %d: got %v, want %v", chunk, got, want)
		}
	}
	backend := pgMessages{started: true}
	if got := backend.feed(slices.Concat(pgFrame('C', "INSERT 0 1\x00"), pgFrame('Z', "I"))); !slices.Equal(got, []pgMessage{{'C', 'I'}, {'Z', 'I'}}) {
		t.Errorf("backend: got %v", got)
	}
}

func TestNoteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"bench.signet.dev/fleet\n42\nq83Zb0=\n\n— bench abc\n": 42,
		"origin\n":         -1,
		"origin\nbad\nx\n": -1,
	} {
		if got := noteSize([]byte(in)); got != want {
			t.Errorf("noteSize(%q) = %d, want %d", in, got, want)
		}
	}
}
