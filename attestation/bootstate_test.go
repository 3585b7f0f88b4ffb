package attestation_test

import (
	"crypto/sha256"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
)

// pcrValues reads pcrs from the simulator.
func pcrValues(t *testing.T, pcrs []int) map[int][]byte {
	t.Helper()
	q, err := nodetpm.New(sim).Quote([]byte("n"), pcrs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]byte{}
	for _, v := range q.Values {
		out[v.Index] = v.Digest
	}
	return out
}

// TestBootState: with a boot-state policy, evidence carrying a quote of the policy's PCRs
// whose values are a reference set verifies and names the set; a boot state that matches no
// set, a missing quote, a quote over other PCRs, values that are not the quoted ones and a
// quote for another nonce are refused by the boot-state check.
func TestBootState(t *testing.T) {
	node := nodetpm.New(sim)
	s := newServer(t, node)
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	pcrs := []int{7, 16}
	// Put PCR 16 (resettable, for tests) in a known state.
	if _, err := (tpm2.PCRReset{PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(16), Auth: tpm2.PasswordAuth(nil)}}).Execute(sim); err != nil {
		t.Fatal(err)
	}
	m := sha256.Sum256([]byte("a measured bootloader"))
	if _, err := (tpm2.PCRExtend{PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(16), Auth: tpm2.PasswordAuth(nil)},
		Digests: tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: m[:]}}}}).Execute(sim); err != nil {
		t.Fatal(err)
	}
	good := pcrValues(t, pcrs)
	other := map[int][]byte{7: good[7], 16: make([]byte, 32)}
	policy := &attestation.BootPolicy{PCRs: pcrs, References: []attestation.BootReference{{Name: "old firmware", PCRs: other}, {Name: "fw-2026-11", PCRs: good}}}
	if err := attestation.CheckBootPolicy(*policy); err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, quotePCRs []int, nonce []byte, edit func(*attestation.Evidence)) ([]byte, attestationInput) {
		t.Helper()
		act := s.exchange(t, node, keys, "node-a")
		csr, csrPEM := kubeletCSR(t, "node-a", "p")
		c, err := node.Certify(act.Nonce, spki(t, csr))
		if err != nil {
			t.Fatal(err)
		}
		ev := nodetpm.Evidence(keys, act.Ticket, c)
		if quotePCRs != nil {
			if nonce == nil {
				nonce = act.Nonce
			}
			q, err := node.Quote(nonce, quotePCRs)
			if err != nil {
				t.Fatal(err)
			}
			ev = nodetpm.WithQuote(ev, q)
		}
		if edit != nil {
			edit(&ev)
		}
		o := s.opts("node-a")
		o.Boot = policy
		return encode(t, csrPEM, ev), attestationInput{csr, o}
	}
	full, in := build(t, pcrs, nil, nil)
	id, err := verify(full, in.csr, in.opts)
	if err != nil || id.BootState != "fw-2026-11" {
		t.Fatalf("Verify = %+v, %v; want the boot state fw-2026-11", id, err)
	}
	for name, tc := range map[string]struct {
		pcrs  []int
		nonce []byte
		edit  func(*attestation.Evidence)
	}{
		"no quote":            {nil, nil, nil},
		"other PCRs quoted":   {[]int{7}, nil, nil},
		"another nonce":       {pcrs, []byte("a nonce of another exchange"), nil},
		"values not quoted":   {pcrs, nil, func(ev *attestation.Evidence) { ev.PCRValues[1].Digest = make([]byte, 32) }},
		"unknown boot state":  {pcrs, nil, func(*attestation.Evidence) { policy.References = policy.References[:1] }},
		"signature by no one": {pcrs, nil, func(ev *attestation.Evidence) { ev.QuoteSignature = ev.CertifySignature }},
	} {
		t.Run(name, func(t *testing.T) {
			saved := policy.References
			defer func() { policy.References = saved }()
			full, in := build(t, tc.pcrs, tc.nonce, tc.edit)
			if _, err := verify(full, in.csr, in.opts); attestation.FailedCheck(err) != attestation.CheckBootState {
				t.Fatalf("Verify: %v; want a boot state refusal", err)
			}
		})
	}
	// Without a policy the boot state is not looked at.
	full, in = build(t, nil, nil, nil)
	in.opts.Boot = nil
	if _, err := verify(full, in.csr, in.opts); err != nil {
		t.Fatalf("Verify without a policy: %v", err)
	}
}
