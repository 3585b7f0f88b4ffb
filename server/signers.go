package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
)

// loadedSigner is one generation of a signer: what the service uses, the key to close when
// the generation is retired, and the digest of the files it came from.
type loadedSigner struct {
	signer *decision.Signer
	policy policy
	key    keystore.Key
	digest [sha256.Size]byte
	lints  int // number of lints in force, 0 when the gate is off
}

// policy is what a signer's configuration alone defines: its profile and its lint gate (nil
// when off). The configuration is read once, so a reloaded generation keeps its predecessor's
// policy, and the gate its pre-configured lint instances.
type policy struct {
	profile profile.Profile
	gate    *lint.Gate
}

// newPolicy builds the signer's profile and lint gate. Errors name the signer.
func newPolicy(sc config.Signer, defaultLint config.Lint) (policy, error) {
	prof, err := profile.New(sc.Profile, maxLifetime(sc))
	if err != nil {
		return policy{}, fmt.Errorf("signer %s: profile: %w", sc.Name, err)
	}
	lintCfg := defaultLint
	if sc.Lint != nil {
		lintCfg = *sc.Lint
	}
	pol := policy{profile: prof}
	if !lintCfg.Disabled {
		if pol.gate, err = lint.New(prof.LintOptions(lintCfg.Options)); err != nil {
			return policy{}, fmt.Errorf("signer %s: lint: %w", sc.Name, err)
		}
	}
	return pol, nil
}

// signerFiles are the files whose contents define a signer generation. A key URI that is
// not a file (pkcs11:, tpm:) is not watched: its certificate changes when the key does.
func signerFiles(sc config.Signer) []string {
	files := []string{sc.Certificate, sc.Intermediates}
	if path, ok := keystore.FilePath(sc.Key); ok {
		files = append(files, path)
	}
	return files
}

// loadSigner opens the signer's key and CA files and builds its issuer under pol. Errors name
// the signer and the file that is wrong.
func loadSigner(ctx context.Context, sc config.Signer, pol policy) (*loadedSigner, error) {
	digest, err := digestFiles(signerFiles(sc)...)
	if err != nil {
		return nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	certs, err := readCertificates(sc.Certificate)
	if err != nil {
		return nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("signer %s: %s holds %d certificates, want exactly the CA's (put the chain in intermediates)", sc.Name, sc.Certificate, len(certs))
	}
	ca := &issuance.CA{Certificate: certs[0]}
	if sc.Intermediates != "" {
		if ca.Intermediates, err = readCertificates(sc.Intermediates); err != nil {
			return nil, fmt.Errorf("signer %s: %w", sc.Name, err)
		}
	}
	key, err := keystore.Open(ctx, sc.Key)
	if err != nil {
		return nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	ca.Key = key
	issuer, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: sc.Name,
		CA:         ca,
		Policy:     pol.profile,
		Lint:       pol.gate,
	})
	if err != nil {
		_ = key.Close()
		return nil, fmt.Errorf("signer %s (key %s, certificate %s): %w", sc.Name, sc.Key, sc.Certificate, err)
	}
	ls := &loadedSigner{signer: &decision.Signer{Issuer: issuer, Profile: pol.profile, Lint: pol.gate}, policy: pol, key: key, digest: digest}
	if pol.gate != nil {
		ls.lints = len(pol.gate.Lints())
	}
	return ls, nil
}

// maxLifetime is the signer's maximum lifetime, or the default when the configuration was
// built without Default.
func maxLifetime(sc config.Signer) time.Duration {
	if sc.MaxLifetime == nil {
		return config.DefaultMaxLifetime
	}
	return sc.MaxLifetime.Duration
}

// readCertificates reads every CERTIFICATE block of a PEM file; there must be at least one.
func readCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading certificate file: %w", err)
	}
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate in %s: %w", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no CERTIFICATE block in %s", path)
	}
	return certs, nil
}
