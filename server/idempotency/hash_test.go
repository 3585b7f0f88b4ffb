package idempotency_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/signet-pki/signet/server/idempotency"
)

type req struct {
	signer   string
	request  []byte
	usages   []string
	exp      *int32
	username string
	uid      string
	groups   []string
	extra    map[string][]string
}

func (r req) hash() []byte {
	return idempotency.RequestHash(r.signer, r.request, r.usages, r.exp, r.username, r.uid, r.groups, r.extra)
}

func i32(v int32) *int32 { return &v }

func base() req {
	return req{
		signer: "example.com/signer", request: []byte("-----BEGIN CERTIFICATE REQUEST-----"),
		usages: []string{"digital signature", "client auth"}, exp: i32(3600),
		username: "system:node:worker-1", uid: "u-1", groups: []string{"system:nodes", "system:authenticated"},
		extra: map[string][]string{"a": {"1", "2"}, "b": {"3"}},
	}
}

func TestRequestHashIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := base(), base()
	b.extra = map[string][]string{"b": {"3"}, "a": {"1", "2"}}
	if !bytes.Equal(a.hash(), b.hash()) {
		t.Error("same request, different hash")
	}
	if len(a.hash()) != 32 {
		t.Errorf("hash is %d bytes, want 32", len(a.hash()))
	}
}

func TestRequestHashSeparatesEveryField(t *testing.T) {
	t.Parallel()
	edits := map[string]func(*req){
		"signer":             func(r *req) { r.signer = "example.com/other" },
		"request":            func(r *req) { r.request = append(r.request, 'x') },
		"usages order":       func(r *req) { r.usages = []string{"client auth", "digital signature"} },
		"usage boundary":     func(r *req) { r.usages = []string{"digital signatureclient", " auth"} },
		"usages merged":      func(r *req) { r.usages = []string{"digital signatureclient auth"} },
		"expiration absent":  func(r *req) { r.exp = nil },
		"expiration value":   func(r *req) { r.exp = i32(3601) },
		"expiration zero":    func(r *req) { r.exp = i32(0) },
		"username":           func(r *req) { r.username = "system:node:worker-2" },
		"username/uid shift": func(r *req) { r.username, r.uid = "system:node:worker-1u", "-1" },
		"uid":                func(r *req) { r.uid = "u-2" },
		"groups order":       func(r *req) { r.groups = []string{"system:authenticated", "system:nodes"} },
		"group moved": func(r *req) {
			r.groups, r.extra = r.groups[:1], map[string][]string{"a": {"1", "2"}, "b": {"3"}, "system:authenticated": nil}
		},
		"extra value":       func(r *req) { r.extra = map[string][]string{"a": {"1"}, "b": {"2", "3"}} },
		"extra key":         func(r *req) { r.extra = map[string][]string{"a": {"1", "2"}, "c": {"3"}} },
		"extra empty value": func(r *req) { r.extra["c"] = nil },
	}
	seen := map[string]string{hex.EncodeToString(base().hash()): "base"}
	for name, edit := range edits {
		r := base()
		r.extra = map[string][]string{"a": {"1", "2"}, "b": {"3"}}
		edit(&r)
		h := hex.EncodeToString(r.hash())
		if other, dup := seen[h]; dup {
			t.Errorf("%s hashes like %s", name, other)
		}
		seen[h] = name
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	if got, want := idempotency.Key("uid-1", []byte{0xab, 0x01}), "uid-1/ab01"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}
