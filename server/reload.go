package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/config"
)

// keyRetireGrace is how long a replaced key stays open for calls that started before the
// swap.
const keyRetireGrace = time.Minute

// reloadLoop checks the TLS and CA files every cfg.ReloadInterval until ctx ends.
func (s *Server) reloadLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReloadInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Reload(ctx)
		}
	}
}

// Reload re-reads the TLS files and every signer's files and swaps in whatever changed and
// loads cleanly. A file that fails to load leaves the previous generation serving and is
// logged with the reason. Calls in flight finish with the generation they started with; a
// replaced key is closed after keyRetireGrace.
func (s *Server) Reload(ctx context.Context) {
	if changed, err := s.tls.reload(); err != nil {
		s.log.Error("reloading TLS files; keeping the previous ones", "error", err.Error())
	} else if changed {
		s.log.Info("TLS files reloaded", "cert_file", s.cfg.TLS.CertFile, "client_ca_file", s.cfg.TLS.ClientCAFile)
	}
	defer s.rotation.Exclusive()()
	s.mu.Lock()
	defer s.mu.Unlock()
	var retired []*loadedSigner
	for i, sc := range s.cfg.Signers {
		digest, err := filereload.Digest(signerFiles(sc)...)
		if err != nil {
			s.log.Error("reloading signer; keeping the previous CA", "signer", sc.Name, "error", err.Error())
			continue
		}
		if digest == s.signers[i].digest {
			continue
		}
		_, specs, err := signerCAs(sc)
		if err != nil {
			s.log.Error("reloading signer; keeping the previous CA", "signer", sc.Name, "error", err.Error())
			continue
		}
		plan := s.rotation.Resolve(sc.Name, rotationConfig(sc), specs)
		ls, err := loadSigner(ctx, sc.Name, plan.Set, s.signers[i].policy, s.keyOptions(sc.Name), digest)
		if err != nil {
			s.log.Error("reloading signer; keeping the previous CA", "signer", sc.Name, "error", err.Error())
			continue
		}
		if err := s.rotation.Adopt(ctx, plan); err != nil {
			_ = ls.authority.Close()
			s.log.Error("reloading signer; keeping the previous CA", "signer", sc.Name, "error", err.Error())
			continue
		}
		retired = append(retired, s.signers[i])
		s.metrics.SetCAExpiry(sc.Name, ls.signer.Issuer.CACertificate().NotAfter)
		s.signers[i] = ls
		s.log.Info("signer reloaded", "signer", sc.Name, "ca_subject", ls.signer.Issuer.CACertificate().Subject.String())
	}
	if len(retired) == 0 {
		return
	}
	s.core.SetSigners(s.currentSigners())
	time.AfterFunc(keyRetireGrace, func() {
		for _, ls := range retired {
			_ = ls.authority.Close()
		}
	})
}

// installer swaps in the CA sets of the rotation steps (rotation.Installer).
type installer struct{ s *Server }

// Prepare opens set's CAs for signer with its policy; commit serves them and closes the
// previous generation's keys after keyRetireGrace, abort closes them. The caller holds the
// rotation lock, so no reload runs in between.
func (in installer) Prepare(ctx context.Context, signer string, set authority.Set) (commit, abort func(), err error) {
	s := in.s
	s.mu.Lock()
	i := slices.IndexFunc(s.cfg.Signers, func(sc config.Signer) bool { return sc.Name == signer })
	if i < 0 || i >= len(s.signers) {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("signer %s is not served", signer)
	}
	prev := s.signers[i]
	s.mu.Unlock()
	ls, err := loadSigner(ctx, signer, set, prev.policy, s.keyOptions(signer), prev.digest)
	if err != nil {
		return nil, nil, err
	}
	commit = func() {
		s.mu.Lock()
		old := s.signers[i]
		s.signers[i] = ls
		s.core.SetSigners(s.currentSigners())
		s.metrics.SetCAExpiry(signer, ls.signer.Issuer.CACertificate().NotAfter)
		s.mu.Unlock()
		time.AfterFunc(keyRetireGrace, func() { _ = old.authority.Close() })
	}
	return commit, func() { _ = ls.authority.Close() }, nil
}
