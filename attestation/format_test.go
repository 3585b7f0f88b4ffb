package attestation_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/signet-pki/signet/attestation"
)

// evidenceJSON is well-formed attestation data (not valid evidence) with field set to value,
// or removed when value is nil.
func evidenceJSON(t *testing.T, field string, value any) []byte {
	t.Helper()
	m := map[string]any{
		"version": attestation.VersionV1, "ekPublic": []byte{1}, "akPublic": []byte{1}, "ticket": "t",
		"keyPublic": []byte{1}, "certifyInfo": []byte{1}, "certifySignature": []byte{1}, "bindingSignature": []byte{1},
	}
	if value == nil {
		delete(m, field)
	} else if field != "" {
		m[field] = value
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func block(typ string, data []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: data})
}

func TestSplit(t *testing.T) {
	_, csrPEM := kubeletCSR(t, "node-a", "p")
	provider := block(attestation.BlockProvider, []byte(attestation.ProviderTPM))
	data := block(attestation.BlockData, evidenceJSON(t, "", nil))
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name  string
		in    []byte
		check attestation.Check // "" when Split accepts
		says  string
	}{
		{"the three blocks", join(csrPEM, provider, data), "", ""},
		{"surrounding whitespace", join([]byte("\n "), csrPEM, []byte("\n"), provider, data, []byte("\n\n")), "", ""},
		{"no attestation at all", csrPEM, attestation.CheckFormat, "the KUBELET AUTHENTICATOR ATTESTATION PROVIDER block is missing"},
		{"no data block", join(csrPEM, provider), attestation.CheckFormat, "the KUBELET AUTHENTICATOR ATTESTATION DATA block is missing"},
		{"no provider block", join(csrPEM, data), attestation.CheckFormat, `block 2 is "KUBELET AUTHENTICATOR ATTESTATION DATA"`},
		{"blocks out of order", join(provider, csrPEM, data), attestation.CheckFormat, `block 1 is "KUBELET AUTHENTICATOR ATTESTATION PROVIDER"`},
		{"a fourth block", join(csrPEM, provider, data, block("CERTIFICATE", []byte{1})), attestation.CheckFormat, `a "CERTIFICATE" block follows`},
		{"text between blocks", join(csrPEM, []byte("hello\n"), provider, data), attestation.CheckFormat, "data outside a PEM block"},
		{"a broken block", join(csrPEM, []byte("-----BEGIN X-----\n!!\n"), provider, data), attestation.CheckFormat, "does not decode"},
		{"headers", join(csrPEM, []byte("-----BEGIN "+attestation.BlockProvider+"-----\nA: b\n\ndHBt\n-----END "+attestation.BlockProvider+"-----\n"), data), attestation.CheckFormat, "PEM headers"},
		{"another provider", join(csrPEM, block(attestation.BlockProvider, []byte("aws")), data), attestation.CheckFormat, `attestation provider "aws" is not served`},
		{"an unsupported version", join(csrPEM, provider, block(attestation.BlockData, evidenceJSON(t, "version", "signet.tpm/v9"))), attestation.CheckVersion,
			`version "signet.tpm/v9" is not supported; supported: ` + attestation.VersionV1},
		{"no version", join(csrPEM, provider, block(attestation.BlockData, evidenceJSON(t, "version", nil))), attestation.CheckVersion, "has no version; supported: " + attestation.VersionV1},
		{"an unknown field", join(csrPEM, provider, block(attestation.BlockData, evidenceJSON(t, "bootLog", "x"))), attestation.CheckFormat, `unknown field "bootLog"`},
		{"a missing field", join(csrPEM, provider, block(attestation.BlockData, evidenceJSON(t, "certifyInfo", nil))), attestation.CheckFormat, "has no certifyInfo"},
		{"not JSON", join(csrPEM, provider, block(attestation.BlockData, []byte("{"))), attestation.CheckFormat, "not a JSON object"},
		{"trailing JSON", join(csrPEM, provider, block(attestation.BlockData, append(evidenceJSON(t, "", nil), []byte("{}")...))), attestation.CheckFormat, ""},
		{"oversized data", join(csrPEM, provider, block(attestation.BlockData, bytes.Repeat([]byte(" "), attestation.MaxEvidenceBytes+1))), attestation.CheckFormat, "more than the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			att, err := attestation.Split(tc.in)
			if got := attestation.FailedCheck(err); got != tc.check {
				t.Fatalf("Split: %v; want check %q", err, tc.check)
			}
			if tc.check == "" {
				if !bytes.Equal(att.Request, csrPEM) {
					t.Fatalf("request block = %q, want the request", att.Request)
				}
				return
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Split: %v; want it to say %q", err, tc.says)
			}
		})
	}
}

func TestProviderID(t *testing.T) {
	for _, id := range []string{"aws:///us-east-1a/i-0123", "signet://lab/node-a"} {
		csr, _ := kubeletCSR(t, "node-a", id)
		if got, err := attestation.ProviderID(csr); err != nil || got != id {
			t.Fatalf("ProviderID = %q, %v; want %q", got, err, id)
		}
	}
	for _, bad := range []string{"tab\there", strings.Repeat("x", attestation.MaxProviderIDLength+1)} {
		csr, _ := kubeletCSR(t, "node-a", bad)
		if _, err := attestation.ProviderID(csr); attestation.FailedCheck(err) != attestation.CheckProviderID {
			t.Fatalf("ProviderID(%q) = %v; want a provider ID refusal", bad, err)
		}
	}
}
