package server_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/signet-pki/signet/server/ledger"
)

// doorExpect is what a case asks of an answer beyond doorContract, which every answer obeys.
type doorExpect int

const (
	// doorExpectAny: the contract only.
	doorExpectAny doorExpect = iota
	// doorExpectUndecodable: the bytes are not the method's request; signet.v1 answers both callers
	// INVALID_ARGUMENT with MALFORMED_REQUEST.
	doorExpectUndecodable
	// doorExpectMalformed: a part of the request is absent or holds what no Kubernetes client
	// sends; signet.v1 answers the caller allowed everything MALFORMED_REQUEST (a dry run may
	// answer it as its verdict). The caller allowed nothing may be refused for that first.
	doorExpectMalformed
	// doorExpectValid: the request is valid; the caller allowed everything gets it signed (a dry
	// run: allowed).
	doorExpectValid
)

// doorCase is one request sent to one method, as both callers.
type doorCase struct {
	method *doorMethod
	name   string
	expect doorExpect
	// build makes the request with the case's own values: a proto.Message, or a *doorRaw
	// sent as it is.
	build func(tb testing.TB, v doorValues) any
}

// doorOptionalParts are the sub-messages a request may leave out (method, space, path): the
// object of an Explain call only names the CSR (signetctl explain sends none).
var doorOptionalParts = map[string]bool{
	"/signet.v1.SignerService/ExplainCertificateSigningRequest request.object": true,
}

// doorFlood is how many entries a list or map gets in the flooding cases.
const doorFlood = 10_000

// doorControl holds C0 controls (NUL, ESC, LF, CR, BEL), DEL and a C1 control (NEL).
const doorControl = "a\x00b\x1b[31m\n\r\x07\x7f\u0085"

// doorMiB is a 1 MiB string.
var doorMiB = strings.Repeat("m", 1<<20)

// TestDoors calls every method of every gRPC service the server registers (found in
// ServiceInfo and the protobuf registry: a new RPC or field is covered without editing the
// test) as a caller allowed every signer with the admin role and as one allowed none, with:
// an empty message; the fully populated request (a valid signing request where the test knows
// one: it is signed); each set message field absent in turn; each string (fields, list entries,
// map keys and values, at every depth) holding control characters and, separately, 1 MiB;
// each list and map with 10,000 entries; and, with a raw codec, bytes that do not decode as the
// request (invalid UTF-8 in each string field, truncated encodings). It proves:
//
//   - no answer is Unknown or Internal, and every signet.v1 refusal carries an ErrorInfo of the
//     signet.dev domain with a reason of the wire contract (doorContract);
//   - undecodable bytes are INVALID_ARGUMENT with MALFORMED_REQUEST for both callers;
//   - for the caller allowed everything, an absent sub-message, and control characters in the
//     requester's username, UID, groups and extra or the object's name and UID, are
//     MALFORMED_REQUEST, while the valid requests they were made from are signed;
//   - afterwards the server still signs a valid request, gRPC health is SERVING, /readyz is
//     200, and, once stopped, its ledger verifies.
func TestDoors(t *testing.T) {
	t.Parallel()
	e := startDoors(t)
	caPEM := doorCAPEM(t, e.dir)
	cases := doorCases(t, e.methods, caPEM)
	t.Logf("%d cases over %d methods, each as two callers", len(cases), len(e.methods))
	t.Run("table", func(t *testing.T) {
		for i, c := range cases {
			t.Run(strings.TrimPrefix(c.method.full, "/")+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				for _, caller := range []string{doorAll, doorNone} {
					req := c.build(t, doorValues{uid: fmt.Sprintf("doors-%d-%s", i, caller), caPEM: caPEM})
					resp, err := e.call(caller, c.method, req)
					if problem := doorJudge(c, caller, resp, err); problem != nil {
						t.Errorf("%s, %s, as %s: answered %s: %v", c.method.full, c.name, caller, doorAnswer(resp, err), problem)
					}
				}
			})
		}
	})
	e.stillServing(t, "doors-after-the-table")
	e.Stop()
	if _, err := ledger.Verify(e.cfg.Ledger.Dir); err != nil {
		t.Errorf("the ledger does not verify after the table: %v", err)
	}
}

// doorJudge checks one answer against the contract and the case's expectation.
func doorJudge(c doorCase, caller string, resp proto.Message, err error) error {
	if problem := doorContract(c.method, err); problem != nil {
		return problem
	}
	if !c.method.signet() {
		return nil
	}
	switch {
	case c.expect == doorExpectUndecodable:
		return doorMalformed(resp, err, false)
	case caller != doorAll:
		return nil
	case c.expect == doorExpectMalformed:
		return doorMalformed(resp, err, true)
	case c.expect == doorExpectValid && err != nil:
		return fmt.Errorf("a valid request was refused")
	case c.expect == doorExpectValid:
		r := resp.ProtoReflect()
		if fd := r.Descriptor().Fields().ByName("allowed"); fd != nil && fd.Kind() == protoreflect.BoolKind && !r.Get(fd).Bool() {
			return fmt.Errorf("a valid request was not allowed")
		}
	}
	return nil
}

// doorCases lists the cases of every method.
func doorCases(tb testing.TB, methods []*doorMethod, caPEM string) []doorCase {
	tb.Helper()
	var out []doorCase
	for _, m := range methods {
		out = append(out, doorMethodCases(tb, m, caPEM)...)
	}
	return out
}

// doorMethodCases lists m's cases: the structured ones from the slots of its populated
// request, then the undecodable encodings.
func doorMethodCases(tb testing.TB, m *doorMethod, caPEM string) []doorCase {
	tb.Helper()
	add := func(out []doorCase, name string, expect doorExpect, build func(testing.TB, doorValues) any) []doorCase {
		return append(out, doorCase{method: m, name: name, expect: expect, build: build})
	}
	empty := doorExpectAny
	if doorHasSubMessage(m.desc.Input()) {
		empty = doorExpectMalformed
	}
	valid := doorExpectAny
	if _, ok := doorBases[m.desc.Input().FullName()]; ok {
		valid = doorExpectValid
	}
	out := add(nil, "empty message", empty, func(testing.TB, doorValues) any { return m.newRequest() })
	out = add(out, "populated", valid, func(tb testing.TB, v doorValues) any { return doorRequest(tb, m, v) })

	probe := doorRequest(tb, m, doorValues{uid: "probe", caPEM: caPEM})
	for i, s := range doorSlots(probe.ProtoReflect(), "", 0) {
		// change builds the case's request and changes its i-th slot, the one s describes.
		change := func(f func(doorSlot, doorValues)) func(testing.TB, doorValues) any {
			return func(tb testing.TB, v doorValues) any {
				msg := doorRequest(tb, m, v)
				slot := doorSlots(msg.ProtoReflect(), "", 0)[i]
				if slot.path != s.path {
					tb.Fatalf("slot %d is %s in one request and %s in another", i, s.path, slot.path)
				}
				f(slot, v)
				return msg
			}
		}
		switch {
		case s.isMessage():
			absent := doorExpectMalformed
			if doorOptionalParts[m.full+" "+s.path] {
				absent = doorExpectValid
			}
			out = add(out, "absent "+s.path, absent, change(func(s doorSlot, _ doorValues) { s.parent.Clear(s.fd) }))
		case s.isString():
			ctl := doorExpectAny
			if doorIdentitySlot(s) {
				ctl = doorExpectMalformed
			}
			out = add(out, "control characters in "+s.path, ctl, change(func(s doorSlot, _ doorValues) { s.setString(doorControl) }))
			out = add(out, "1 MiB in "+s.path, doorExpectAny, change(func(s doorSlot, _ doorValues) { s.setString(doorMiB) }))
		case s.isCollection():
			out = add(out, fmt.Sprintf("%d entries in %s", doorFlood, s.path), doorExpectAny,
				change(func(s doorSlot, v doorValues) { s.flood(doorFlood, v) }))
		}
	}

	validBytes, err := proto.Marshal(probe)
	if err != nil {
		tb.Fatal(err)
	}
	raw := func(name string, body []byte) {
		if proto.Unmarshal(body, m.newRequest()) == nil {
			tb.Fatalf("%s %s: the bytes decode", m.full, name)
		}
		out = add(out, name, doorExpectUndecodable, func(testing.TB, doorValues) any { r := doorRaw(doorCopy(body)); return &r })
	}
	for _, path := range doorStringPaths(m.desc.Input(), 0) {
		raw("undecodable: invalid UTF-8 in "+doorPathName(path), doorWithInvalidUTF8(validBytes, path))
	}
	truncated := doorTruncated(validBytes, m.desc.Input())
	for _, name := range slices.Sorted(maps.Keys(truncated)) {
		raw("undecodable: "+name, truncated[name])
	}
	return out
}

// doorHasSubMessage reports whether md has a singular message field.
func doorHasSubMessage(md protoreflect.MessageDescriptor) bool {
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message() != nil && !fd.IsList() && !fd.IsMap() {
			return true
		}
	}
	return false
}

// doorIdentitySlot reports whether s is a string of the requester's identity (username, UID,
// groups, extra keys and values) or the object's name or UID: where control characters are
// refused.
func doorIdentitySlot(s doorSlot) bool {
	switch s.parent.Descriptor().FullName() {
	case "signet.v1.Requester", "signet.v1.ExtraValue":
		return true
	case "signet.v1.KubernetesObject":
		return s.fd.Name() == "uid" || s.fd.Name() == "name"
	}
	return false
}
