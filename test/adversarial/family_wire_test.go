package adversarial

import (
	"bytes"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// The full method names the raw calls use.
const (
	methodSignCSR = "/signet.v1.SignerService/SignCertificateSigningRequest"
	methodSignPod = "/signet.v1.SignerService/SignPodCertificateRequest"
)

// rawMessage is a message already encoded: the bytes go on the wire as they are.
type rawMessage []byte

// rawCodec sends and receives rawMessage without looking at it; named "proto" so the server
// decodes the bytes with its protobuf codec.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*rawMessage), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*rawMessage) = bytes.Clone(data)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// rawCall is a request encoded by hand; signer and uid say what it carries (for the ledger
// checks), when the server can decode it.
type rawCall struct {
	method string
	body   []byte
	signer string
	uid    string
}

// invalidUTF8 is not UTF-8: proto3 string fields must be.
var invalidUTF8 = []byte("ab\xff\xfecd")

// appendString appends field num as a length-delimited value.
func appendString(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendMessage appends field num holding the encoded message m.
func appendMessage(b []byte, num protowire.Number, m []byte) []byte { return appendString(b, num, m) }

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// wireCases: messages protobuf cannot decode (invalid UTF-8, truncated: MALFORMED_REQUEST,
// recorded without an object) or gRPC refuses before Signet sees them (over the receive limit),
// and ones they decode in ways an attacker could try to use (unknown fields, wrong wire types,
// repeated scalars).
func wireCases(c *corpus) {
	const f = "wire"
	legacy := baseFor(signerLegacy)
	unmarshal := malformed("the message is not a valid request of")
	// named is what a record of the call names: the signer and UID of r when body decodes as
	// its message, none otherwise (what decoded of it is not trusted).
	named := func(body []byte, r proto.Message, signer, uid string) (string, string) {
		if proto.Unmarshal(body, r.ProtoReflect().New().Interface()) != nil {
			return "", ""
		}
		return signer, uid
	}
	csrRaw := func(name string, edit func([]byte) []byte, w want) {
		r := legacy.call(c, nil)
		body := edit(marshal(r))
		signer, uid := named(body, r, r.GetSignerName(), r.GetObject().GetUid())
		c.add(f, "csr/"+name, clientWatcher, request{raw: &rawCall{method: methodSignCSR, body: body, signer: signer, uid: uid}}, w)
	}
	csrRaw("invalid UTF-8 signer_name", func(b []byte) []byte { return appendString(b, 1, invalidUTF8) }, unmarshal)
	csrRaw("invalid UTF-8 usage", func(b []byte) []byte { return appendString(b, 3, invalidUTF8) }, unmarshal)
	csrRaw("invalid UTF-8 object.uid", func(b []byte) []byte { return appendMessage(b, 6, appendString(nil, 1, invalidUTF8)) }, unmarshal)
	csrRaw("invalid UTF-8 requester.username", func(b []byte) []byte { return appendMessage(b, 5, appendString(nil, 1, invalidUTF8)) }, unmarshal)
	csrRaw("invalid UTF-8 requester group", func(b []byte) []byte { return appendMessage(b, 5, appendString(nil, 3, invalidUTF8)) }, unmarshal)
	csrRaw("invalid UTF-8 requester.extra key", func(b []byte) []byte {
		entry := appendMessage(appendString(nil, 1, invalidUTF8), 2, appendString(nil, 1, []byte("v")))
		return appendMessage(b, 5, appendMessage(nil, 4, entry))
	}, unmarshal)
	csrRaw("truncated", func(b []byte) []byte { return b[:len(b)-7] }, unmarshal)
	csrRaw("length prefix past the end", func(b []byte) []byte {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendVarint(b, 1<<30)
	}, unmarshal)
	csrRaw("field number 0", func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, 0, protowire.VarintType), 1)
	}, unmarshal)
	csrRaw("unknown fields", func(b []byte) []byte {
		b = appendString(b, 99, []byte("ignored"))
		return protowire.AppendVarint(protowire.AppendTag(b, 1000, protowire.VarintType), 7)
	}, issued())
	// protobuf keeps the last value of a repeated scalar: the served signer.
	csrRaw("signer_name three times, the last one served", func(b []byte) []byte {
		return appendString(appendString(b, 1, []byte("example.com/not-served")), 1, []byte(signerLegacy))
	}, issued())

	wrongType := legacy.call(c, nil)
	wrongType.SignerName = ""
	c.add(f, "csr/signer_name as a varint", clientWatcher, request{raw: &rawCall{method: methodSignCSR,
		body: protowire.AppendVarint(protowire.AppendTag(marshal(wrongType), 1, protowire.VarintType), 42), uid: wrongType.Object.Uid}},
		malformed("signer_name"))
	c.add(f, "csr/empty message", clientWatcher, request{raw: &rawCall{method: methodSignCSR}}, malformed("requester is required"))

	podRaw := func(name string, edit func([]byte) []byte, w want) {
		r := c.podCall(nil)
		body := edit(marshal(r))
		signer, uid := named(body, r, r.GetSignerName(), r.GetObject().GetUid())
		c.add(f, "pod/"+name, clientWatcher, request{raw: &rawCall{method: methodSignPod, body: body, signer: signer, uid: uid}}, w)
	}
	podRaw("invalid UTF-8 namespace", func(b []byte) []byte { return appendMessage(b, 3, appendString(nil, 1, invalidUTF8)) }, unmarshal)
	podRaw("invalid UTF-8 annotation key", func(b []byte) []byte {
		return appendMessage(b, 8, appendString(appendString(nil, 1, invalidUTF8), 2, []byte("v")))
	}, unmarshal)
	podRaw("invalid UTF-8 annotation value", func(b []byte) []byte {
		return appendMessage(b, 8, appendString(appendString(nil, 1, []byte("example.com/purpose")), 2, invalidUTF8))
	}, unmarshal)
	podRaw("unknown fields", func(b []byte) []byte { return appendString(b, 42, bytes.Repeat([]byte("z"), 1000)) }, issued())

	huge := legacy.call(c, nil)
	huge.Request = bytes.Repeat([]byte("A"), 5<<20)
	c.sign(f, "csr/5 MiB message", clientWatcher, huge, transport(codes.ResourceExhausted, "larger than max"))
	hugePod := c.podCall(func(r *signetv1.SignPodCertificateRequestRequest) {
		r.UnverifiedUserAnnotations = map[string]string{"example.com/purpose": string(bytes.Repeat([]byte("p"), 5<<20))}
	})
	c.add(f, "pod/5 MiB message", clientWatcher, request{pod: hugePod}, transport(codes.ResourceExhausted, "larger than max"))
	big := legacy.call(c, nil)
	big.Request = append(bytes.Repeat([]byte(" "), 3900<<10), big.Request...)
	c.sign(f, "csr/3.9 MiB request under the receive limit", clientWatcher, big, malformed("request"))
	for _, n := range []int{100, 1000} {
		r := legacy.call(c, nil)
		r.Requester.Extra = map[string]*signetv1.ExtraValue{}
		for i := range n {
			r.Requester.Extra[fmt.Sprintf("k%d", i)] = &signetv1.ExtraValue{Values: []string{"v"}}
		}
		c.sign(f, fmt.Sprintf("csr/%d extra keys", n), clientWatcher, r, malformed("requester.extra"))
	}
}
