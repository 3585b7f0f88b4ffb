package configcheck

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/server/config"
)

// LoadTrust reads the EK roots and the allow-list. Certificates in the roots file that are
// self-signed are roots; the others help build chains.
func LoadTrust(ac config.Attestation) (attestation.Trust, error) {
	var trust attestation.Trust
	if ac.EKRootsFile != "" {
		certs, err := filereload.ReadCertificates(ac.EKRootsFile)
		if err != nil {
			return trust, fmt.Errorf("attestation.ekRootsFile: %w", err)
		}
		trust.Roots, trust.Intermediates = x509.NewCertPool(), x509.NewCertPool()
		for _, c := range certs {
			if bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil {
				trust.Roots.AddCert(c)
			} else {
				trust.Intermediates.AddCert(c)
			}
		}
	}
	if ac.EKAllowListFile != "" {
		allowed, err := readAllowList(ac.EKAllowListFile)
		if err != nil {
			return trust, fmt.Errorf("attestation.ekAllowListFile: %w", err)
		}
		trust.AllowedEKs = allowed
	}
	return trust, nil
}

// LoadBootPolicy reads the boot-state policy's reference file; nil without a policy.
func LoadBootPolicy(b *config.BootState) (*attestation.BootPolicy, error) {
	if b == nil {
		return nil, nil
	}
	data, err := os.ReadFile(b.ReferenceFile)
	if err != nil {
		return nil, fmt.Errorf("attestation.bootState.referenceFile: %w", err)
	}
	var file struct {
		References []struct {
			Name string            `json:"name"`
			PCRs map[string]string `json:"pcrs"`
		} `json:"references"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("attestation.bootState.referenceFile %s: %w", b.ReferenceFile, err)
	}
	p := &attestation.BootPolicy{PCRs: b.PCRs}
	for i, r := range file.References {
		ref := attestation.BootReference{Name: r.Name, PCRs: map[int][]byte{}}
		for k, v := range r.PCRs {
			idx, err := strconv.Atoi(k)
			d, herr := hex.DecodeString(strings.TrimSpace(v))
			if err != nil || herr != nil {
				return nil, fmt.Errorf("attestation.bootState.referenceFile %s: references[%d].pcrs[%q]: want a PCR index and 64 hex digits", b.ReferenceFile, i, k)
			}
			ref.PCRs[idx] = d
		}
		p.References = append(p.References, ref)
	}
	if err := attestation.CheckBootPolicy(*p); err != nil {
		return nil, fmt.Errorf("attestation.bootState (%s): %w", b.ReferenceFile, err)
	}
	return p, nil
}

// readAllowList reads EK fingerprints, one per line: 64 hex digits, "#" starts a comment.
func readAllowList(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.ToLower(strings.TrimSpace(line))
		if line == "" {
			continue
		}
		if b, err := hex.DecodeString(line); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("%s:%d: %q is not an endorsement key fingerprint (64 hex digits: the SHA-256 of the key's PKIX DER)", path, n, line)
		}
		allowed[line] = true
	}
	return allowed, sc.Err()
}
