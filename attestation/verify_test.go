package attestation_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
)

func TestVerifyAcceptsEvidenceFromTheTPM(t *testing.T) {
	node := nodetpm.New(sim)
	s := newServer(t, node)
	csr, full, act := attest(t, s, node, "node-a")
	id, err := verify(full, csr, s.opts("node-a"))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	keys, _ := node.Keys()
	fp, _ := attestation.EKFingerprint(keys.EKPublic)
	if id.Node != "node-a" || id.EK != fp || id.EKTrust != "allow-list" || id.ProviderID != "signet://test/node-a" || id.Ticket == "" || !id.TicketExpires.Equal(act.Expires) {
		t.Fatalf("identity = %+v", id)
	}
}

// TestVerifyRefuses changes one thing in honest evidence at a time and checks that Verify
// refuses it with the check that should catch it.
func TestVerifyRefuses(t *testing.T) {
	node := nodetpm.New(sim)
	s := newServer(t, node)
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// run returns the evidence and options to verify.
		run  func(t *testing.T) ([]byte, attestationInput)
		want attestation.Check
	}{
		{"an EK neither certified nor allowed", func(t *testing.T) ([]byte, attestationInput) {
			csr, full, _ := attest(t, s, node, "node-a")
			o := s.opts("node-a")
			o.Trust = attestation.Trust{AllowedEKs: map[string]bool{strings.Repeat("0", 64): true}}
			return full, attestationInput{csr, o}
		}, attestation.CheckEKTrust},
		{"node A's ticket asking for node B", func(t *testing.T) ([]byte, attestationInput) {
			csr, full, _ := attest(t, s, node, "node-a")
			return full, attestationInput{csr, s.opts("node-b")}
		}, attestation.CheckTicketNode},
		{"an expired ticket", func(t *testing.T) ([]byte, attestationInput) {
			csr, full, _ := attest(t, s, node, "node-a")
			o := s.opts("node-a")
			o.Now = now.Add(5 * time.Minute)
			return full, attestationInput{csr, o}
		}, attestation.CheckTicketExpiry},
		{"a ticket from another server (or before a restart)", func(t *testing.T) ([]byte, attestationInput) {
			csr, full, _ := attest(t, s, node, "node-a")
			o := s.opts("node-a")
			o.TicketKey = []byte("another server's ticket key.....")
			return full, attestationInput{csr, o}
		}, attestation.CheckTicket},
		{"a wrong nonce", func(t *testing.T) ([]byte, attestationInput) {
			act := s.exchange(t, node, keys, "node-a")
			csr, csrPEM := kubeletCSR(t, "node-a", "p")
			c, err := node.Certify([]byte("a nonce the server never issued"), spki(t, csr))
			if err != nil {
				t.Fatal(err)
			}
			return encode(t, csrPEM, nodetpm.Evidence(keys, act.Ticket, c)), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckNonce},
		{"evidence made for another request's key", func(t *testing.T) ([]byte, attestationInput) {
			_, full, _ := attest(t, s, node, "node-a")
			other, otherPEM := kubeletCSR(t, "node-a", "p")
			att, err := attestation.Split(full)
			if err != nil {
				t.Fatal(err)
			}
			return encode(t, otherPEM, att.Evidence), attestationInput{other, s.opts("node-a")}
		}, attestation.CheckBinding},
		{"an AK other than the ticket's", func(t *testing.T) ([]byte, attestationInput) {
			csr, full, _ := attest(t, s, node, "node-a")
			att, _ := attestation.Split(full)
			att.Evidence.AKPublic = otherAK(t).OutPublic.Bytes()
			return encodeAtt(t, csr, att), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckTicketKeys},
		{"a binding key not certified by the AK", func(t *testing.T) ([]byte, attestationInput) {
			act := s.exchange(t, node, keys, "node-a")
			csr, csrPEM := kubeletCSR(t, "node-a", "p")
			ak := otherAK(t)
			defer flush(ak.ObjectHandle)
			key := primary(t, nodetpm.BindingKeyTemplate)
			defer flush(key.ObjectHandle)
			c, err := nodetpm.CertifyWith(sim, handle(ak), handle(key), key.OutPublic.Bytes(), act.Nonce, spki(t, csr))
			if err != nil {
				t.Fatal(err)
			}
			return encode(t, csrPEM, nodetpm.Evidence(keys, act.Ticket, c)), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckCertifySig},
		{"a binding key loaded from outside the TPM (TPM2_LoadExternal)", func(t *testing.T) ([]byte, attestationInput) {
			act := s.exchange(t, node, keys, "node-a")
			csr, csrPEM := kubeletCSR(t, "node-a", "p")
			c := certifyExternal(t, act.Nonce, spki(t, csr), false)
			return encode(t, csrPEM, nodetpm.Evidence(keys, act.Ticket, c)), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckKey},
		{"an external key passed off as fixedTPM", func(t *testing.T) ([]byte, attestationInput) {
			act := s.exchange(t, node, keys, "node-a")
			csr, csrPEM := kubeletCSR(t, "node-a", "p")
			c := certifyExternal(t, act.Nonce, spki(t, csr), true)
			return encode(t, csrPEM, nodetpm.Evidence(keys, act.Ticket, c)), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckCertify},
		{"no provider ID", func(t *testing.T) ([]byte, attestationInput) {
			act := s.exchange(t, node, keys, "node-a")
			csr, csrPEM := kubeletCSR(t, "node-a", "")
			c, err := node.Certify(act.Nonce, spki(t, csr))
			if err != nil {
				t.Fatal(err)
			}
			return encode(t, csrPEM, nodetpm.Evidence(keys, act.Ticket, c)), attestationInput{csr, s.opts("node-a")}
		}, attestation.CheckProviderID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, in := tc.run(t)
			_, err := verify(full, in.csr, in.opts)
			if got := attestation.FailedCheck(err); got != tc.want {
				t.Fatalf("Verify: %v; want a refusal by the %q check", err, tc.want)
			}
			if !errors.Is(err, attestation.ErrRefused) {
				t.Fatalf("Verify: %v does not wrap ErrRefused", err)
			}
		})
	}
}

// certifyExternal loads a software key into the TPM with TPM2_LoadExternal, has the node's
// AK certify it with nonce and has it sign the binding digest: what GKE's plugin did. With
// claimFixed, the public area sent claims fixedTPM and fixedParent, which the loaded key
// cannot have.
func certifyExternal(t *testing.T, nonce, spki []byte, claimFixed bool) *nodetpm.Certified {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := nodetpm.BindingKeyTemplate
	pub.ObjectAttributes.FixedTPM, pub.ObjectAttributes.FixedParent, pub.ObjectAttributes.SensitiveDataOrigin = false, false, false
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: priv.X.FillBytes(make([]byte, 32))},
		Y: tpm2.TPM2BECCParameter{Buffer: priv.Y.FillBytes(make([]byte, 32))},
	})
	sens := tpm2.TPMTSensitive{SensitiveType: tpm2.TPMAlgECC,
		Sensitive: tpm2.NewTPMUSensitiveComposite(tpm2.TPMAlgECC, &tpm2.TPM2BECCParameter{Buffer: priv.D.FillBytes(make([]byte, 32))})}
	loaded, err := tpm2.LoadExternal{InPublic: tpm2.New2B(pub), InPrivate: tpm2.New2B(sens), Hierarchy: tpm2.TPMRHNull}.Execute(sim)
	if err != nil {
		t.Fatalf("LoadExternal: %v", err)
	}
	defer flush(loaded.ObjectHandle)
	ak := primary(t, nodetpm.AKTemplate)
	defer flush(ak.ObjectHandle)
	c, err := nodetpm.CertifyWith(sim, handle(ak), tpm2.AuthHandle{Handle: loaded.ObjectHandle, Name: loaded.Name, Auth: tpm2.PasswordAuth(nil)},
		tpm2.Marshal(pub), nonce, spki)
	if err != nil {
		t.Fatal(err)
	}
	if claimFixed {
		pub.ObjectAttributes.FixedTPM, pub.ObjectAttributes.FixedParent, pub.ObjectAttributes.SensitiveDataOrigin = true, true, true
		c.KeyPublic = tpm2.Marshal(pub)
	}
	return c
}

// otherAK creates an AK that is not the node's: the same attributes, another unique value,
// as an AK of another TPM would be.
func otherAK(t *testing.T) *tpm2.CreatePrimaryResponse {
	t.Helper()
	tmpl := nodetpm.AKTemplate
	tmpl.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{X: tpm2.TPM2BECCParameter{Buffer: []byte("another attestation key")}})
	return primary(t, tmpl)
}

func primary(t *testing.T, tmpl tpm2.TPMTPublic) *tpm2.CreatePrimaryResponse {
	t.Helper()
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tmpl)}.Execute(sim)
	if err != nil {
		t.Fatal(err)
	}
	return rsp
}

func handle(rsp *tpm2.CreatePrimaryResponse) tpm2.AuthHandle {
	return tpm2.AuthHandle{Handle: rsp.ObjectHandle, Name: rsp.Name, Auth: tpm2.PasswordAuth(nil)}
}

func flush(h tpm2.TPMHandle) { _, _ = tpm2.FlushContext{FlushHandle: h}.Execute(sim) }
