package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/rotation"
)

// loadedSigner is one generation of a signer: what the service uses, the CAs (and their keys)
// to close when the generation is retired, and the digest of the files it came from.
type loadedSigner struct {
	signer    *decision.Signer
	policy    policy
	authority *authority.Authority
	digest    [sha256.Size]byte
	lints     int // number of lints in force, 0 when the gate is off
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
		if pol.gate, err = lint.New(prof.LintOptions(lintOptions(lintCfg))); err != nil {
			return policy{}, fmt.Errorf("signer %s: lint: %w", sc.Name, err)
		}
	}
	return pol, nil
}

// openSigners resolves each signer's CA set (the configured CAs, or the recorded set
// reconciled with them) and opens its keys and issuer, in the configuration's order. The plans
// are for adoptSigners.
func (s *Server) openSigners(ctx context.Context, configured []configuredSigner) ([]rotation.Plan, error) {
	plans := make([]rotation.Plan, len(configured))
	for i, sc := range s.cfg.Signers {
		c := configured[i]
		plans[i] = s.rotation.Resolve(sc.Name, rotationConfig(sc), c.specs)
		ls, err := loadSigner(ctx, sc.Name, plans[i].Set, c.policy, s.keyOptions(sc.Name), c.digest)
		if err != nil {
			return nil, err
		}
		s.signers = append(s.signers, ls)
	}
	return plans, nil
}

// adoptSigners records the plans' changes (rotation.Manager.Adopt), once the ledger is open,
// and reports each signer.
func (s *Server) adoptSigners(ctx context.Context, plans []rotation.Plan) error {
	for i, sc := range s.cfg.Signers {
		ls := s.signers[i]
		if err := s.rotation.Adopt(ctx, plans[i]); err != nil {
			return fmt.Errorf("signer %s: %w", sc.Name, err)
		}
		s.metrics.SetCAExpiry(sc.Name, ls.signer.Issuer.CACertificate().NotAfter)
		if ls.policy.profile.Insecure() {
			s.metrics.SetInsecure(sc.Name)
			s.log.Warn("INSECURE signer: it signs kubelet client certificates for any node name its approver approves, with no proof of the node's identity (profile kubelet-client-insecure)",
				"signer", sc.Name)
		}
		s.log.Info("signer loaded", "signer", sc.Name, "profile", sc.Profile.Name, "ca_subject", ls.signer.Issuer.CACertificate().Subject.String(),
			"max_lifetime", maxLifetime(sc).String(), "lints", ls.lints, "cas", len(plans[i].Set.Specs()))
	}
	return nil
}

// CheckPolicies builds the lint gate of every signer as a start does (newPolicy), and returns
// each problem under its field: signers[i].lint, or lint for the top-level section the signer
// uses (reported once). It reads no file and opens no key. signet-server --validate-config runs
// it next to server/configcheck, which does not carry the lint gate (zlint). A profile that
// does not build is config.Validate's to report.
func CheckPolicies(cfg *config.Config) []error {
	var errs []error
	seen := map[string]bool{}
	for i, sc := range cfg.Signers {
		prof, err := profile.New(sc.Profile, maxLifetime(sc))
		if err != nil {
			continue
		}
		field, lc := "lint", cfg.Lint
		if sc.Lint != nil {
			field, lc = fmt.Sprintf("signers[%d].lint", i), *sc.Lint
		}
		if lc.Disabled {
			continue
		}
		if _, err := lint.New(prof.LintOptions(lintOptions(lc))); err != nil {
			if e := fmt.Errorf("%s: %w", field, err); !seen[e.Error()] {
				seen[e.Error()] = true
				errs = append(errs, e)
			}
		}
	}
	return errs
}

// lintOptions are the lint gate's options of a configured lint section.
func lintOptions(l config.Lint) lint.Options {
	return lint.Options{Sources: l.Sources, Exclude: l.Exclude, ReplaceDefaultExclusions: l.ReplaceDefaultExclusions}
}

// configuredSigner is what a signer's configuration and its files define: its policy, the
// digest of its files and its CAs' certificates.
type configuredSigner struct {
	policy policy
	digest [sha256.Size]byte
	specs  []authority.CASpec
}

// configureSigners builds the policy and reads the CA certificates of every signer, in order.
// Errors name the signer.
func configureSigners(signers []config.Signer, defaultLint config.Lint) ([]configuredSigner, error) {
	out := make([]configuredSigner, len(signers))
	for i, sc := range signers {
		pol, err := newPolicy(sc, defaultLint)
		if err != nil {
			return nil, err
		}
		digest, specs, err := signerCAs(sc)
		if err != nil {
			return nil, err
		}
		out[i] = configuredSigner{policy: pol, digest: digest, specs: specs}
	}
	return out, nil
}

// signerFiles are the files whose contents define a signer generation. A key URI that is
// not a file (pkcs11:, tpm:) is not watched: its certificate changes when the key does.
func signerFiles(sc config.Signer) []string {
	var files []string
	for _, ca := range sc.Authorities() {
		files = append(files, ca.Certificate, ca.Intermediates)
		if path, ok := keystore.FilePath(ca.Key); ok && ca.Key != "" {
			files = append(files, path)
		}
	}
	return files
}

// loadSigner opens the CAs of set (the signer's, from its configuration and its recorded
// rotations) and builds its issuer, with the active CA, under pol. digest is that of the
// signer's configured files. Errors name the signer and the CA that is wrong.
func loadSigner(ctx context.Context, name string, set authority.Set, pol policy, keys keystore.Options, digest [sha256.Size]byte) (*loadedSigner, error) {
	auth, err := authority.Open(ctx, set.Specs(), keys)
	if err != nil {
		return nil, fmt.Errorf("signer %s: %w", name, err)
	}
	issuer, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: name,
		CA:         auth.Active().Issuing(),
		Policy:     pol.profile,
		Lint:       pol.gate,
	})
	if err != nil {
		_ = auth.Close()
		return nil, fmt.Errorf("signer %s (active CA key %s): %w", name, keystore.Redact(auth.Active().KeyURI), err)
	}
	var anchors []authority.Entry
	for _, st := range []authority.State{authority.Active, authority.Staged, authority.Retired} {
		anchors = append(anchors, set.InState(st)...)
	}
	ls := &loadedSigner{
		signer:    &decision.Signer{Issuer: issuer, Profile: pol.profile, Lint: pol.gate, TrustBundle: auth.Bundle(), Anchors: anchors},
		policy:    pol,
		authority: auth,
		digest:    digest,
	}
	if pol.gate != nil {
		ls.lints = len(pol.gate.Lints())
	}
	return ls, nil
}

// signerCAs reads the digest and the CAs of the signer's configured files.
func signerCAs(sc config.Signer) ([sha256.Size]byte, []authority.CASpec, error) {
	digest, err := filereload.Digest(signerFiles(sc)...)
	if err != nil {
		return digest, nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	specs, err := caSpecs(sc)
	if err != nil {
		return digest, nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	return digest, specs, nil
}

// rotationConfig is the signer's rotation configuration.
func rotationConfig(sc config.Signer) rotation.Config {
	return rotation.Config{Clusters: sc.Rotation.Clusters, MinPropagationDelay: sc.Rotation.PropagationDelay()}
}

// caSpecs reads the certificate files of the signer's CAs.
func caSpecs(sc config.Signer) ([]authority.CASpec, error) {
	var specs []authority.CASpec
	for i, ca := range sc.Authorities() {
		state, err := authority.ParseState(ca.State)
		if err != nil {
			return nil, err
		}
		certs, err := filereload.ReadCertificates(ca.Certificate)
		if err != nil {
			return nil, err
		}
		if len(certs) != 1 {
			return nil, fmt.Errorf("%s holds %d certificates, want exactly the CA's (put the chain in intermediates)", ca.Certificate, len(certs))
		}
		spec := authority.CASpec{State: state, KeyURI: ca.Key, Certificate: certs[0], Source: ca.Certificate, Field: fmt.Sprintf("cas[%d]", i)}
		if len(sc.CAs) == 0 {
			spec.Field = "key/certificate"
		}
		if ca.Intermediates != "" {
			if spec.Intermediates, err = filereload.ReadCertificates(ca.Intermediates); err != nil {
				return nil, err
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// maxLifetime is the signer's maximum lifetime, or the default when the configuration was
// built without Default.
func maxLifetime(sc config.Signer) time.Duration {
	if sc.MaxLifetime == nil {
		return config.DefaultMaxLifetime
	}
	return sc.MaxLifetime.Duration
}
