package keystore

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/signet-pki/signet/keystore/pkcs11"
	"github.com/signet-pki/signet/keystore/tpm"
)

// Errors of Import that a caller tells apart (signetctl keys import names the files at fault).
var (
	// ErrKeyMismatch: the key to import is not the key of the certificate given with it.
	ErrKeyMismatch = errors.New("the key is not the certificate's key")
	// ErrNotCA: the certificate given with the key is not a CA certificate.
	ErrNotCA = errors.New("the certificate is not a CA certificate")
)

// Import moves an existing CA private key into the HSM or TPM uri names, and returns the
// imported key open, as Open opens it, with the canonical URI that names it. key is the
// private key itself (an *ecdsa.PrivateKey or *rsa.PrivateKey, or a SoftwareKey holding one,
// as Open returns a file key); cert is its CA certificate.
//
// Before anything is written, Import refuses a certificate that is not a CA's
// (ErrNotCA) and a key whose public key is not the certificate's (ErrKeyMismatch). The
// backend then imports the key (pkcs11.Import: C_CreateObject of a sensitive,
// non-extractable private key; tpm.Import: TPM2_Import under the storage root key, written as
// a blob file or made persistent; see each for the attributes set and what they mean).
// Target objects, handles and blob files that exist already are refused, as Generate refuses
// them. Last, Import opens the key by the canonical URI, as the server will, and checks that
// it is the certificate's key and that a certificate it signs verifies with cert. When that
// check fails the key stays where it was imported, and the error names its URI: it must not
// be used, and the file it came from must not be destroyed.
//
// Import never reports success for a key that cannot sign for cert. The private key still
// exists wherever the caller read it from; destroying that copy is the caller's duty.
func Import(ctx context.Context, uri string, key crypto.Signer, cert *x509.Certificate, opts Options) (Key, string, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if sw, ok := key.(SoftwareKey); ok {
		key = sw.Software()
	}
	if err := checkImport(key, cert); err != nil {
		return nil, "", fmt.Errorf("importing a key to %q: %w", redact(uri), err)
	}
	scheme, _, _ := strings.Cut(uri, ":")
	var (
		made string
		err  error
	)
	switch scheme {
	case BackendPKCS11:
		made, err = pkcs11.Import(ctx, uri, key, pkcs11.Options{AllowPINValue: opts.AllowPINValue})
	case BackendTPM:
		made, err = tpm.Import(ctx, uri, key, tpm.Options{Transport: opts.TPM})
	default:
		return nil, "", fmt.Errorf("importing a key to %q: %w: keys are imported only into an HSM (pkcs11:) or a TPM (tpm:)", redact(uri), ErrUnsupportedURI)
	}
	if err != nil {
		return nil, "", err
	}
	opened, err := Open(ctx, made, opts)
	if err != nil {
		return nil, "", fmt.Errorf("the key was imported to %s, but opening it there failed; do not destroy the key file: %w", redact(made), err)
	}
	if err := signsFor(opened, cert); err != nil {
		_ = opened.Close()
		return nil, "", fmt.Errorf("the key was imported to %s, but it does not sign for the certificate there: do not use it, delete it, and do not destroy the key file: %w", redact(made), err)
	}
	return opened, made, nil
}

// checkImport refuses a certificate that is not a CA's and a key that is not the
// certificate's.
func checkImport(key crypto.Signer, cert *x509.Certificate) error {
	switch {
	case cert == nil:
		return errors.New("no CA certificate given: the key is checked against its certificate")
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return fmt.Errorf("%w (%s has no basic constraints CA:TRUE)", ErrNotCA, cert.Subject)
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return fmt.Errorf("%w (%s's key usage lacks certificate signing)", ErrNotCA, cert.Subject)
	case key == nil:
		return errors.New("no private key given")
	}
	if !samePublic(key.Public(), cert.PublicKey) {
		return fmt.Errorf("%w (its public key differs from that of %s)", ErrKeyMismatch, cert.Subject)
	}
	return nil
}

// signsFor checks that key is cert's key, and that a certificate it signs with cert as the
// issuer verifies with cert: the check certsign makes of every hardware signature. The
// probe certificate, for key's own public key, is valid only while cert is, so no clock is
// read; it is discarded.
func signsFor(key crypto.Signer, cert *x509.Certificate) error {
	if !samePublic(key.Public(), cert.PublicKey) {
		return fmt.Errorf("%w (the key opened has another public key than %s)", ErrKeyMismatch, cert.Subject)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	probe := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)),
		Subject:      pkix.Name{CommonName: "signet keys import: signature check"},
		NotBefore:    cert.NotBefore,
		NotAfter:     cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, probe, cert, key.Public(), key)
	if err != nil {
		return fmt.Errorf("signing a test certificate: %w", err)
	}
	signed, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parsing the test certificate: %w", err)
	}
	if err := signed.CheckSignatureFrom(cert); err != nil {
		return fmt.Errorf("the test certificate does not verify with %s: %w", cert.Subject, err)
	}
	return nil
}
