package server_test

// Requests for the door tests, built from the descriptors: a valid request where one is known
// (the signing calls), every other field filled with a plausible value, the places in a
// message a case changes (slots), and the undecodable encodings.

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// doorSignCSR is a valid request for the dev CSR signer with every field set.
func doorSignCSR(tb testing.TB, uid string) *signetv1.SignCertificateSigningRequestRequest {
	tb.Helper()
	key := testpki.Key(tb, testpki.P256)
	seconds := int32(3600)
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: devpki.DefaultSigner,
		Request: testpki.CSR(tb, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"},
			DNSNames: []string{"web.default.svc"}}),
		Usages:            []string{"digital signature", "server auth"},
		ExpirationSeconds: &seconds,
		Requester: &signetv1.Requester{Username: "system:serviceaccount:default:web", Uid: "5f1c3e2a-user",
			Groups: []string{"system:serviceaccounts", "system:authenticated"},
			Extra:  map[string]*signetv1.ExtraValue{"authentication.kubernetes.io/pod-name": {Values: []string{"web-0"}}}},
		Object: &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid},
	}
}

// doorSignPod is a valid request for the dev pod-identity signer with a stub PKCS#10 request
// and an annotation the signer accepts.
func doorSignPod(tb testing.TB, uid string) *signetv1.SignPodCertificateRequestRequest {
	tb.Helper()
	r := podSignRequest(tb, uid)
	r.UnverifiedUserAnnotations = map[string]string{doorPodAnnotation: "doors"}
	return r
}

// doorBase is a valid request of one message type, which the cases start from instead of
// plausible values: the server signs it.
type doorBase struct {
	build func(tb testing.TB, uid string) proto.Message
	// keepEmpty are fields that stay unset though the base leaves them so: alternatives to
	// what the base sets, or fields the object kind has not.
	keepEmpty []protoreflect.Name
}

// doorBases are the valid requests, by message name. Every other request, and every field a
// base leaves unset (a field added later), gets plausible values.
var doorBases = map[protoreflect.FullName]doorBase{
	"signet.v1.SignCertificateSigningRequestRequest": {build: func(tb testing.TB, uid string) proto.Message { return doorSignCSR(tb, uid) },
		keepEmpty: []protoreflect.Name{"namespace"}}, // a CSR is cluster-scoped
	"signet.v1.SignPodCertificateRequestRequest": {build: func(tb testing.TB, uid string) proto.Message { return doorSignPod(tb, uid) },
		keepEmpty: []protoreflect.Name{"pkix_public_key", "proof_of_possession"}}, // the v1beta1 alternative to the stub
	"signet.v1.ExplainCertificateSigningRequestRequest": {build: func(tb testing.TB, uid string) proto.Message {
		return &signetv1.ExplainCertificateSigningRequestRequest{Request: doorSignCSR(tb, uid)}
	}, keepEmpty: []protoreflect.Name{"namespace"}},
}

// doorValues are the plausible values of a request's fields.
type doorValues struct {
	uid   string // every field whose name ends in uid: the case's own, so idempotency keys differ
	caPEM string // the dev signer's CA certificate, for *_pem fields
}

// doorCAPEM is the dev signer's CA certificate in dir.
func doorCAPEM(tb testing.TB, dir string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, devpki.SignerCACert))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// doorRequest is m's request for one case: the valid base when there is one, with every field
// it leaves unset filled (recursively) with plausible values.
func doorRequest(tb testing.TB, m *doorMethod, v doorValues) proto.Message {
	tb.Helper()
	msg := m.newRequest()
	base, ok := doorBases[m.desc.Input().FullName()]
	if ok {
		msg = base.build(tb, v.uid)
	}
	doorFill(msg.ProtoReflect(), v, base.keepEmpty, 0)
	return msg
}

// doorMaxDepth bounds the recursion into nested messages.
const doorMaxDepth = 6

// doorFill sets every unset field of m (one entry in each empty list and map, nested messages
// filled too), except those named in keep and all but the first field of a oneof.
func doorFill(m protoreflect.Message, v doorValues, keep []protoreflect.Name, depth int) {
	if depth > doorMaxDepth {
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if slices.Contains(keep, fd.Name()) {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && m.WhichOneof(od) != nil && m.WhichOneof(od) != fd {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if l.Len() == 0 {
				l.Append(doorElement(l.NewElement(), fd, v, keep, depth))
			}
			for j := range l.Len() {
				if fd.Message() != nil {
					doorFill(l.Get(j).Message(), v, keep, depth+1)
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			if mp.Len() == 0 {
				mp.Set(doorScalar(fd.MapKey(), v).MapKey(), doorElement(mp.NewValue(), fd.MapValue(), v, keep, depth))
			}
			if fd.MapValue().Message() != nil {
				mp.Range(func(_ protoreflect.MapKey, val protoreflect.Value) bool {
					doorFill(val.Message(), v, keep, depth+1)
					return true
				})
			}
		case fd.Message() != nil:
			doorFill(m.Mutable(fd).Message(), v, keep, depth+1)
		case !m.Has(fd):
			m.Set(fd, doorScalar(fd, v))
		}
	}
}

// doorElement is a new list entry or map value of fd's kind: empty is a fresh message (filled)
// or ignored for a scalar.
func doorElement(empty protoreflect.Value, fd protoreflect.FieldDescriptor, v doorValues, keep []protoreflect.Name, depth int) protoreflect.Value {
	if fd.Message() != nil {
		doorFill(empty.Message(), v, keep, depth+1)
		return empty
	}
	return doorScalar(fd, v)
}

// doorScalar is a plausible value for a scalar field, from its kind and name.
func doorScalar(fd protoreflect.FieldDescriptor, v doorValues) protoreflect.Value {
	name := string(fd.Name())
	switch fd.Kind() {
	case protoreflect.StringKind:
		switch {
		case fd.ContainingMessage().IsMapEntry() && fd.Number() == 1: // a map key
			return protoreflect.ValueOfString(doorPodAnnotation)
		case strings.Contains(name, "signer"):
			return protoreflect.ValueOfString(devpki.DefaultSigner)
		case name == "service":
			return protoreflect.ValueOfString(signetv1.HealthService)
		case strings.HasSuffix(name, "uid"):
			return protoreflect.ValueOfString(v.uid)
		case strings.Contains(name, "fingerprint") || strings.Contains(name, "hash"):
			return protoreflect.ValueOfString(strings.Repeat("ab", 32))
		case strings.Contains(name, "serial"):
			return protoreflect.ValueOfString("01")
		case strings.HasSuffix(name, "pem"):
			return protoreflect.ValueOfString(v.caPEM)
		}
		return protoreflect.ValueOfString("doors-" + name)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("doors-" + name))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(min(1, vals.Len()-1)).Number())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	}
	panic(fmt.Sprintf("doorScalar: kind %v of %s", fd.Kind(), fd.FullName()))
}

// doorSlotKind is what a slot is.
type doorSlotKind int

const (
	doorField    doorSlotKind = iota // a field of parent
	doorEntry                        // entry index of a list field
	doorMapKey                       // the key of one map entry
	doorMapValue                     // the value of one map entry
)

// doorSlot is one place in a message a case changes.
type doorSlot struct {
	path   string // "requester.extra[authentication.kubernetes.io/pod-name].values[0]"
	kind   doorSlotKind
	parent protoreflect.Message
	fd     protoreflect.FieldDescriptor
	index  int
	key    protoreflect.MapKey
}

// doorSlots lists the slots of m in a fixed order: every field (in declaration order), every
// list entry and every map key and value (keys sorted), and the slots of nested messages.
func doorSlots(m protoreflect.Message, prefix string, depth int) []doorSlot {
	if depth > doorMaxDepth {
		return nil
	}
	var out []doorSlot
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := prefix + string(fd.Name())
		out = append(out, doorSlot{path: path, kind: doorField, parent: m, fd: fd})
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			for j := range l.Len() {
				at := fmt.Sprintf("%s[%d]", path, j)
				out = append(out, doorSlot{path: at, kind: doorEntry, parent: m, fd: fd, index: j})
				if fd.Message() != nil {
					out = append(out, doorSlots(l.Get(j).Message(), at+".", depth+1)...)
				}
			}
		case fd.IsMap():
			mp := m.Get(fd).Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				at := fmt.Sprintf("%s[%s]", path, k.String())
				out = append(out, doorSlot{path: at + " (key)", kind: doorMapKey, parent: m, fd: fd, key: k},
					doorSlot{path: at, kind: doorMapValue, parent: m, fd: fd, key: k})
				if fd.MapValue().Message() != nil {
					out = append(out, doorSlots(mp.Get(k).Message(), at+".", depth+1)...)
				}
			}
		case fd.Message() != nil && m.Has(fd):
			out = append(out, doorSlots(m.Get(fd).Message(), path+".", depth+1)...)
		}
	}
	return out
}

// isString reports whether the slot holds one string.
func (s doorSlot) isString() bool {
	switch s.kind {
	case doorField:
		return !s.fd.IsList() && !s.fd.IsMap() && s.fd.Kind() == protoreflect.StringKind
	case doorEntry:
		return s.fd.Kind() == protoreflect.StringKind
	case doorMapKey:
		return s.fd.MapKey().Kind() == protoreflect.StringKind
	default:
		return s.fd.MapValue().Kind() == protoreflect.StringKind
	}
}

// isMessage reports whether the slot is a set singular message field.
func (s doorSlot) isMessage() bool {
	return s.kind == doorField && !s.fd.IsList() && !s.fd.IsMap() && s.fd.Message() != nil && s.parent.Has(s.fd)
}

// isCollection reports whether the slot is a list or map field.
func (s doorSlot) isCollection() bool { return s.kind == doorField && (s.fd.IsList() || s.fd.IsMap()) }

// setString puts str in the slot (isString).
func (s doorSlot) setString(str string) {
	v := protoreflect.ValueOfString(str)
	switch s.kind {
	case doorField:
		s.parent.Set(s.fd, v)
	case doorEntry:
		s.parent.Mutable(s.fd).List().Set(s.index, v)
	case doorMapKey:
		mp := s.parent.Mutable(s.fd).Map()
		old := mp.Get(s.key)
		mp.Clear(s.key)
		mp.Set(v.MapKey(), old)
	case doorMapValue:
		s.parent.Mutable(s.fd).Map().Set(s.key, v)
	}
}

// flood replaces the list or map of the slot (isCollection) with n entries: distinct strings,
// keys and plausible values.
func (s doorSlot) flood(n int, v doorValues) {
	s.parent.Clear(s.fd)
	if s.fd.IsList() {
		l := s.parent.Mutable(s.fd).List()
		for i := range n {
			e := doorElement(l.NewElement(), s.fd, v, nil, doorMaxDepth-1)
			if s.fd.Kind() == protoreflect.StringKind {
				e = protoreflect.ValueOfString(fmt.Sprintf("doors-%05d", i))
			}
			l.Append(e)
		}
		return
	}
	mp := s.parent.Mutable(s.fd).Map()
	for i := range n {
		var k protoreflect.Value
		switch s.fd.MapKey().Kind() {
		case protoreflect.StringKind:
			k = protoreflect.ValueOfString(fmt.Sprintf("example.com/doors-%05d", i))
		case protoreflect.BoolKind:
			k = protoreflect.ValueOfBool(i%2 == 1)
		default:
			k = doorIntKey(s.fd.MapKey(), i)
		}
		mp.Set(k.MapKey(), doorElement(mp.NewValue(), s.fd.MapValue(), v, nil, doorMaxDepth-1))
	}
}

// doorIntKey is i as a map key of fd's integer kind.
func doorIntKey(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(i))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(i))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(i))
	}
	return protoreflect.ValueOfInt64(int64(i))
}

// doorInvalidUTF8 is not UTF-8; proto3 string fields must be.
var doorInvalidUTF8 = []byte("ab\xff\xfecd")

// doorStringPaths lists the paths from md to each string field, through nested messages and
// map entries (depth-bounded), by field descriptors.
func doorStringPaths(md protoreflect.MessageDescriptor, depth int) [][]protoreflect.FieldDescriptor {
	if depth > doorMaxDepth {
		return nil
	}
	var out [][]protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, []protoreflect.FieldDescriptor{fd})
		case fd.Message() != nil:
			for _, p := range doorStringPaths(fd.Message(), depth+1) {
				out = append(out, append([]protoreflect.FieldDescriptor{fd}, p...))
			}
		}
	}
	return out
}

// doorPathName is a descriptor path written as a field path.
func doorPathName(path []protoreflect.FieldDescriptor) string {
	names := make([]string, len(path))
	for i, fd := range path {
		names[i] = string(fd.Name())
	}
	return strings.Join(names, ".")
}

// doorWithInvalidUTF8 is valid followed by one more value of the string field at path (inside
// its messages) that is not UTF-8.
func doorWithInvalidUTF8(valid []byte, path []protoreflect.FieldDescriptor) []byte {
	inner := doorInvalidUTF8
	for i := len(path) - 1; i >= 0; i-- {
		inner = protowire.AppendBytes(protowire.AppendTag(nil, path[i].Number(), protowire.BytesType), inner)
	}
	return append(doorCopy(valid), inner...)
}

// doorTruncated are encodings of valid cut short: a last field whose length runs past the end,
// and valid without its last byte (when that does not decode).
func doorTruncated(valid []byte, md protoreflect.MessageDescriptor) map[string][]byte {
	past := protowire.AppendTag(doorCopy(valid), 1, protowire.BytesType)
	past = append(protowire.AppendVarint(past, 64), "abc"...)
	out := map[string][]byte{"truncated: a length past the end": past}
	if len(valid) > 1 && proto.Unmarshal(valid[:len(valid)-1], doorNewMessage(md)) != nil {
		out["truncated: the last byte cut"] = doorCopy(valid[:len(valid)-1])
	}
	return out
}

// doorCopy is a copy of b, which appending to leaves b as it is.
func doorCopy(b []byte) []byte { return append([]byte(nil), b...) }
