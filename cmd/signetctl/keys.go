package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
)

// keysCommand is "signetctl keys": CA keys inside an HSM or a TPM.
func keysCommand() *cobra.Command {
	return groupCommand("keys", "Make CA keys inside an HSM or a TPM, or in an encrypted file; import an existing CA key into one; list a device's keys (create, import, list)",
		`Makes a CA key inside a PKCS#11 token (an HSM) or a TPM 2.0, where it stays, or in an encrypted
PKCS#8 file; imports an existing CA key file (a kubeadm cluster's ca.key) into a token or TPM,
so that the cluster keeps its CA and only the key moves; and lists what a token or TPM holds.
The URI printed goes into the server config (signers[].key) and into 'signetctl ca init|csr'.`,
		`  signetctl keys create --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --algorithm P-384
  signetctl keys create --uri file:///etc/signet/ca/kubelet.key --passphrase-file /etc/signet/ca/kubelet.pass
  signetctl keys import --from /etc/kubernetes/pki/ca.key --certificate /etc/kubernetes/pki/ca.crt --uri 'pkcs11:token=signet;object=kube-ca?pin-source=file:/etc/signet/pin'
  signetctl keys list --uri 'tpm:'`,
		keysCreateCommand(), keysListCommand(), keysImportCommand())
}

// addKeyFlags adds the flags of every command that opens or makes a key.
func addKeyFlags(cmd *cobra.Command, opts *keystore.Options) {
	cmd.Flags().BoolVar(&opts.AllowPINValue, "allow-pin-value", false, "accept a pin-value= attribute in a pkcs11: URI (tests and demos; use pin-source=file:... otherwise)")
}

// createdKey is keys create's answer for -o json|yaml.
type createdKey struct {
	URI       string `json:"uri"`
	Algorithm string `json:"algorithm"`
	Device    string `json:"device"`
	PublicKey string `json:"publicKeyPEM"`
}

// keysCreateCommand is "signetctl keys create".
func keysCreateCommand() *cobra.Command {
	var (
		uri, alg, passFile string
		opts               keystore.Options
	)
	cmd := &cobra.Command{
		Use:   "create --uri URI [--passphrase-file FILE] [--algorithm P-256|P-384|RSA-2048|RSA-3072|RSA-4096|Ed25519]",
		Short: "Generate a key inside an HSM (pkcs11:) or a TPM (tpm:), or in an encrypted file (file:), and print its URI and public key",
		Long: `Generates a key pair inside the HSM or TPM that URI names; the private key never leaves the
device. Prints the key's URI (for signers[].key in the server config and for signetctl ca
init/csr) and its public key. PINs are redacted in everything printed.

With a file: URI (or a path), it writes a new key file instead: an encrypted PKCS#8 key
("ENCRYPTED PRIVATE KEY": PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC, as
openssl pkcs8 -topk8 -v2 aes-256-cbc reads and writes), mode 0600. The passphrase is read from
the file --passphrase-file names (or the URI's passphrase-file=), never from the command line:
readable by its owner only, its trailing newline ignored, as the server reads it. An existing
key file is never replaced. Before it reports success, it opens the new file as the server
does, with the URI it prints (file:///PATH?passphrase-file=FILE, both paths absolute), and
signs with it. Ed25519 is for file keys only. A server run by systemd reads the passphrase as
a credential (deploy/server/dropins/30-credentials.conf): its config then names
passphrase-file=/run/credentials/signet-server.service/NAME instead.

` + exitCodesHelp,
		Example: `  signetctl keys create --uri 'pkcs11:token=signet;object=kube-ca?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin'
  signetctl keys create --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --algorithm P-384
  signetctl keys create --uri 'tpm:handle=0x81000100'
  (umask 077; head -c 32 /dev/urandom | base64 > /etc/signet/ca/kubelet.pass)
  signetctl keys create --uri file:///etc/signet/ca/kubelet.key --passphrase-file /etc/signet/ca/kubelet.pass --algorithm P-384`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&uri, "uri", "", "where to create the key: a pkcs11: URI naming the token and object=, a tpm: URI with handle= or blob=, or a new file (file:///path or a path)")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "for a file key: the `file` (mode 0600) holding the passphrase that encrypts it")
	cmd.Flags().StringVar(&alg, "algorithm", keyerr.P256, "the key's algorithm: P-256, P-384, RSA-2048, RSA-3072 or RSA-4096 (a TPM: up to RSA-3072), or Ed25519 (a file)")
	_ = cmd.MarkFlagRequired("uri")
	_ = cmd.MarkFlagFilename("passphrase-file")
	_ = cmd.RegisterFlagCompletionFunc("algorithm", cobra.FixedCompletions(fileAlgorithms, cobra.ShellCompDirectiveNoFileComp))
	addKeyFlags(cmd, &opts)
	out := addOutputFlag(cmd, "the URI, algorithm, device and public key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		alg = canonicalAlgorithm(alg)
		file, isFile, err := fileKeyTarget(uri, passFile)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		var (
			key  keystore.Key
			made string
		)
		if isFile {
			pass, perr := readPassphrase(file.passFile)
			if perr != nil {
				return inputError("%v", perr)
			}
			key, made, err = createFileKey(cmd.Context(), file, alg, pass)
		} else {
			key, made, err = keystore.Generate(cmd.Context(), uri, alg, opts)
		}
		if err != nil {
			return failure("%v", err)
		}
		defer key.Close()
		der, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			return failure("%v", err)
		}
		scheme, _, _ := strings.Cut(made, ":")
		pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		w := cmd.OutOrStdout()
		if !out.text() {
			return out.print(w, createdKey{URI: keystore.Redact(made), Algorithm: alg, Device: scheme, PublicKey: string(pub)})
		}
		if isFile {
			fmt.Fprintf(w, "created the encrypted %s key file %s (mode 0600)\nuri: %s\n%s", alg, file.path, made, pub)
			return nil
		}
		fmt.Fprintf(w, "created a %s key inside the %s device\nuri: %s\n%s", alg, scheme, keystore.Redact(made), pub)
		return nil
	}
	return cmd
}

// canonicalAlgorithm maps the other common spellings of a key algorithm (p256, ecdsa-p256,
// prime256v1, rsa3072, ed25519, any case) to the keystore's name (P-256, RSA-3072, Ed25519); other values are
// returned as they are, for the keystore to refuse with the list of names it takes.
func canonicalAlgorithm(alg string) string {
	a := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(alg))
	a = strings.TrimPrefix(a, "ecdsa")
	switch a {
	case "p256", "prime256v1", "secp256r1":
		return keyerr.P256
	case "p384", "secp384r1":
		return keyerr.P384
	case "rsa2048":
		return keyerr.RSA2048
	case "rsa3072":
		return keyerr.RSA3072
	case "rsa4096":
		return keyerr.RSA4096
	case "ed25519":
		return Ed25519
	}
	return alg
}

// listedKey is one key of keys list for -o json|yaml.
type listedKey struct {
	Label     string `json:"label"`
	Algorithm string `json:"algorithm"`
	URI       string `json:"uri"`
}

// keysListCommand is "signetctl keys list".
func keysListCommand() *cobra.Command {
	var (
		uri  string
		opts keystore.Options
	)
	cmd := &cobra.Command{
		Use:   "list --uri URI",
		Short: "List the keys a PKCS#11 token or a TPM holds",
		Long: `Lists the keys a PKCS#11 token or a TPM holds, with the URI that opens each.

` + exitCodesHelp,
		Example: `  signetctl keys list --uri 'pkcs11:token=signet?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin'
  signetctl keys list --uri 'tpm:?socket=/run/swtpm.sock' -o json`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&uri, "uri", "", "the token (a pkcs11: URI with token= and the module and PIN attributes) or TPM (tpm: URI, e.g. tpm: or tpm:?socket=PATH)")
	_ = cmd.MarkFlagRequired("uri")
	addKeyFlags(cmd, &opts)
	out := addOutputFlag(cmd, "label, algorithm and URI of each key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		entries, err := keystore.List(cmd.Context(), uri, opts)
		if err != nil {
			return failure("%v", err)
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			keys := []listedKey{}
			for _, e := range entries {
				keys = append(keys, listedKey{Label: e.Label, Algorithm: e.Algorithm, URI: keystore.Redact(e.URI)})
			}
			return out.print(w, keys)
		}
		if len(entries) == 0 {
			fmt.Fprintln(w, "no keys")
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LABEL\tALGORITHM\tURI")
		for _, e := range entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Label, e.Algorithm, keystore.Redact(e.URI))
		}
		return tw.Flush()
	}
	return cmd
}
