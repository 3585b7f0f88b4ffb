package server

import (
	"context"
	"time"

	"github.com/signet-pki/signet/internal/filereload"
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
		ls, err := loadSigner(ctx, sc, s.signers[i].policy, s.keyOptions(sc.Name))
		if err != nil {
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
