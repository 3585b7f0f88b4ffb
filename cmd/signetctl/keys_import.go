package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// importedKey is keys import's answer for -o json|yaml.
type importedKey struct {
	URI         string   `json:"uri"`
	Algorithm   string   `json:"algorithm"`
	Device      string   `json:"device"`
	Certificate string   `json:"certificate"` // the CA certificate's subject
	From        string   `json:"from"`        // the key file, to destroy
	Next        []string `json:"next"`
}

// keysImportCommand is "signetctl keys import": an existing CA key moved from a file into an
// HSM or a TPM, checked against its certificate.
func keysImportCommand() *cobra.Command {
	var (
		from, passFile, certFile, uri string
		opts                          keystore.Options
	)
	cmd := &cobra.Command{
		Use:   "import --from FILE [--passphrase-file FILE] --certificate CA.crt --uri URI",
		Short: "Move an existing CA key from a file into an HSM (pkcs11:) or a TPM (tpm:), keeping its certificate",
		Long: `Moves the CA private key in FILE (PEM: PKCS#1, SEC 1, PKCS#8, or encrypted PKCS#8 with
--passphrase-file) into the PKCS#11 token or the TPM that URI names, so that the CA keeps its
certificate, and nothing that trusts it changes (a kubeadm cluster's ca.key, say).

  pkcs11: the key is created on the token (C_CreateObject) as a sensitive, non-extractable
          private key that may only sign, labelled object= (required), with id= or a random
          CKA_ID, and its public key object beside it.
  tpm:    the key is wrapped for the TPM's storage root key and imported (TPM2_Import); the
          sealed blob is written to blob= (mode 0600), which only this TPM can load, or made
          persistent at handle=. An imported TPM key lacks fixedTPM/fixedParent (it was made
          outside), but has no policy, so TPM2_Duplicate cannot take it out again.

Before anything is written, the key must be the key of the CA certificate CA.crt (a PEM file
holding that one certificate) and the certificate a CA's. An existing label, id, handle or
blob is never replaced. Before it reports success, it opens the imported key by the URI it
prints, as the server will, and checks that a certificate it signs verifies with CA.crt.
Ed25519 keys cannot go into an HSM or TPM here; P-256, P-384 and RSA-2048 to RSA-4096 can (a
TPM: RSA-2048 and RSA-3072, when it has them).

On success it says what is left to do: point the signer at the URI in the server config,
then destroy FILE (and its copies), which still holds the key. It never prints the key.

` + exitCodesHelp,
		Example: `  signetctl keys import --from /etc/kubernetes/pki/ca.key --certificate /etc/kubernetes/pki/ca.crt \
    --uri 'pkcs11:token=signet;object=kube-ca?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin'
  signetctl keys import --from /etc/kubernetes/pki/ca.key --certificate /etc/kubernetes/pki/ca.crt \
    --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey'
  signetctl keys import --from ca.p8 --passphrase-file ca.pass --certificate ca.crt --uri 'tpm:handle=0x81000100'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&from, "from", "", "the PEM private key `file` to import (mode 0600)")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "for an encrypted PKCS#8 key: the `file` (mode 0600) holding its passphrase")
	cmd.Flags().StringVar(&certFile, "certificate", "", "the CA certificate of the key (PEM `file`); the key must be its key")
	cmd.Flags().StringVar(&uri, "uri", "", "where to import the key: a pkcs11: URI naming the token and object=, or a tpm: URI with blob= or handle=")
	for _, name := range []string{"from", "certificate", "uri"} {
		_ = cmd.MarkFlagRequired(name)
	}
	for _, name := range []string{"from", "passphrase-file", "certificate"} {
		_ = cmd.MarkFlagFilename(name)
	}
	addKeyFlags(cmd, &opts)
	out := addOutputFlag(cmd, "the URI, algorithm, device, certificate subject, key file and the next steps")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		if _, isFile := keystore.FilePath(uri); isFile {
			return usageError(cmd, "--uri %q names a file: keys are imported into an HSM (pkcs11:) or a TPM (tpm:)", uri)
		}
		key, err := readImportKey(from, passFile)
		if err != nil {
			return err
		}
		cert, err := readImportCertificate(certFile)
		if err != nil {
			return err
		}
		imported, made, err := keystore.Import(cmd.Context(), uri, key, cert, opts)
		switch {
		case errors.Is(err, keystore.ErrKeyMismatch):
			return failure("the key in %s is not the key of the certificate in %s (%s): give the CA certificate that goes with the key", from, certFile, cert.Subject)
		case errors.Is(err, keystore.ErrNotCA):
			return failure("%s: %v: give the CA's certificate", certFile, err)
		case err != nil:
			return failure("%v", err)
		}
		_ = imported.Close()
		made = keystore.Redact(made)
		scheme, _, _ := strings.Cut(made, ":")
		next := importNextSteps(made, from, passFile, certFile)
		if !out.text() {
			return out.print(cmd.OutOrStdout(), importedKey{
				URI: made, Algorithm: importAlgorithm(key.Public()), Device: scheme, Certificate: cert.Subject.String(), From: from, Next: next,
			})
		}
		printImported(cmd.OutOrStdout(), made, scheme, importAlgorithm(key.Public()), certFile, cert, next)
		return nil
	}
	return cmd
}

// readImportKey reads the private key to import, as the server reads a file key (the key and
// passphrase files readable by their owner only).
func readImportKey(from, passFile string) (crypto.Signer, error) {
	if passFile == "" {
		if data, err := os.ReadFile(from); err == nil {
			if block, _ := pem.Decode(data); block != nil && block.Type == "ENCRYPTED PRIVATE KEY" {
				return nil, inputError("--from %s is an encrypted PKCS#8 key: give the file holding its passphrase with --passphrase-file", from)
			}
		}
	}
	key, err := pemfile.Open(from, pemfile.Options{PassphraseFile: passFile})
	if err != nil {
		return nil, inputError("--from: %v", err)
	}
	return key.Software(), nil
}

// readImportCertificate reads the one certificate of a PEM file.
func readImportCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError("--certificate: %v", err)
	}
	var ders [][]byte
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			ders = append(ders, block.Bytes)
		}
	}
	switch len(ders) {
	case 0:
		return nil, inputError("--certificate %s holds no PEM CERTIFICATE block", path)
	case 1:
	default:
		return nil, inputError("--certificate %s holds %d certificates: give the key's CA certificate alone", path, len(ders))
	}
	cert, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return nil, inputError("--certificate %s: %v", path, err)
	}
	return cert, nil
}

// importNextSteps are what the operator does after the import: use the key, then destroy
// the file.
func importNextSteps(uri, from, passFile, certFile string) []string {
	destroy := "shred -u " + importShellQuote(from)
	files := from
	if passFile != "" {
		destroy += " " + importShellQuote(passFile)
		files += " and its passphrase file " + passFile
	}
	return []string{
		fmt.Sprintf("Point the signer at the imported key in the server config, signers[].key: %s (its certificate: %s stays as it is); restart signet-server and check that it signs.", importShellQuote(uri), certFile),
		fmt.Sprintf("Stop everything else that reads %s (kube-controller-manager's --cluster-signing-key-file, once Signet has taken its signer names over).", from),
		fmt.Sprintf("Destroy %s, which still holds the key, and every copy of it (backups, other control-plane nodes): %s. On copy-on-write filesystems and SSDs shred cannot reach every old block; destroy those copies with the disk.", files, destroy),
	}
}

// printImported writes keys import's report for people.
func printImported(w io.Writer, uri, scheme, alg, certFile string, cert *x509.Certificate, next []string) {
	fmt.Fprintf(w, "imported the %s key of %s into the %s device\nuri: %s\n", alg, cert.Subject, scheme, uri)
	fmt.Fprintf(w, "checked: opened by this URI, it is the key of %s and signs certificates that verify with it\n\nNext:\n", certFile)
	for i, step := range next {
		fmt.Fprintf(w, "  %d. %s\n", i+1, step)
	}
}

// importAlgorithm names a public key's algorithm as keys create does: P-256, P-384, RSA-<bits>.
func importAlgorithm(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// importShellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func importShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
