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
	return groupCommand("keys", "Make and list CA keys inside an HSM or a TPM (create, list)",
		`Makes a CA key inside a PKCS#11 token (an HSM) or a TPM 2.0, where it stays, and lists what a
token or TPM holds. The URI printed goes into the server config (signers[].key) and into
'signetctl ca init|csr'.`,
		`  signetctl keys create --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --algorithm P-384
  signetctl keys list --uri 'tpm:'`,
		keysCreateCommand(), keysListCommand())
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
		uri, alg string
		opts     keystore.Options
	)
	cmd := &cobra.Command{
		Use:   "create --uri URI [--algorithm P-256|P-384|RSA-2048|RSA-3072|RSA-4096]",
		Short: "Generate a key inside an HSM (pkcs11:) or a TPM (tpm:) and print its URI and public key",
		Long: `Generates a key pair inside the HSM or TPM that URI names; the private key never leaves the
device. Prints the key's URI (for signers[].key in the server config and for signetctl ca
init/csr) and its public key. PINs are redacted in everything printed.

` + exitCodesHelp,
		Example: `  signetctl keys create --uri 'pkcs11:token=signet;object=kube-ca?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin'
  signetctl keys create --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --algorithm P-384
  signetctl keys create --uri 'tpm:handle=0x81000100'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&uri, "uri", "", "where to create the key: a pkcs11: URI naming the token and object=, or a tpm: URI with handle= or blob=")
	cmd.Flags().StringVar(&alg, "algorithm", keyerr.P256, "the key's algorithm: P-256, P-384, RSA-2048, RSA-3072 or RSA-4096 (a TPM: up to RSA-3072)")
	_ = cmd.MarkFlagRequired("uri")
	_ = cmd.RegisterFlagCompletionFunc("algorithm", cobra.FixedCompletions(
		[]string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096}, cobra.ShellCompDirectiveNoFileComp))
	addKeyFlags(cmd, &opts)
	out := addOutputFlag(cmd, "the URI, algorithm, device and public key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		alg = canonicalAlgorithm(alg)
		key, made, err := keystore.Generate(cmd.Context(), uri, alg, opts)
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
		fmt.Fprintf(w, "created a %s key inside the %s device\nuri: %s\n%s", alg, scheme, keystore.Redact(made), pub)
		return nil
	}
	return cmd
}

// canonicalAlgorithm maps the other common spellings of a key algorithm (p256, ecdsa-p256,
// prime256v1, rsa3072, any case) to the keystore's name (P-256, RSA-3072); other values are
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
