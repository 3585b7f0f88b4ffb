package tpm_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/tpm"
)

// TestImportSimulator and TestImportSwtpm: keys imported as a blob and at a persistent
// handle open by their canonical URI with the imported public key and sign; their attributes
// are what Import's doc says (no fixedTPM, fixedParent or sensitiveDataOrigin, an empty
// authPolicy), and TPM2_Duplicate cannot take them out again; Import refuses an existing
// blob or handle and keys the TPM cannot hold, leaving the existing ones untouched.
func TestImportSimulator(t *testing.T) {
	env := simTPM(t)
	// The simulator has no RSA-3072: the TPM's refusal names the algorithm.
	testImport(t, env, []testpki.KeyType{testpki.P256, testpki.P384, testpki.RSA2048}, 0x81000300)
	_, err := tpm.Import(t.Context(), env.uri("blob="+blobPath(t)), testpki.Key(t, testpki.RSA3072), env.opts)
	if err == nil || !strings.Contains(err.Error(), "importing the RSA-3072 key") {
		t.Errorf("Import(RSA-3072) on the simulator = %v, want the TPM's refusal naming RSA-3072", err)
	}
}

func TestImportSwtpm(t *testing.T) {
	t.Parallel()
	env := swTPM(t)
	testImport(t, env, []testpki.KeyType{testpki.P256, testpki.P384, testpki.RSA2048, testpki.RSA3072}, 0x81000300)
}

func testImport(t *testing.T, env testTPM, keyTypes []testpki.KeyType, firstHandle uint32) {
	outer := t
	for i, kt := range keyTypes {
		key := testpki.Key(t, kt)
		handle := firstHandle + uint32(i)
		blob := blobPath(t)
		for _, target := range []string{"blob=" + blob, fmt.Sprintf("handle=0x%08x", handle)} {
			t.Run(string(kt)+"/"+strings.SplitN(target, "=", 2)[0], func(t *testing.T) {
				uri, err := tpm.Import(t.Context(), env.uri(target), key, env.opts)
				if err != nil {
					t.Fatalf("Import: %v", err)
				}
				if strings.HasPrefix(target, "handle=") {
					outer.Cleanup(func() { evict(outer, env.raw, handle) })
				}
				if uri != env.uri(target) {
					t.Errorf("canonical URI = %q, want %q", uri, env.uri(target))
				}
				k := env.open(t, uri)
				if !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
					t.Fatal("the imported key opens with another public key")
				}
				if k.Algorithm() != string(kt) {
					t.Errorf("Algorithm() = %q, want %q", k.Algorithm(), kt)
				}
				sig, err := k.Sign(nil, digest(), crypto.SHA256)
				if err != nil || !verifies(key.Public(), sig) {
					t.Errorf("the imported key's signature: %v, or it does not verify with the original public key", err)
				}
			})
		}
		if info, err := os.Stat(blob); err != nil {
			t.Errorf("blob file: %v", err)
		} else if info.Mode().Perm() != 0o600 {
			t.Errorf("blob file mode %v, want 0600", info.Mode())
		}
		if data, _ := os.ReadFile(blob); !bytes.HasPrefix(data, []byte("-----BEGIN TSS2 PRIVATE KEY-----")) {
			t.Errorf("the blob file is not a TSS2 PRIVATE KEY PEM file")
		}
		if i == 0 {
			t.Run("attributes", func(t *testing.T) { checkImportedKey(t, env.raw, handle) })
			t.Run("refusals", func(t *testing.T) { testImportRefusals(t, env, blob, handle) })
		}
	}
}

// checkImportedKey reads the public area of the imported persistent key at h: it may sign
// with an empty password, was not made by this TPM, and has no policy; and TPM2_Duplicate,
// authorized by a policy session that allows it, is refused (to TPM_RH_NULL, it would hand
// out the key in the clear).
func checkImportedKey(t *testing.T, tr transport.TPM, h uint32) {
	rsp, err := tpm2.ReadPublic{ObjectHandle: tpm2.TPMHandle(h)}.Execute(tr)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	want := tpm2.TPMAObject{UserWithAuth: true, NoDA: true, SignEncrypt: true}
	if pub.ObjectAttributes != want {
		t.Errorf("attributes = %+v, want %+v", pub.ObjectAttributes, want)
	}
	if len(pub.AuthPolicy.Buffer) != 0 {
		t.Errorf("authPolicy = %x, want empty", pub.AuthPolicy.Buffer)
	}
	_, err = tpm2.Duplicate{
		ObjectHandle: tpm2.AuthHandle{
			Handle: tpm2.TPMHandle(h),
			Name:   rsp.Name,
			Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, tpm2.PolicyCallback(func(tpm transport.TPM, s tpm2.TPMISHPolicy, _ tpm2.TPM2BNonce) error {
				_, err := tpm2.PolicyCommandCode{PolicySession: s, Code: tpm2.TPMCCDuplicate}.Execute(tpm)
				return err
			})),
		},
		NewParentHandle: tpm2.TPMRHNull,
		Symmetric:       tpm2.TPMTSymDef{Algorithm: tpm2.TPMAlgNull},
	}.Execute(tr)
	if err == nil {
		t.Fatal("TPM2_Duplicate of the imported key succeeded: the key can leave the TPM")
	}
	if !strings.Contains(err.Error(), "TPM_RC_POLICY_FAIL") {
		t.Errorf("TPM2_Duplicate = %v, want TPM_RC_POLICY_FAIL (the empty authPolicy matches no policy)", err)
	}
	flushSessions(t, tr)
}

// flushSessions flushes the policy sessions a refused command left loaded.
func flushSessions(t *testing.T, tr transport.TPM) {
	for _, first := range []uint32{0x02000000, 0x03000000} {
		rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapHandles, Property: first, PropertyCount: 16}.Execute(tr)
		if err != nil {
			t.Fatal(err)
		}
		handles, err := rsp.CapabilityData.Data.Handles()
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range handles.Handle {
			if uint32(h)&0xff000000 == first {
				_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tr)
			}
		}
	}
}

// testImportRefusals: Import refuses the existing blob file and the taken handle (leaving
// both as they were), a missing directory, a handle outside the owner's range, and keys a TPM
// cannot hold.
func testImportRefusals(t *testing.T, env testTPM, blob string, handle uint32) {
	ctx := t.Context()
	before, _ := os.ReadFile(blob)
	p256 := testpki.Key(t, testpki.P256)
	for _, tc := range []struct {
		target string
		key    crypto.Signer
		errHas string
	}{
		{"blob=" + blob, p256, "blob=" + blob + ": the file exists"},
		{fmt.Sprintf("handle=0x%08x", handle), p256, "the handle holds a key already"},
		{"blob=" + filepath.Join(t.TempDir(), "missing", "k"), p256, "no such directory"},
		{"handle=0x81800000", p256, "owner's range"},
		{"", p256, "names no key"},
		{"blob=" + blobPath(t), testpki.Key(t, testpki.Ed25519), "Ed25519 keys cannot be imported"},
		{"blob=" + blobPath(t), testpki.Key(t, testpki.P521), "ECC curve P-521"},
		{"blob=" + blobPath(t), testpki.Key(t, testpki.RSA4096), "RSA-4096: want RSA-2048 or RSA-3072"},
		{"blob=" + blobPath(t), threePrimes(t), "3 primes"},
	} {
		if _, err := tpm.Import(ctx, env.uri(tc.target), tc.key, env.opts); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("Import(%s, %T) = %v, want an error containing %q", tc.target, tc.key, err, tc.errHas)
		}
	}
	if after, _ := os.ReadFile(blob); !bytes.Equal(before, after) {
		t.Error("a refused Import changed the existing blob file")
	}
	k := env.open(t, env.uri(fmt.Sprintf("handle=0x%08x", handle)))
	if k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(p256.Public()) {
		t.Error("a refused Import replaced the key at the taken handle")
	}
}

// TestImportedBlobIsThisTPMs: a blob imported on one swtpm does not load on another: it is
// sealed by the first one's storage root key.
func TestImportedBlobIsThisTPMs(t *testing.T) {
	t.Parallel()
	one, other := swtpmtest.Start(t), swtpmtest.Start(t)
	blob := blobPath(t)
	if _, err := tpm.Import(t.Context(), one.URI("blob="+blob), testpki.Key(t, testpki.P256), tpm.Options{}); err != nil {
		t.Fatal(err)
	}
	k, err := tpm.Open(t.Context(), other.URI("blob="+blob), tpm.Options{})
	if err == nil {
		_ = k.Close()
		t.Fatal("another TPM loaded the imported blob")
	}
	if !strings.Contains(err.Error(), "the TPM refuses the blob") {
		t.Errorf("Open on another TPM = %v, want the TPM's refusal of the blob", err)
	}
}

// threePrimes returns an RSA-2048 key that claims three primes.
func threePrimes(t *testing.T) *rsa.PrivateKey {
	k := testpki.Key(t, testpki.RSA2048).(*rsa.PrivateKey)
	return &rsa.PrivateKey{PublicKey: k.PublicKey, D: k.D, Primes: []*big.Int{k.Primes[0], k.Primes[1], big.NewInt(3)}}
}

// verifies reports whether sig is pub's signature over digest() (ECDSA, or RSA PKCS #1 v1.5).
func verifies(pub crypto.PublicKey, sig []byte) bool {
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(pub, digest(), sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest(), sig) == nil
	}
	return false
}
