package tpm

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// testKeyFile returns a key file with a well-formed P-256 public area (of a made-up point) and
// an opaque private part, as the TPM would seal it.
func testKeyFile(t testing.TB) keyFile {
	t.Helper()
	tmpl, err := keyTemplate(keyerr.P256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: bytes.Repeat([]byte{1}, 32)},
		Y: tpm2.TPM2BECCParameter{Buffer: bytes.Repeat([]byte{2}, 32)},
	})
	return keyFile{
		parent:    tpm2.TPMRHOwner,
		emptyAuth: true,
		public:    tpm2.New2B(tmpl),
		private:   tpm2.TPM2BPrivate{Buffer: bytes.Repeat([]byte{0xAB}, 126)},
	}
}

// TestKeyFileRoundTrip: a key file encodes as a "TSS2 PRIVATE KEY" PEM block of the
// draft-bottomley-tpm2-keys TPMKey sequence (the openssl tpm2 provider's format) and parses
// back to the same parts.
func TestKeyFileRoundTrip(t *testing.T) {
	t.Parallel()
	kf := testKeyFile(t)
	data, err := marshalKeyFile(kf)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "TSS2 PRIVATE KEY" {
		t.Fatalf("not a TSS2 PRIVATE KEY PEM block:\n%s", data)
	}
	// The sequence as the draft and the openssl tpm2 provider lay it out, field by field.
	var raw struct {
		Type      asn1.ObjectIdentifier
		EmptyAuth bool `asn1:"explicit,tag:0"`
		Parent    int64
		PubKey    []byte
		PrivKey   []byte
	}
	if rest, err := asn1.Unmarshal(block.Bytes, &raw); err != nil || len(rest) != 0 {
		t.Fatalf("the TPMKey sequence does not parse as the draft lays it out: %v", err)
	}
	if raw.Type.String() != "2.23.133.10.1.3" || !raw.EmptyAuth || raw.Parent != 0x40000001 {
		t.Errorf("type, emptyAuth, parent = %v, %v, %#x; want 2.23.133.10.1.3, true, 0x40000001", raw.Type, raw.EmptyAuth, raw.Parent)
	}
	if !bytes.Equal(raw.PubKey, tpm2.Marshal(kf.public)) || !bytes.Equal(raw.PrivKey, tpm2.Marshal(kf.private)) {
		t.Errorf("pubkey and privkey are not the marshalled TPM2B_PUBLIC and TPM2B_PRIVATE")
	}
	got, err := parseKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.parent != kf.parent || got.emptyAuth != kf.emptyAuth ||
		!bytes.Equal(tpm2.Marshal(got.public), tpm2.Marshal(kf.public)) || !bytes.Equal(got.private.Buffer, kf.private.Buffer) {
		t.Errorf("parsed key file differs from the one written")
	}
}

// TestParseOpenSSLKeyFiles: key files the openssl tpm2 provider made (openssl genpkey
// -provider tpm2, on swtpm) parse, with the public key openssl exports for them. (Signet's
// files load in openssl too; that direction needs the provider and a TPM, and was checked by
// hand: openssl pkey -pubout and pkeyutl -sign with a Signet blob on swtpm.)
func TestParseOpenSSLKeyFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, algorithm string }{
		{"openssl-p256", keyerr.P256},
		{"openssl-rsa2048", keyerr.RSA2048},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.name+".tss2.pem"))
		if err != nil {
			t.Fatal(err)
		}
		kf, err := parseKeyFile(data)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !kf.emptyAuth || kf.parent != tpm2.TPMRHOwner {
			t.Errorf("%s: emptyAuth %v, parent %#x; want true, the owner hierarchy", tc.name, kf.emptyAuth, uint32(kf.parent))
		}
		pub, err := kf.public.Contents()
		if err != nil {
			t.Fatal(err)
		}
		info, err := inspect(pub)
		if err != nil || info.algorithm != tc.algorithm {
			t.Errorf("%s: inspect = %s, %v; want %s", tc.name, info.algorithm, err, tc.algorithm)
			continue
		}
		pemPub, err := os.ReadFile(filepath.Join("testdata", tc.name+".pub.pem"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pemPub)
		want, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !want.(interface{ Equal(crypto.PublicKey) bool }).Equal(info.public) {
			t.Errorf("%s: the public key is not the one openssl exports", tc.name)
		}
	}
}

// TestParseKeyFileRefuses: what cannot be a loadable key of this backend is refused with the
// reason.
func TestParseKeyFileRefuses(t *testing.T) {
	t.Parallel()
	kf := testKeyFile(t)
	// rawKey is tssPrivateKey with the optional fields written as they come, tag and all.
	type rawKey struct {
		Type      asn1.ObjectIdentifier
		Auth      asn1.RawValue `asn1:"optional"` // emptyAuth, tag and all
		EmptyAuth bool          `asn1:"optional,explicit,tag:0"`
		Policy    asn1.RawValue `asn1:"optional"`
		Secret    asn1.RawValue `asn1:"optional"`
		RSAParent bool          `asn1:"optional,explicit,tag:5"`
		Parent    int64
		PubKey    []byte
		PrivKey   []byte
	}
	explicit := func(tag int, inner []byte) asn1.RawValue {
		return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: tag, IsCompound: true, Bytes: inner}
	}
	good := rawKey{Type: oidLoadableKey, EmptyAuth: true, Parent: 0x40000001, PubKey: tpm2.Marshal(kf.public), PrivKey: tpm2.Marshal(kf.private)}
	encode := func(mutate func(*rawKey)) []byte {
		k := good
		mutate(&k)
		der, err := asn1.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "TSS2 PRIVATE KEY", Bytes: der})
	}
	policy, _ := asn1.Marshal([]asn1.RawValue{})
	for _, tc := range []struct {
		name   string
		data   []byte
		errHas string
	}{
		{"empty", nil, "no PEM block"},
		{"other PEM type", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), `"PRIVATE KEY" is not "TSS2 PRIVATE KEY"`},
		{"not DER", pem.EncodeToMemory(&pem.Block{Type: "TSS2 PRIVATE KEY", Bytes: []byte{1, 2, 3}}), "parsing TSS2 PRIVATE KEY"},
		{"trailing DER", func() []byte {
			b, _ := pem.Decode(encode(func(*rawKey) {}))
			return pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: append(b.Bytes, 0)})
		}(), "trailing data"},
		{"sealed key", encode(func(k *rawKey) { k.Type = asn1.ObjectIdentifier{2, 23, 133, 10, 1, 5} }), "not a loadable key"},
		{"policy", encode(func(k *rawKey) { k.Policy = explicit(1, policy) }), "authorization policy"},
		{"secret", encode(func(k *rawKey) { k.Secret = explicit(2, []byte{asn1.TagOctetString, 1, 0}) }), "imported secret"},
		{"RSA parent", encode(func(k *rawKey) { k.RSAParent = true }), "RSA storage root key"},
		{"emptyAuth not a boolean", encode(func(k *rawKey) { k.EmptyAuth = false; k.Auth = explicit(0, []byte{asn1.TagInteger, 1, 1}) }), "emptyAuth is not a BOOLEAN"},
		{"odd parent", encode(func(k *rawKey) { k.Parent = 0x80000000 }), "parent 0x80000000"},
		{"short public", encode(func(k *rawKey) { k.PubKey = k.PubKey[:10] }), "public part: size field"},
		{"public with trailing bytes", encode(func(k *rawKey) {
			inner := append(kf.public.Bytes(), 0)
			k.PubKey = tpm2.Marshal(tpm2.BytesAs2B[tpm2.TPMTPublic](inner))
		}), "public part: trailing data"},
		{"private size", encode(func(k *rawKey) { k.PrivKey = append(k.PrivKey, 0) }), "private part: size field"},
	} {
		if _, err := parseKeyFile(tc.data); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: parseKeyFile = %v, want an error containing %q", tc.name, err, tc.errHas)
		}
	}
	// The openssl tpm2 provider writes emptyAuth TRUE as BER's 0x01.
	got, err := parseKeyFile(encode(func(k *rawKey) { k.EmptyAuth = false; k.Auth = explicit(0, []byte{asn1.TagBoolean, 1, 1}) }))
	if err != nil || !got.emptyAuth {
		t.Errorf("emptyAuth 0x01: got %v, %v; want true", got.emptyAuth, err)
	}
	// An absent parent is the owner hierarchy, as the openssl tpm2 provider reads it.
	got, err = parseKeyFile(encode(func(k *rawKey) { k.Parent = 0 }))
	if err != nil || got.parent != tpm2.TPMRHOwner {
		t.Errorf("parent 0: got %#x, %v; want the owner hierarchy", uint32(got.parent), err)
	}
}

// FuzzParseKeyFile: no input makes the blob parser panic, and what it accepts re-encodes to a
// file it accepts again.
func FuzzParseKeyFile(f *testing.F) {
	data, err := marshalKeyFile(testKeyFile(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	block, _ := pem.Decode(data)
	f.Add(block.Bytes)
	for _, name := range []string{"openssl-p256", "openssl-rsa2048"} {
		if data, err := os.ReadFile(filepath.Join("testdata", name+".tss2.pem")); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte("-----BEGIN")) {
			data = pem.EncodeToMemory(&pem.Block{Type: "TSS2 PRIVATE KEY", Bytes: data})
		}
		kf, err := parseKeyFile(data)
		if err != nil {
			return
		}
		pub, err := kf.public.Contents()
		if err == nil {
			_, _ = inspect(pub)
		}
		again, err := marshalKeyFile(kf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseKeyFile(again); err != nil {
			t.Fatalf("a parsed key file does not parse again: %v", err)
		}
	})
}

// FuzzParsePublic: no public area in a blob makes the parser or inspect panic.
func FuzzParsePublic(f *testing.F) {
	kf := testKeyFile(f)
	f.Add(tpm2.Marshal(kf.public))
	for _, a := range []string{keyerr.P384, keyerr.RSA2048} {
		tm, err := keyTemplate(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tpm2.Marshal(tpm2.New2B(tm)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := unmarshal2B[tpm2.TPM2BPublic](data)
		if err != nil {
			return
		}
		pub, err := p.Contents()
		if err != nil {
			return
		}
		_, _ = inspect(pub)
	})
}
