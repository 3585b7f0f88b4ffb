package issuance_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

func TestParseCSRRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	valid := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	block, _ := pem.Decode(valid)
	withHeaders := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: block.Bytes})
	tests := []struct {
		name    string
		data    []byte
		want    error
		wantMsg string
	}{
		{"empty", nil, issuance.ErrMalformedRequest, "no PEM block"},
		{"no PEM", []byte("MIIBsomething"), issuance.ErrMalformedRequest, "no PEM block"},
		{"base64 DER without armour", []byte(strings.Join(strings.Split(string(valid), "\n")[1:3], "\n")), issuance.ErrMalformedRequest, "no PEM block"},
		{"wrong block type", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}), issuance.ErrMalformedRequest, `"CERTIFICATE"`},
		{"new-style type", pem.EncodeToMemory(&pem.Block{Type: "NEW CERTIFICATE REQUEST", Bytes: block.Bytes}), issuance.ErrMalformedRequest, "want \"CERTIFICATE REQUEST\""},
		{"PEM headers", withHeaders, issuance.ErrMalformedRequest, "headers"},
		{"trailing text", append(bytes.Clone(valid), "trailing"...), issuance.ErrMalformedRequest, "after"},
		{"second block", append(bytes.Clone(valid), valid...), issuance.ErrMalformedRequest, "after"},
		{"leading text", append([]byte("hello\n"), valid...), issuance.ErrMalformedRequest, "before"},
		{"broken block first", append([]byte("-----BEGIN CERTIFICATE REQUEST-----\n!!!\n"), valid...), issuance.ErrMalformedRequest, "before"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte("not DER at all")}), issuance.ErrMalformedRequest, "parsing PKCS#10"},
		{"truncated DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: block.Bytes[:len(block.Bytes)/2]}), issuance.ErrMalformedRequest, "parsing PKCS#10"},
		// Whitespace after the block is allowed, so only the size limit refuses this one.
		{"oversized", append(bytes.Clone(valid), bytes.Repeat([]byte(" "), 64<<10)...), issuance.ErrMalformedRequest, "more than the 65536 allowed"},
		{"broken signature", testpki.BreakSignature(t, valid), issuance.ErrInvalidSignature, "invalid request signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			csr, err := issuance.ParseCSR(tt.data)
			if csr != nil {
				t.Errorf("ParseCSR returned a request with error %v", err)
			}
			wantSentinel(t, err, tt.want)
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestParseCSRAcceptsWhitespaceAndCRLF(t *testing.T) {
	t.Parallel()
	valid := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	for name, data := range map[string][]byte{
		"as encoded":        valid,
		"surrounding blank": append(append([]byte("\n \t\n"), valid...), "\n\n  \n"...),
		"CRLF":              bytes.ReplaceAll(valid, []byte("\n"), []byte("\r\n")),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			csr, err := issuance.ParseCSR(data)
			if err != nil {
				t.Fatalf("ParseCSR: %v", err)
			}
			if csr.Subject.CommonName != "testpki-leaf" {
				t.Errorf("subject CN = %q, want testpki-leaf", csr.Subject.CommonName)
			}
		})
	}
}

func TestParseCSRKeyTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key     testpki.KeyType
		wantMsg string // empty: accepted
	}{
		{testpki.P256, ""},
		{testpki.P384, ""},
		{testpki.P521, ""},
		{testpki.Ed25519, ""},
		{testpki.RSA2048, ""},
		{testpki.RSA3072, ""},
		{testpki.RSA1024, "RSA key has 1024 bits, fewer than 2048"},
		{testpki.P224, "ECDSA curve P-224"},
	}
	for _, tt := range tests {
		t.Run(string(tt.key), func(t *testing.T) {
			t.Parallel()
			key := testpki.Key(t, tt.key)
			csr, err := issuance.ParseCSR(testpki.CSR(t, key, nil))
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("ParseCSR refused a %s request: %v", tt.key, err)
				}
				if !samePublicKey(key.Public(), csr.PublicKey) {
					t.Error("parsed public key differs from the requester's")
				}
				return
			}
			wantSentinel(t, err, issuance.ErrUnsupportedKey)
			for _, s := range []string{tt.wantMsg, "supported keys:", "RSA", "P-256", "P-384", "P-521", "Ed25519"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestCheckPublicKeyRefusesOddRSA(t *testing.T) {
	t.Parallel()
	rsa2048 := testpki.Key(t, testpki.RSA2048).Public().(*rsa.PublicKey)
	huge := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 8200), big.NewInt(1))
	tests := []struct {
		name    string
		pub     any
		wantMsg string
	}{
		{"exponent 3", &rsa.PublicKey{N: rsa2048.N, E: 3}, "exponent 3"},
		{"more than 8192 bits", &rsa.PublicKey{N: huge, E: 65537}, "8200 bits, more than 8192"},
		// A modulus that is not a whole number of bytes (zlint's e_mp_modulus_must_be_divisible_by_8).
		{"2052 bits", &rsa.PublicKey{N: new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 2052), big.NewInt(1)), E: 65537}, "2052 bits, not a whole number of bytes"},
		{"not a key", "a string", "key type string"},
		{"nil", nil, "key type <nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := issuance.CheckPublicKey(tt.pub)
			wantSentinel(t, err, issuance.ErrUnsupportedKey)
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), "supported keys:") {
				t.Errorf("error %q does not mention %q and the supported keys", err, tt.wantMsg)
			}
		})
	}
	if err := issuance.CheckPublicKey(rsa2048); err != nil {
		t.Errorf("CheckPublicKey(RSA-2048) = %v, want nil", err)
	}
}

// TestParseCSRChecksKeyBeforeSignature pins the order of the checks: a weak key is reported
// as such even when its signature is also broken, so the requester learns the real problem.
func TestParseCSRChecksKeyBeforeSignature(t *testing.T) {
	t.Parallel()
	broken := testpki.BreakSignature(t, testpki.CSR(t, testpki.Key(t, testpki.RSA1024), nil))
	_, err := issuance.ParseCSR(broken)
	wantSentinel(t, err, issuance.ErrUnsupportedKey)
}
