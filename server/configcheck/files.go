package configcheck

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/server/config"
)

// Files checks what the configuration names on disk (see the package doc) and returns every
// problem, each starting with its field path, and the notes. It reads files only: it opens no
// device and creates nothing.
func Files(cfg *config.Config) (problems, notes []error) {
	c := &checker{keys: cfg.Keys}
	c.tls(cfg.TLS)
	for i, s := range cfg.Signers {
		c.signer(fmt.Sprintf("signers[%d]", i), s)
	}
	c.ledger(cfg.Ledger)
	c.attestation(cfg.Attestation)
	if cfg.State.Fleet() {
		c.readable("state.postgres.passwordFile", cfg.State.Postgres.PasswordFile)
	}
	return c.problems, c.notes
}

// checker collects the problems and notes of one configuration.
type checker struct {
	keys     config.Keys
	problems []error
	notes    []error
}

func (c *checker) fail(field string, format string, args ...any) {
	c.problems = append(c.problems, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

func (c *checker) note(field string, format string, args ...any) {
	c.notes = append(c.notes, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// readable checks that path is a readable regular file, reporting it under field when it is
// not; it returns whether it is.
func (c *checker) readable(field, path string) bool {
	if path == "" {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		c.fail(field, "%s", fileError(path, err))
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.fail(field, "%s", fileError(path, err))
		return false
	}
	if st.IsDir() {
		c.fail(field, "%s is a directory, want a file", path)
		return false
	}
	return true
}

// fileError says why path cannot be used, in words: does not exist, cannot be read.
func fileError(path string, err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("%s cannot be read by this user (permission denied)", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %v", path, pe.Err)
	}
	return err.Error()
}

// tls checks the server's certificate and key (a matching pair, as crypto/tls loads them) and
// the client CA file.
func (c *checker) tls(t config.TLS) {
	cert := c.readable("tls.certFile", t.CertFile)
	key := c.readable("tls.keyFile", t.KeyFile)
	if cert && key {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			c.fail("tls.keyFile", "%s and the certificate %s are not a TLS pair: %v", t.KeyFile, t.CertFile, err)
		}
	}
	if c.readable("tls.clientCAFile", t.ClientCAFile) {
		if _, err := filereload.ReadCertificates(t.ClientCAFile); err != nil {
			c.fail("tls.clientCAFile", "%v", err)
		}
	}
}

// signer checks the certificate, intermediates and key of each of the signer's CAs.
func (c *checker) signer(at string, s config.Signer) {
	for j, ca := range s.Authorities() {
		caAt := fmt.Sprintf("%s.cas[%d]", at, j)
		if len(s.CAs) == 0 {
			caAt = at
		}
		cert := c.caCertificate(caAt+".certificate", ca.Certificate)
		if ca.Intermediates != "" && c.readable(caAt+".intermediates", ca.Intermediates) {
			if _, err := filereload.ReadCertificates(ca.Intermediates); err != nil {
				c.fail(caAt+".intermediates", "%v", err)
			}
		}
		if ca.State == config.StateRetired || ca.Key == "" {
			continue // a retired CA's key is not opened
		}
		c.key(caAt+".key", ca.Key, cert, false)
	}
}

// caCertificate reads a CA certificate file: exactly one certificate, a CA's. It returns the
// certificate, nil when it is not usable.
func (c *checker) caCertificate(field, path string) *x509.Certificate {
	if !c.readable(field, path) {
		return nil
	}
	certs, err := filereload.ReadCertificates(path)
	switch {
	case err != nil:
		c.fail(field, "%v", err)
		return nil
	case len(certs) != 1:
		c.fail(field, "%s holds %d certificates, want exactly the CA's (put the chain in intermediates)", path, len(certs))
		return nil
	case !certs[0].BasicConstraintsValid || !certs[0].IsCA:
		c.fail(field, "%s is not a CA certificate (basic constraints CA:TRUE missing)", path)
		return nil
	}
	return certs[0]
}

// ledger checks the ledger directory (a directory when it exists; it is not created), the
// checkpoint key when one is configured, and the witnessed checkpoint file.
func (c *checker) ledger(l config.Ledger) {
	if l.Dir != "" {
		c.ledgerDir(l.Dir)
	}
	if l.Checkpoint.Key != "" {
		c.key("ledger.checkpoint.key", l.Checkpoint.Key, nil, true)
	}
	if l.Checkpoint.WitnessedFile != "" {
		c.readable("ledger.checkpoint.witnessedFile", l.Checkpoint.WitnessedFile)
	}
}

// ledgerDir checks that dir is a directory, or that the start can create it (no file stands
// where a folder on its path must be).
func (c *checker) ledgerDir(dir string) {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		c.fail("ledger.dir", "%s is not a directory", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		c.fail("ledger.dir", "%s cannot be created or used: %s", dir, fileError(dir, err))
	}
}

// attestation loads the trust and the boot-state policy as the server does.
func (c *checker) attestation(a config.Attestation) {
	if !a.Enabled() {
		return
	}
	if a.EKRootsFile != "" && c.readable("attestation.ekRootsFile", a.EKRootsFile) {
		if _, err := LoadTrust(config.Attestation{EKRootsFile: a.EKRootsFile}); err != nil {
			c.problems = append(c.problems, err)
		}
	}
	if a.EKAllowListFile != "" && c.readable("attestation.ekAllowListFile", a.EKAllowListFile) {
		if _, err := LoadTrust(config.Attestation{EKAllowListFile: a.EKAllowListFile}); err != nil {
			c.problems = append(c.problems, err)
		}
	}
	if a.TicketKeyFile != "" && c.readable("attestation.ticketKeyFile", a.TicketKeyFile) {
		if st, err := os.Stat(a.TicketKeyFile); err == nil && st.Size() < 32 {
			c.fail("attestation.ticketKeyFile", "%s holds %d bytes, fewer than 32: make it with head -c 32 /dev/urandom", a.TicketKeyFile, st.Size())
		}
	}
	if b := a.BootState; b != nil && b.ReferenceFile != "" && len(b.PCRs) > 0 && c.readable("attestation.bootState.referenceFile", b.ReferenceFile) {
		if _, err := LoadBootPolicy(b); err != nil {
			c.problems = append(c.problems, err)
		}
	}
}
