package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/time/rate"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/internal/httpserver"
	"github.com/signet-pki/signet/server/attest"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/metrics"
)

// newAttestation builds the attestation service when the configuration turns it on, before
// the ledger is opened, so that the EK-to-node bindings are rebuilt from its records.
func (s *Server) newAttestation() error {
	ac := s.cfg.Attestation
	if !ac.Enabled() {
		return nil
	}
	trust, err := loadTrust(ac)
	if err != nil {
		return err
	}
	boot, err := loadBootPolicy(ac.BootState)
	if err != nil {
		return err
	}
	challengeTTL, ticketTTL := ac.TTLs()
	s.attest, err = attest.New(attest.Options{Trust: trust, Boot: boot, ChallengeTTL: challengeTTL, TicketTTL: ticketTTL, Log: s.log})
	if err != nil {
		return err
	}
	s.log.Info("TPM attestation on", "address", ac.Address, "ek_roots", ac.EKRootsFile, "ek_allow_list", ac.EKAllowListFile,
		"allowed_eks", len(trust.AllowedEKs))
	return nil
}

// buildAttestationEndpoint listens for the challenge endpoint, served with the server's
// certificate and no client certificate, behind the panic guard.
func (s *Server) buildAttestationEndpoint() error {
	if s.attest == nil {
		return nil
	}
	ac := s.cfg.Attestation
	s.attestEndpoint = attest.NewEndpoint(s.attest, s.tls.serverOnlyConfig(),
		attest.Limits{PerSource: rate.Limit(ac.PerSourceRate), PerEK: rate.Limit(ac.PerEKRate)}, s.metrics.ObserveAttestation, s.log)
	s.attestEndpoint.Wrap(s.guard.HTTP(metrics.PanicMethodAttestation, httpserver.InternalError))
	var err error
	if s.attestLis, err = net.Listen("tcp", ac.Address); err != nil {
		return fmt.Errorf("listening on %s (attestation.address): %w", ac.Address, err)
	}
	return nil
}

// AttestationAddr is the address the attestation endpoint is served on, "" when it is off.
func (s *Server) AttestationAddr() string {
	if s.attestLis == nil {
		return ""
	}
	return s.attestLis.Addr().String()
}

// loadTrust reads the EK roots and the allow-list. Certificates in the roots file that are
// self-signed are roots; the others help build chains.
func loadTrust(ac config.Attestation) (attestation.Trust, error) {
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

// loadBootPolicy reads the boot-state policy's reference file; nil without a policy.
func loadBootPolicy(b *config.BootState) (*attestation.BootPolicy, error) {
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

// serverOnlyConfig is the attestation endpoint's TLS configuration: TLS 1.3 with the server
// certificate of the latest generation, and no client certificate asked for.
func (s *tlsSource) serverOnlyConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			m := s.material.Current()
			return &m.cert, nil
		},
	}
}
