package attestation

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// storedKeys is Keys as a fleet's database keeps them between a challenge and its
// activation, which another server may answer.
type storedKeys struct {
	EKPublic []byte `json:"ekPublic"`
	AKPublic []byte `json:"akPublic"`
	EKTrust  string `json:"ekTrust"`
}

// MarshalBinary encodes the keys (their TPMT_PUBLIC encodings and why the EK is trusted),
// for UnmarshalKeys.
func (k *Keys) MarshalBinary() ([]byte, error) {
	if k == nil || k.ek == nil || k.ak == nil {
		return nil, fmt.Errorf("encoding attestation keys: not keys CheckKeys returned")
	}
	return json.Marshal(storedKeys{EKPublic: k.ek.raw, AKPublic: k.ak.raw, EKTrust: k.EKTrust})
}

// UnmarshalKeys decodes keys MarshalBinary encoded, checking both keys again as CheckKeys
// does, but not the EK's trust: that was decided when the challenge was made, and is carried.
func UnmarshalKeys(data []byte) (*Keys, error) {
	var s storedKeys
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding attestation keys: %w", err)
	}
	ek, sum, err := checkEK(s.EKPublic)
	if err != nil {
		return nil, err
	}
	k := &Keys{ek: ek, ekSum: sum, EK: hex.EncodeToString(sum[:]), EKTrust: s.EKTrust}
	if k.ak, err = checkAK(s.AKPublic); err != nil {
		return nil, err
	}
	k.AKName = hex.EncodeToString(k.ak.name)
	return k, nil
}
