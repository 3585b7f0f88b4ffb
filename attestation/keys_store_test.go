package attestation_test

import (
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
)

// TestKeysSurviveTheFleetsDatabase: keys stored between a challenge and its activation (which
// another server of a fleet may answer) come back whole: the same EK, AK name and trust, a
// challenge made from them that only this TPM can answer, and a ticket that binds this EK and
// AK. Keys whose stored EK and AK were swapped are refused as CheckKeys refuses them.
func TestKeysSurviveTheFleetsDatabase(t *testing.T) {
	node := nodetpm.New(sim)
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, node)
	k, err := attestation.CheckKeys(keys.EKCertificate, keys.EKPublic, keys.AKPublic, s.trust, now)
	if err != nil {
		t.Fatal(err)
	}
	data, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := attestation.UnmarshalKeys(data)
	if err != nil {
		t.Fatalf("UnmarshalKeys: %v", err)
	}
	if back.EK != k.EK || back.AKName != k.AKName || back.EKTrust != k.EKTrust {
		t.Fatalf("keys came back as %+v, want %+v", back, k)
	}
	secret, ch, err := attestation.MakeChallenge(rand.Reader, back)
	if err != nil {
		t.Fatal(err)
	}
	got, err := node.Activate(keys, ch)
	if err != nil || string(got) != string(secret) {
		t.Fatalf("the TPM did not answer a challenge made from the stored keys: %v", err)
	}
	a, b := mustTicket(t, k), mustTicket(t, back)
	if a.EK != b.EK || string(a.AKName) != string(b.AKName) {
		t.Fatal("a ticket from the stored keys binds another EK or AK")
	}

	var stored map[string]any
	_ = json.Unmarshal(data, &stored)
	stored["akPublic"], stored["ekPublic"] = stored["ekPublic"], stored["akPublic"]
	swapped, _ := json.Marshal(stored)
	if _, err := attestation.UnmarshalKeys(swapped); err == nil {
		t.Fatal("keys with the EK and AK swapped were accepted")
	}
	if _, err := attestation.UnmarshalKeys([]byte("{")); err == nil {
		t.Fatal("a truncated encoding was accepted")
	}
}

func mustTicket(t *testing.T, k *attestation.Keys) attestation.Ticket {
	t.Helper()
	tk, err := attestation.NewTicket(rand.Reader, k, "node-a", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
