package server_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// updateDoorSeeds makes TestDoorsSeeds write the seed corpora.
var updateDoorSeeds = flag.Bool("update-door-seeds", false, "write the seed corpora of FuzzGRPC and FuzzWebhook into testdata/fuzz")

// TestDoorsSeeds: every method the server registers has its seeds in FuzzGRPC's corpus (at
// least the valid request), so that a new RPC is fuzzed from its first run; with
// -update-door-seeds it (re)writes the corpora first (run it from the server folder after
// adding an RPC: `go test -run TestDoorsSeeds ./server/ -update-door-seeds`). For every
// registered method: its populated request (the valid one for the signing calls), an empty
// message, one with a string field that is not UTF-8, and a truncated one. For the webhook: an
// approved CSR object, one not approved, another kind, truncated JSON, huge numbers, duplicate
// fields, and control characters in metadata.name and spec.username.
func TestDoorsSeeds(t *testing.T) {
	if !*updateDoorSeeds {
		e := startDoors(t)
		for _, m := range e.methods {
			name := strings.ReplaceAll(strings.TrimPrefix(m.full, "/"), "/", ".")
			if _, err := os.Stat(filepath.Join("testdata", "fuzz", "FuzzGRPC", name+"-valid")); err != nil {
				t.Errorf("%s has no seed in FuzzGRPC's corpus (%v): run go test -run TestDoorsSeeds ./server/ -update-door-seeds", m.full, err)
			}
		}
		if _, err := os.Stat(filepath.Join("testdata", "fuzz", "FuzzWebhook", "approved")); err != nil {
			t.Errorf("FuzzWebhook's corpus has no approved CSR: %v", err)
		}
		return
	}
	e := startDoors(t)
	caPEM := doorCAPEM(t, e.dir)
	dir := filepath.Join("testdata", "fuzz", "FuzzGRPC")
	for _, m := range e.methods {
		valid, err := proto.Marshal(doorRequest(t, m, doorValues{uid: "seed", caPEM: caPEM}))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(strings.TrimPrefix(m.full, "/"), "/", ".")
		seeds := map[string][]byte{"valid": valid, "truncated": doorTruncated(valid, m.desc.Input())["truncated: a length past the end"]}
		if len(valid) > 0 { // else the valid message is the empty one
			seeds["empty"] = []byte{}
		}
		if paths := doorStringPaths(m.desc.Input(), 0); len(paths) > 0 {
			seeds["invalid-utf8"] = doorWithInvalidUTF8(valid, paths[0])
		}
		for kind, body := range seeds {
			doorWriteSeed(t, filepath.Join(dir, name+"-"+kind), fmt.Sprintf("string(%q)", m.full), fmt.Sprintf("[]byte(%q)", body))
		}
	}

	dir = filepath.Join("testdata", "fuzz", "FuzzWebhook")
	request := doorSignCSR(t, "seed").GetRequest()
	object := func(edit func(*certificatesv1.CertificateSigningRequest)) []byte {
		csr := csrObject("seed-webhook", request)
		if edit != nil {
			edit(csr)
		}
		return webhooktest.JSON(t, csr)
	}
	approved := object(nil)
	seeds := map[string][]byte{
		"approved":     approved,
		"not-approved": object(func(c *certificatesv1.CertificateSigningRequest) { c.Status.Conditions = nil }),
		"wrong-kind":   object(func(c *certificatesv1.CertificateSigningRequest) { c.Kind = "PodCertificateRequest" }),
		"truncated":    approved[:len(approved)/2],
		"huge-numbers": bytes.Replace(approved, []byte(`"expirationSeconds":3600`),
			[]byte(`"expirationSeconds":99999999999999999999999999999999e999999`), 1),
		"duplicate-fields": bytes.Replace(approved, []byte(`{"kind":"CertificateSigningRequest",`),
			[]byte(`{"kind":"CertificateSigningRequest","kind":"CertificateSigningRequest",`), 1),
		"control-characters-name":     object(doorIdentityEdits["metadata.name"]),
		"control-characters-username": object(doorIdentityEdits["spec.username"]),
	}
	for name, body := range seeds {
		if name != "approved" && bytes.Equal(body, approved) {
			t.Fatalf("seed %s did not change the approved object", name)
		}
		doorWriteSeed(t, filepath.Join(dir, name), fmt.Sprintf("[]byte(%q)", body))
	}
}

// doorWriteSeed writes one corpus file (`go test fuzz v1`) holding values, Go literals.
func doorWriteSeed(t *testing.T, path string, values ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := "go test fuzz v1\n" + strings.Join(values, "\n") + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
