package swtpm

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// manufactureTimeout bounds one swtpm_setup run: it makes RSA and ECC keys in the TPM and,
// at the CA's first use, the CA's two RSA keys with certtool.
const manufactureTimeout = 2 * time.Minute

// Files of a LocalCA's directory. The three configuration files are Signet's; the others are
// swtpm_localca's (it makes them at the first Manufacture).
const (
	setupConfFile    = "swtpm_setup.conf"
	localCAConfFile  = "swtpm-localca.conf"
	localCAOptsFile  = "swtpm-localca.options"
	rootCertFile     = "swtpm-localca-rootca-cert.pem"
	issuerCertFile   = "issuercert.pem"
	issuerKeyFile    = "signkey.pem"
	certSerialFile   = "certserial"
	ekCertFilePrefix = "ek-"
	ekCertFileSuffix = ".crt"
)

// LocalCA is a TPM manufacturer's certificate authority, as swtpm_localca keeps it: a root
// (CN=swtpm-localca-rootca) and an intermediate (CN=swtpm-localca) that signs the EK and
// platform certificates, with their keys, the serial number file and the configuration
// that swtpm_setup and swtpm_localca read, all in one directory of its own. Nothing of the
// system's swtpm configuration (/etc/swtpm_setup.conf, /etc/swtpm-localca.conf,
// /var/lib/swtpm-localca) or of the user's (~/.config) is read or written, so it works the
// same as root and as any user. Several TPMs may be manufactured by one LocalCA, at the same
// time: swtpm_localca locks its directory while it signs.
//
// It needs swtpm_setup and swtpm_localca (Debian: swtpm-tools) and certtool (gnutls-bin, a
// dependency of swtpm-tools), with which swtpm_localca makes the CA's keys.
type LocalCA struct {
	// Dir holds the CA's configuration, keys and certificates.
	Dir string
}

// NewLocalCA prepares a local CA in dir, which must exist: it writes the configuration files
// (swtpm_setup.conf, swtpm-localca.conf, swtpm-localca.options) that point swtpm_setup and
// swtpm_localca at dir. The CA's keys and certificates are made by swtpm_localca at the first
// Manufacture. dir must not hold white space, '#' or '$', which the configuration files
// cannot carry.
func NewLocalCA(dir string) (*LocalCA, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("preparing the local CA in %s: %w", dir, err)
	}
	if strings.ContainsAny(abs, " \t\r\n#$=") {
		return nil, fmt.Errorf("preparing the local CA in %q: the path holds white space, '#', '$' or '=', which swtpm's configuration files cannot carry", abs)
	}
	localca, err := exec.LookPath("swtpm_localca")
	if err != nil {
		return nil, fmt.Errorf("preparing the local CA: swtpm_localca is not installed (%w): run %s", err, InstallHint)
	}
	ca := &LocalCA{Dir: abs}
	files := map[string]string{
		setupConfFile: "# swtpm_setup's configuration for Signet's tests: the local CA in this directory.\n" +
			"create_certs_tool = " + localca + "\n" +
			"create_certs_tool_config = " + ca.path(localCAConfFile) + "\n" +
			"create_certs_tool_options = " + ca.path(localCAOptsFile) + "\n" +
			"active_pcr_banks = sha256\n",
		localCAConfFile: "statedir = " + abs + "\n" +
			"signingkey = " + ca.path(issuerKeyFile) + "\n" +
			"issuercert = " + ca.path(issuerCertFile) + "\n" +
			"certserial = " + ca.path(certSerialFile) + "\n",
		localCAOptsFile: "--platform-manufacturer Signet\n" +
			"--platform-version 1.0\n" +
			"--platform-model swtpm\n",
	}
	for name, content := range files {
		if err := os.WriteFile(ca.path(name), []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("preparing the local CA: %w", err)
		}
	}
	return ca, nil
}

// RootCertFile is the PEM file of the CA's root certificate, the manufacturer root that EK
// certificates chain to. It exists after the first Manufacture.
func (ca *LocalCA) RootCertFile() string { return ca.path(rootCertFile) }

// IntermediateCertFile is the PEM file of the CA's intermediate certificate, the issuer of
// the EK certificates. It exists after the first Manufacture.
func (ca *LocalCA) IntermediateCertFile() string { return ca.path(issuerCertFile) }

// Certificates returns the CA's root and intermediate certificates. They exist after the
// first Manufacture.
func (ca *LocalCA) Certificates() (root, intermediate *x509.Certificate, err error) {
	if root, err = readCert(ca.RootCertFile()); err != nil {
		return nil, nil, fmt.Errorf("reading the local CA's root: %w", err)
	}
	if intermediate, err = readCert(ca.IntermediateCertFile()); err != nil {
		return nil, nil, fmt.Errorf("reading the local CA's intermediate: %w", err)
	}
	return root, intermediate, nil
}

// Manufactured is what Manufacture made.
type Manufactured struct {
	// EKCertificates are the DER EK certificates swtpm_setup wrote into the TPM's NV, by key
	// type as swtpm_setup names them: "rsa2048" (the RSA EK of the TCG default template, NV
	// index 0x01c00002) and "secp384r1" (the ECC NIST P-384 EK of the high-range template,
	// NV index 0x01c00016) with swtpm 0.7.
	EKCertificates map[string][]byte
	// Log is swtpm_setup's output.
	Log string
}

// Manufacture simulates a TPM's manufacturing on stateDir, which must exist and hold no TPM
// state yet: swtpm_setup --tpm2 --create-ek-cert --create-platform-cert --lock-nvram with
// this CA. The TPM gets an RSA and an ECC EK (persistent) with EK certificates signed by the
// CA's intermediate and a platform certificate, in write-locked NV indices, and the SHA-256
// PCR bank. Start runs a swtpm on stateDir afterwards.
func (ca *LocalCA) Manufacture(stateDir string) (*Manufactured, error) {
	for _, tool := range []string{"swtpm", "swtpm_setup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("manufacturing a TPM: %s is not installed (%w): run %s", tool, err, InstallHint)
		}
	}
	if _, err := os.Stat(ca.RootCertFile()); err != nil {
		if _, err := exec.LookPath("certtool"); err != nil {
			return nil, fmt.Errorf("manufacturing a TPM: certtool, with which swtpm_localca makes its CA, is not installed (%w): apt-get install gnutls-bin", err)
		}
	}
	certDir, err := os.MkdirTemp("", "swtpm-ekcerts-")
	if err != nil {
		return nil, fmt.Errorf("manufacturing a TPM: %w", err)
	}
	defer os.RemoveAll(certDir)

	ctx, cancel := context.WithTimeout(context.Background(), manufactureTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "swtpm_setup", "--tpm2",
		"--tpmstate", stateDir,
		"--config", ca.path(setupConfFile),
		"--create-ek-cert", "--create-platform-cert", "--lock-nvram",
		"--pcr-banks", "sha256",
		"--write-ek-cert-files", certDir)
	// swtpm_setup and swtpm_localca look for user configuration under XDG_CONFIG_HOME when
	// they are not given theirs: keep any such look-up in the CA's directory.
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+ca.Dir)
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = stopTimeout
	out, err := cmd.CombinedOutput()
	log := strings.TrimSpace(string(out))
	if ctx.Err() != nil {
		return nil, fmt.Errorf("manufacturing a TPM: swtpm_setup did not finish within %s; output: %s", manufactureTimeout, log)
	}
	if err != nil {
		return nil, fmt.Errorf("manufacturing a TPM: swtpm_setup: %w; output: %s", err, log)
	}
	certs, err := readEKCerts(certDir)
	if err != nil {
		return nil, fmt.Errorf("manufacturing a TPM: %w; swtpm_setup's output: %s", err, log)
	}
	return &Manufactured{EKCertificates: certs, Log: log}, nil
}

// readEKCerts reads the ek-<key type>.crt files of swtpm_setup --write-ek-cert-files.
func readEKCerts(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the EK certificates: %w", err)
	}
	certs := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ekCertFilePrefix) || !strings.HasSuffix(name, ekCertFileSuffix) ||
			len(name) <= len(ekCertFilePrefix)+len(ekCertFileSuffix) {
			continue
		}
		keyType := strings.TrimSuffix(strings.TrimPrefix(name, ekCertFilePrefix), ekCertFileSuffix)
		der, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading the EK certificates: %w", err)
		}
		certs[keyType] = der
	}
	if len(certs) == 0 {
		return nil, errors.New("swtpm_setup wrote no EK certificate")
	}
	return certs, nil
}

// readCert reads the one PEM certificate in file.
func readCert(file string) (*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cert, nil
}

func (ca *LocalCA) path(name string) string { return filepath.Join(ca.Dir, name) }
