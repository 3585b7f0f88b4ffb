package tpm_test

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/tpm"
)

// TestGenerateListSimulator and TestGenerateListSwtpm: Generate makes keys List shows with
// the right URI, handle, algorithm and public key; the canonical URI re-opens the same key;
// Generate refuses a taken handle, an existing file and what the TPM cannot make.
func TestGenerateListSimulator(t *testing.T) {
	env := simTPM(t)
	t.Run("generate and list", func(t *testing.T) { testGenerateList(t, env) })

	// The go-tpm-tools simulator has no RSA-3072: the error names the algorithm.
	_, _, err := tpm.Generate(t.Context(), env.uri("blob="+blobPath(t)), keyerr.RSA3072, env.opts)
	if err == nil || !strings.Contains(err.Error(), "RSA-3072") {
		t.Errorf("Generate(RSA-3072) on the simulator = %v, want an error naming RSA-3072", err)
	}

	// A relative blob path becomes absolute in the canonical URI.
	dir := t.TempDir()
	t.Chdir(dir)
	k, uri, err := tpm.Generate(t.Context(), env.uri("blob=rel.tpmkey"), "", env.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if want := "tpm:blob=" + filepath.Join(dir, "rel.tpmkey"); uri != want || k.URI() != want {
		t.Errorf("canonical URI = %q (Key.URI %q), want %q", uri, k.URI(), want)
	}
}

func TestGenerateListSwtpm(t *testing.T) {
	t.Parallel()
	testGenerateList(t, swTPM(t))
}

func testGenerateList(t *testing.T, env testTPM) {
	ctx := t.Context()
	const handle, storageHandle = 0x81000200, 0x81000201
	handleURI := env.uri("handle=0x81000200")
	blob := blobPath(t)

	hk, gotURI, err := tpm.Generate(ctx, handleURI, "", env.opts) // P-256 by default
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evict(t, env.raw, handle) })
	t.Cleanup(func() { _ = hk.Close() })
	if gotURI != handleURI || hk.Algorithm() != keyerr.P256 || hk.Handle() != handle {
		t.Errorf("Generate(handle) = %q, %s, %#x; want %q, P-256, %#x", gotURI, hk.Algorithm(), hk.Handle(), handleURI, handle)
	}
	bk, blobURI, err := tpm.Generate(ctx, env.uri("blob="+blob), keyerr.RSA2048, env.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bk.Close() })
	if blobURI != env.uri("blob="+blob) || bk.Handle() != 0 {
		t.Errorf("Generate(blob) URI = %q, handle %#x; want %q, 0", blobURI, bk.Handle(), env.uri("blob="+blob))
	}
	if info, err := os.Stat(blob); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("blob file: %v, mode %v; want 0600", err, info.Mode())
	}
	if data, _ := os.ReadFile(blob); !bytes.HasPrefix(data, []byte("-----BEGIN TSS2 PRIVATE KEY-----")) {
		t.Errorf("the blob file is not a TSS2 PRIVATE KEY PEM file:\n%s", data)
	}
	persistKey(t, env.raw, storageHandle, tpm2.ECCSRKTemplate) // not a signing key: List leaves it out

	// List of the TPM shows the persistent signing key, not the storage key.
	entries, err := tpm.List(ctx, env.uri(""), env.opts)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range entries {
		switch e.Handle {
		case handle:
			found = true
			checkEntry(t, e, handleURI, handle, keyerr.P256, hk.Public())
		case storageHandle:
			t.Errorf("List shows the storage key at %#x", storageHandle)
		}
	}
	if !found {
		t.Errorf("List(%s) = %+v, missing the key at %#x", env.uri(""), entries, handle)
	}
	for uri, want := range map[string]tpm.Entry{
		handleURI: {URI: handleURI, Handle: handle, Algorithm: keyerr.P256, Public: hk.Public()},
		blobURI:   {URI: blobURI, Algorithm: keyerr.RSA2048, Public: bk.Public()},
	} {
		entries, err := tpm.List(ctx, uri, env.opts)
		if err != nil || len(entries) != 1 {
			t.Errorf("List(%s) = %v, %v; want one entry", uri, entries, err)
			continue
		}
		checkEntry(t, entries[0], want.URI, want.Handle, want.Algorithm, want.Public)
	}

	// The canonical URIs re-open the same keys.
	for _, k := range []*tpm.Key{hk, bk} {
		again := env.open(t, k.URI())
		if !again.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(k.Public()) {
			t.Errorf("%s re-opens a different key", k.URI())
		}
	}

	testGenerateRefusals(t, env, hk, blob)
}

// testGenerateRefusals: Generate refuses a taken handle (by a signing key or another
// object), an existing blob file or a missing directory, an unknown algorithm, a handle
// outside the owner's range and a URI without a key; the existing key and file are untouched.
func testGenerateRefusals(t *testing.T, env testTPM, hk *tpm.Key, blob string) {
	ctx := t.Context()
	handleURI, blobURI := hk.URI(), env.uri("blob="+blob)
	before, _ := os.ReadFile(blob)
	for _, tc := range []struct{ uri, algorithm, errHas string }{
		{handleURI, keyerr.P256, "handle=0x81000200: the handle holds a key already"},
		{env.uri("handle=0x81000201"), keyerr.P256, "handle=0x81000201: the handle holds a key already"},
		{blobURI, keyerr.P256, "blob=" + blob + ": the file exists"},
		{env.uri("blob=" + filepath.Join(t.TempDir(), "missing", "k")), keyerr.P256, "no such directory"},
		{env.uri("handle=0x81000202"), "Ed25519", `algorithm "Ed25519"`},
		{env.uri("handle=0x81800000"), keyerr.P256, "owner's range"},
		{env.uri(""), keyerr.P256, "names no key"},
	} {
		if k, _, err := tpm.Generate(ctx, tc.uri, tc.algorithm, env.opts); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			if k != nil {
				_ = k.Close()
			}
			t.Errorf("Generate(%s, %s) = %v, want an error containing %q", tc.uri, tc.algorithm, err, tc.errHas)
		}
	}
	if after, _ := os.ReadFile(blob); !bytes.Equal(before, after) {
		t.Errorf("a refused Generate changed the existing blob file")
	}
	if _, err := hk.Sign(nil, digest(), crypto.SHA256); err != nil {
		t.Errorf("the key at the refused handle no longer signs: %v", err)
	}
}

func checkEntry(t *testing.T, e tpm.Entry, uri string, handle uint32, algorithm string, pub crypto.PublicKey) {
	t.Helper()
	if e.URI != uri || e.Handle != handle || e.Algorithm != algorithm {
		t.Errorf("entry = %s %#x %s; want %s %#x %s", e.URI, e.Handle, e.Algorithm, uri, handle, algorithm)
	}
	if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(e.Public) {
		t.Errorf("entry %s: the public key is not the key's", e.URI)
	}
}

// digest is a SHA-256 digest to sign.
func digest() []byte {
	d := sha256.Sum256([]byte("signet tpm test"))
	return d[:]
}

// isUnavailable reports whether err wraps keyerr.ErrUnavailable.
func isUnavailable(err error) bool { return errors.Is(err, keyerr.ErrUnavailable) }
