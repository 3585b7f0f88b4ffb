package attestation

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-tpm/tpm2"
)

// PCRValue is one PCR of the SHA-256 bank, as the node read it.
type PCRValue struct {
	Index  int    `json:"index"`
	Digest []byte `json:"digest"`
}

// BootPolicy is the optional boot-state policy: the node quotes these PCRs of the SHA-256
// bank with its AK and the ticket's nonce, and their values must equal one reference set.
// Exact PCR values change with every firmware, bootloader or kernel update: the reference
// sets must be updated with each roll-out (docs/attestation.md).
type BootPolicy struct {
	// PCRs are the PCR indices to quote, ascending, each 0–23.
	PCRs []int
	// References are the accepted sets of values; one must match every quoted PCR.
	References []BootReference
}

// BootReference is one accepted set of PCR values, named for the records.
type BootReference struct {
	Name string
	PCRs map[int][]byte
}

// maxPCR is the highest PCR index of a PC Client TPM.
const maxPCR = 23

// checkBootState checks the quote of ev under p (nil: no policy, nothing checked): signed by
// the AK, of type quote, made by a TPM, for the ticket's nonce, over exactly p's PCRs of the
// SHA-256 bank, whose digest is that of the values the node reported, and those values equal
// one of p's reference sets. It returns the name of the matching set.
func checkBootState(ev Evidence, ak *tpmPublic, nonce []byte, p *BootPolicy) (string, error) {
	if p == nil {
		return "", nil
	}
	if len(ev.Quote) == 0 {
		return "", refuse(CheckBootState, "the boot-state policy asks for a quote of PCRs %v; the node sent none", p.PCRs)
	}
	if err := verifySignature(ak.key, ev.Quote, ev.QuoteSignature); err != nil {
		return "", refuse(CheckBootState, "the AK did not sign the quote: %v", err)
	}
	info, err := quoteInfo(ev.Quote, nonce)
	if err != nil {
		return "", err
	}
	if got := quotedPCRs(info.PCRSelect); !slices.Equal(got, p.PCRs) {
		return "", refuse(CheckBootState, "the quote covers PCRs %v of the SHA-256 bank; the policy asks for %v", got, p.PCRs)
	}
	values, err := reportedValues(ev.PCRValues, p.PCRs)
	if err != nil {
		return "", err
	}
	d := sha256.New()
	for _, v := range values {
		d.Write(v)
	}
	if subtle.ConstantTimeCompare(d.Sum(nil), info.PCRDigest.Buffer) != 1 {
		return "", refuse(CheckBootState, "the PCR values the node reported are not the ones the TPM quoted")
	}
	for _, ref := range p.References {
		if matches(ref, p.PCRs, values) {
			return ref.Name, nil
		}
	}
	return "", refuse(CheckBootState, "the boot state matches none of the %d reference sets: %s", len(p.References), describePCRs(p.PCRs, values))
}

// quoteInfo decodes a quote made by a TPM for nonce.
func quoteInfo(quote, nonce []byte) (info *tpm2.TPMSQuoteInfo, err error) {
	defer func() {
		if r := recover(); r != nil {
			info, err = nil, refuse(CheckBootState, "the quote does not decode")
		}
	}()
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](quote)
	if err != nil {
		return nil, refuse(CheckBootState, "the quote does not decode: %v", err)
	}
	switch {
	case att.Magic != tpm2.TPMGeneratedValue:
		return nil, refuse(CheckBootState, "the quote was not made by a TPM")
	case att.Type != tpm2.TPMSTAttestQuote:
		return nil, refuse(CheckBootState, "the attestation is of type 0x%04x, not a quote", uint16(att.Type))
	case !bytes.Equal(tpm2.Marshal(att), quote):
		return nil, refuse(CheckBootState, "the quote has bytes after it")
	case subtle.ConstantTimeCompare(att.ExtraData.Buffer, nonce) != 1:
		return nil, refuse(CheckBootState, "the quote's qualifying data is not the ticket's nonce")
	}
	info, err = att.Attested.Quote()
	if err != nil {
		return nil, refuse(CheckBootState, "the attestation carries no quote")
	}
	return info, nil
}

// quotedPCRs are the PCR indices a selection holds in the SHA-256 bank, ascending; a
// selection of any other bank makes it nil.
func quotedPCRs(sel tpm2.TPMLPCRSelection) []int {
	var out []int
	for _, s := range sel.PCRSelections {
		if s.Hash != tpm2.TPMAlgSHA256 {
			return nil
		}
		for i, b := range s.PCRSelect {
			for bit := range 8 {
				if b&(1<<bit) != 0 {
					out = append(out, i*8+bit)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reportedValues are the node's PCR values for pcrs, in order: exactly those indices, each a
// SHA-256 digest.
func reportedValues(got []PCRValue, pcrs []int) ([][]byte, error) {
	if len(got) != len(pcrs) {
		return nil, refuse(CheckBootState, "the node reported %d PCR values; the policy quotes %d", len(got), len(pcrs))
	}
	values := make([][]byte, len(pcrs))
	for i, v := range got {
		if v.Index != pcrs[i] || len(v.Digest) != sha256.Size {
			return nil, refuse(CheckBootState, "PCR value %d is for PCR %d with %d bytes; want PCR %d with %d", i, v.Index, len(v.Digest), pcrs[i], sha256.Size)
		}
		values[i] = v.Digest
	}
	return values, nil
}

// matches reports whether ref holds exactly values for pcrs.
func matches(ref BootReference, pcrs []int, values [][]byte) bool {
	for i, idx := range pcrs {
		want, ok := ref.PCRs[idx]
		if !ok || !bytes.Equal(want, values[i]) {
			return false
		}
	}
	return true
}

// describePCRs lists PCR values as "PCR 0 = ab12…, PCR 7 = …" (8 hex digits each).
func describePCRs(pcrs []int, values [][]byte) string {
	parts := make([]string, len(pcrs))
	for i, idx := range pcrs {
		parts[i] = fmt.Sprintf("PCR %d = %s…", idx, hex.EncodeToString(values[i])[:8])
	}
	return strings.Join(parts, ", ")
}

// CheckBootPolicy validates a policy: PCRs ascending, distinct, 0–23, at least one; at least
// one reference, each named and giving a SHA-256 value for every PCR of the policy.
func CheckBootPolicy(p BootPolicy) error {
	if len(p.PCRs) == 0 {
		return fmt.Errorf("pcrs: at least one PCR is required")
	}
	for i, idx := range p.PCRs {
		if idx < 0 || idx > maxPCR || (i > 0 && idx <= p.PCRs[i-1]) {
			return fmt.Errorf("pcrs: %v must be distinct PCR indices from 0 to %d, ascending", p.PCRs, maxPCR)
		}
	}
	if len(p.References) == 0 {
		return fmt.Errorf("references: at least one reference set is required")
	}
	for i, ref := range p.References {
		if ref.Name == "" {
			return fmt.Errorf("references[%d]: a name is required", i)
		}
		for _, idx := range p.PCRs {
			if v, ok := ref.PCRs[idx]; !ok || len(v) != sha256.Size {
				return fmt.Errorf("references[%d] (%s): PCR %d needs a SHA-256 value (64 hex digits)", i, ref.Name, idx)
			}
		}
	}
	return nil
}
