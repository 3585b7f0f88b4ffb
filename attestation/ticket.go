package attestation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Ticket is what the server answers a node that activated its credential: proof, for the
// request that follows, that the node's AK lives in the TPM of its EK. It is sealed with a
// key only the server knows (Seal, OpenTicket), bound to the EK, the AK and the node name,
// single-use (the server records its ID when a request spends it) and short-lived.
type Ticket struct {
	// ID identifies the ticket for its single use.
	ID [16]byte
	// Nonce is the qualifying data the AK must certify the binding key with.
	Nonce [32]byte
	// Node is the node name the ticket was issued for.
	Node string
	// EK is the SHA-256 of the EK's public key (PKIX DER).
	EK [32]byte
	// AKName is the AK's TPM name.
	AKName []byte
	// Issued and Expires bound the ticket's life, to the second.
	Issued, Expires time.Time
}

// ticketPrefix starts every sealed ticket of this format; ticketLabel separates its MAC from
// any other use of the key.
const (
	ticketPrefix = "st1."
	ticketLabel  = "signet attestation ticket v1\x00"
	ticketFormat = 1
)

// maxTicketField bounds the variable fields of a ticket: an AK name is at most 2+64 bytes, a
// node name 253 characters.
const maxTicketField = 255

// Seal encodes t and authenticates it with key (HMAC-SHA256): "st1.<payload>.<mac>", both in
// unpadded base64url.
func (t Ticket) Seal(key []byte) string {
	payload := t.encode()
	return ticketPrefix + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(ticketMAC(key, payload))
}

// OpenTicket checks a sealed ticket's MAC under key and decodes it. It checks nothing else:
// Verify checks the ticket's expiry and bindings. Failures are of CheckTicket.
func OpenTicket(sealed string, key []byte) (Ticket, error) {
	body, ok := strings.CutPrefix(sealed, ticketPrefix)
	if !ok {
		return Ticket{}, refuse(CheckTicket, "not a ticket of this server's format")
	}
	p, m, ok := strings.Cut(body, ".")
	if !ok {
		return Ticket{}, refuse(CheckTicket, "not a ticket of this server's format")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	mac, err2 := base64.RawURLEncoding.DecodeString(m)
	if err1 != nil || err2 != nil {
		return Ticket{}, refuse(CheckTicket, "the ticket is not base64url")
	}
	if !hmac.Equal(mac, ticketMAC(key, payload)) {
		return Ticket{}, refuse(CheckTicket, "the ticket was not issued by this server, or not since it started (its seal does not verify)")
	}
	t, err := DecodeTicket(payload)
	if err != nil {
		return Ticket{}, refuse(CheckTicket, "%v", err)
	}
	return t, nil
}

func ticketMAC(key, payload []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(ticketLabel))
	h.Write(payload)
	return h.Sum(nil)
}

// encode lays the ticket out as: format (1 byte), ID (16), nonce (32), issued and expires
// (Unix seconds, 8 each, big-endian), EK (32), then the AK name and the node name, each as a
// 1-byte length and its bytes.
func (t Ticket) encode() []byte {
	b := make([]byte, 0, 1+16+32+16+32+2+len(t.AKName)+len(t.Node))
	b = append(b, ticketFormat)
	b = append(b, t.ID[:]...)
	b = append(b, t.Nonce[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Issued.Unix()))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Expires.Unix()))
	b = append(b, t.EK[:]...)
	b = append(b, byte(len(t.AKName)))
	b = append(b, t.AKName...)
	b = append(b, byte(len(t.Node)))
	b = append(b, t.Node...)
	return b
}

// errShortTicket is DecodeTicket's error for a payload that ends early.
var errShortTicket = errors.New("the ticket ends early")

// DecodeTicket decodes a ticket's payload (see encode). It refuses another format, a payload
// that ends early or goes on after the node name, and empty variable fields.
func DecodeTicket(b []byte) (Ticket, error) {
	var t Ticket
	if len(b) < 1+16+32+16+32+2 {
		return t, errShortTicket
	}
	if b[0] != ticketFormat {
		return t, fmt.Errorf("ticket format %d, want %d", b[0], ticketFormat)
	}
	b = b[1:]
	b = b[copy(t.ID[:], b):]
	b = b[copy(t.Nonce[:], b):]
	t.Issued = time.Unix(int64(binary.BigEndian.Uint64(b)), 0)
	t.Expires = time.Unix(int64(binary.BigEndian.Uint64(b[8:])), 0)
	b = b[16:]
	b = b[copy(t.EK[:], b):]
	var ok bool
	if t.AKName, b, ok = lengthPrefixed(b); !ok {
		return Ticket{}, errShortTicket
	}
	var node []byte
	if node, b, ok = lengthPrefixed(b); !ok {
		return Ticket{}, errShortTicket
	}
	t.Node = string(node)
	switch {
	case len(b) != 0:
		return Ticket{}, errors.New("data after the ticket's node name")
	case len(t.AKName) == 0 || t.Node == "":
		return Ticket{}, errors.New("the ticket names no AK or no node")
	}
	return t, nil
}

// lengthPrefixed splits a 1-byte length and that many bytes off b.
func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return nil, nil, false
	}
	n := int(b[0])
	return b[1 : 1+n : 1+n], b[1+n:], true
}
