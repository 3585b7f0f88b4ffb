package tpm_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/keystore/tpm"
)

// TestKeysMadeElsewhere: persistent keys this backend did not make are opened when it can
// sign with them (a key bound to one scheme signs that scheme only) and refused, naming the
// algorithm, when it cannot; List leaves the refused ones out.
func TestKeysMadeElsewhere(t *testing.T) {
	env := simTPM(t)
	rsassa := tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgRSASSA, Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256})}
	restricted := rsaSigningKey(2048, rsassa)
	restricted.ObjectAttributes.Restricted = true

	persistKey(t, env.raw, 0x81000601, eccSigningKey(tpm2.TPMECCNistP521))
	persistKey(t, env.raw, 0x81000602, rsaSigningKey(1024, tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgNull}))
	persistKey(t, env.raw, 0x81000603, restricted)
	persistKey(t, env.raw, 0x81000604, rsaSigningKey(2048, rsassa))

	for _, tc := range []struct{ handle, errHas string }{
		{"0x81000601", "handle=0x81000601: ECC curve P-521: want P-256 or P-384"},
		{"0x81000602", "handle=0x81000602: RSA-1024: want RSA-2048 or RSA-3072"},
		{"0x81000603", "handle=0x81000603: not an unrestricted signing key"},
	} {
		k, err := tpm.Open(t.Context(), env.uri("handle="+tc.handle), env.opts)
		if err == nil {
			_ = k.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.errHas) || isUnavailable(err) {
			t.Errorf("Open(handle=%s) = %v, want an error containing %q", tc.handle, err, tc.errHas)
		}
	}

	// A key bound to RSASSA with SHA-256 signs that, and refuses the rest before the TPM does.
	k := env.open(t, env.uri("handle=0x81000604"))
	if _, err := k.Sign(nil, digest(), crypto.SHA256); err != nil {
		t.Errorf("RSASSA SHA-256 with an RSASSA SHA-256 key: %v", err)
	}
	h384 := sha512.Sum384([]byte("x"))
	for _, tc := range []struct {
		digest []byte
		opts   crypto.SignerOpts
		errHas string
	}{
		{h384[:], crypto.SHA384, "the key allows only RSASSA with SHA-256, not RSASSA with SHA-384"},
		{digest(), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}, "not RSAPSS with SHA-256"},
	} {
		if _, err := k.Sign(nil, tc.digest, tc.opts); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("Sign(%v) = %v, want an error containing %q", tc.opts, err, tc.errHas)
		}
	}

	entries, err := tpm.List(t.Context(), env.uri(""), env.opts)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, e := range entries {
		if e.Handle > 0x81000600 && e.Handle < 0x81000700 {
			listed = append(listed, fmt.Sprintf("%#x", e.Handle))
		}
	}
	if fmt.Sprint(listed) != "[0x81000604]" {
		t.Errorf("List shows %v of the keys made elsewhere, want [0x81000604] alone", listed)
	}
}

// persistKey creates a primary key from template in the owner hierarchy and makes it
// persistent at h, evicting it when the test ends.
func persistKey(t *testing.T, tr transport.TPM, h uint32, template tpm2.TPMTPublic) {
	t.Helper()
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(template)}.Execute(tr)
	if err != nil {
		t.Fatalf("CreatePrimary: %v", err)
	}
	defer tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(tr)
	_, err = tpm2.EvictControl{
		Auth:             tpm2.TPMRHOwner,
		ObjectHandle:     tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name},
		PersistentHandle: tpm2.TPMHandle(h),
	}.Execute(tr)
	if err != nil {
		t.Fatalf("EvictControl: %v", err)
	}
	t.Cleanup(func() { evict(t, tr, h) })
}

// signAttributes are those of an unrestricted signing key made by another tool.
var signAttributes = tpm2.TPMAObject{FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true, SignEncrypt: true}

// eccSigningKey is the template of an ECC signing key on curve.
func eccSigningKey(curve tpm2.TPMECCCurve) tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type: tpm2.TPMAlgECC, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: signAttributes,
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme:    tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
			CurveID:   curve,
			KDF:       tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{}),
	}
}

// rsaSigningKey is the template of an RSA signing key of bits with scheme.
func rsaSigningKey(bits tpm2.TPMKeyBits, scheme tpm2.TPMTRSAScheme) tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type: tpm2.TPMAlgRSA, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: signAttributes,
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme:    scheme,
			KeyBits:   bits,
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{}),
	}
}
