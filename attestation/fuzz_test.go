package attestation_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/signet-pki/signet/attestation"
)

// payloadOf returns a ticket's payload, from its sealed form.
func payloadOf(t testing.TB, tk attestation.Ticket) []byte {
	s := strings.TrimPrefix(tk.Seal([]byte("k")), "st1.")
	p, err := base64.RawURLEncoding.DecodeString(s[:strings.Index(s, ".")])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzSplit feeds arbitrary requests to the attestation block parser: it must never panic,
// and what it accepts must re-encode to something it accepts with the same evidence.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMA==\n-----END CERTIFICATE REQUEST-----\n" +
		"-----BEGIN KUBELET AUTHENTICATOR ATTESTATION PROVIDER-----\ndHBt\n-----END KUBELET AUTHENTICATOR ATTESTATION PROVIDER-----\n" +
		"-----BEGIN KUBELET AUTHENTICATOR ATTESTATION DATA-----\neyJ2ZXJzaW9uIjoic2lnbmV0LnRwbS92MSJ9\n-----END KUBELET AUTHENTICATOR ATTESTATION DATA-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----"))
	f.Fuzz(func(t *testing.T, data []byte) {
		att, err := attestation.Split(data)
		if err != nil {
			if attestation.FailedCheck(err) == "" {
				t.Fatalf("Split: %v is not a Failure", err)
			}
			return
		}
		again, err := attestation.Encode(att.Request, att.Evidence)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := attestation.Split(again); err != nil {
			t.Fatalf("Split(Encode(Split(x))) = %v", err)
		}
	})
}

// FuzzParseEvidence feeds arbitrary attestation data to ParseEvidence and, when it parses,
// to Verify: neither may panic, and Verify must refuse (no ticket key can open it).
func FuzzParseEvidence(f *testing.F) {
	f.Add([]byte(`{"version":"signet.tpm/v1","ekPublic":"AAE=","akPublic":"AAE=","ticket":"st1.a.b","keyPublic":"AAE=","certifyInfo":"AAE=","certifySignature":"AAE=","bindingSignature":"AAE="}`))
	f.Add([]byte(`{"version":"signet.tpm/v2"}`))
	csr, _ := kubeletCSR(&testing.T{}, "node-a", "p")
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := attestation.ParseEvidence(data)
		if err != nil {
			return
		}
		if _, err := attestation.Verify(&attestation.Attested{Evidence: *ev}, csr, attestation.VerifyOptions{Node: "node-a", Now: now}); err == nil {
			t.Fatal("Verify accepted fuzzed evidence")
		}
	})
}

// FuzzDecodeTicket feeds arbitrary payloads to the ticket decoder: no panic, and what decodes
// encodes back to the same bytes.
func FuzzDecodeTicket(f *testing.F) {
	f.Add(payloadOf(f, testTicket()))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, payload []byte) {
		tk, err := attestation.DecodeTicket(payload)
		if err != nil {
			return
		}
		if got := payloadOf(t, tk); string(got) != string(payload) {
			t.Fatalf("DecodeTicket(%x) re-encodes to %x", payload, got)
		}
	})
}
