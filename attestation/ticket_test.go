package attestation_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/attestation"
)

func testTicket() attestation.Ticket {
	t := attestation.Ticket{Node: "node-a", AKName: []byte{0, 11, 1, 2, 3}, Issued: now, Expires: now.Add(time.Minute)}
	t.ID[0], t.Nonce[0], t.EK[0] = 1, 2, 3
	return t
}

func TestTicketRoundTrip(t *testing.T) {
	key := []byte("key")
	want := testTicket()
	got, err := attestation.OpenTicket(want.Seal(key), key)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Nonce != want.Nonce || got.EK != want.EK || !bytes.Equal(got.AKName, want.AKName) ||
		got.Node != want.Node || !got.Issued.Equal(want.Issued) || !got.Expires.Equal(want.Expires) {
		t.Fatalf("OpenTicket = %+v, want %+v", got, want)
	}
}

func TestTicketTampered(t *testing.T) {
	key := []byte("key")
	sealed := testTicket().Seal(key)
	other := testTicket()
	other.Node = "node-b"
	otherSealed := other.Seal(key)
	// The payload of node-b's ticket with the MAC of node-a's.
	spliced := otherSealed[:strings.LastIndex(otherSealed, ".")] + sealed[strings.LastIndex(sealed, "."):]
	for name, s := range map[string]string{
		"another key":     testTicket().Seal([]byte("other")),
		"spliced":         spliced,
		"no prefix":       strings.TrimPrefix(sealed, "st1."),
		"no MAC":          sealed[:strings.LastIndex(sealed, ".")],
		"not base64":      sealed + "!",
		"empty":           "",
		"a flipped bit":   sealed[:10] + string(sealed[10]^1) + sealed[11:],
		"a truncated MAC": sealed[:len(sealed)-2],
	} {
		if _, err := attestation.OpenTicket(s, key); attestation.FailedCheck(err) != attestation.CheckTicket {
			t.Errorf("%s: OpenTicket = %v; want a ticket refusal", name, err)
		}
	}
}

func TestDecodeTicketRefusesMalformedPayloads(t *testing.T) {
	key := []byte("k")
	_ = key
	good := testTicket()
	// DecodeTicket's input is the payload; get it from a sealed ticket through Seal's format.
	payload := payloadOf(t, good)
	for name, p := range map[string][]byte{
		"empty":          nil,
		"short":          payload[:40],
		"another format": append([]byte{2}, payload[1:]...),
		"trailing":       append(append([]byte{}, payload...), 0),
		"cut node":       payload[:len(payload)-1],
	} {
		if _, err := attestation.DecodeTicket(p); err == nil {
			t.Errorf("%s: DecodeTicket accepted it", name)
		}
	}
	if _, err := attestation.DecodeTicket(payload); err != nil {
		t.Fatalf("DecodeTicket(good) = %v", err)
	}
}
