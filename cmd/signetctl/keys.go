package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
)

// keysCommand is "signetctl keys": CA keys inside an HSM or a TPM.
func keysCommand() command {
	subs := []command{
		{name: "create", summary: "generate a key inside an HSM (pkcs11:) or a TPM (tpm:) and print its URI and public key", run: runKeysCreate},
		{name: "list", summary: "list the keys a PKCS#11 token or a TPM holds", run: runKeysList},
	}
	return command{
		name:    "keys",
		summary: "CA keys inside an HSM or a TPM (create, list)",
		run: func(ctx context.Context, s streams, args []string) int {
			return dispatch(ctx, s, "signetctl keys", subs, args)
		},
	}
}

// keyFlags are the flags of every command that opens or makes a key.
type keyFlags struct {
	allowPINValue *bool
}

func addKeyFlags(fs *flag.FlagSet) keyFlags {
	return keyFlags{allowPINValue: fs.Bool("allow-pin-value", false, "accept a pin-value= attribute in a pkcs11: URI (tests and demos; use pin-source=file:... otherwise)")}
}

func (f keyFlags) options() keystore.Options {
	return keystore.Options{AllowPINValue: *f.allowPINValue}
}

// parseFlags parses args into fs and reports the exit code to return when parsing ends the
// command (help: 0, error: 2), or -1 to go on.
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	return -1
}

const keysCreateUsage = `Usage: signetctl keys create --uri URI [--algorithm P-256|P-384|RSA-2048|RSA-3072|RSA-4096]

Generates a key pair inside the HSM or TPM that URI names; the private key never leaves the
device. Prints the key's URI (for signers[].key in the server config and for signetctl ca
init/csr) and its public key. Examples:

  signetctl keys create --uri 'pkcs11:token=signet;object=kube-ca?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin'
  signetctl keys create --uri 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --algorithm P-384
  signetctl keys create --uri 'tpm:handle=0x81000100'
`

// runKeysCreate is "signetctl keys create".
func runKeysCreate(ctx context.Context, s streams, args []string) int {
	fs := flag.NewFlagSet("signetctl keys create", flag.ContinueOnError)
	fs.SetOutput(s.err)
	uri := fs.String("uri", "", "where to create the key: a pkcs11: URI naming the token and object=, or a tpm: URI with handle= or blob=")
	alg := fs.String("algorithm", keyerr.P256, "the key's algorithm: P-256, P-384, RSA-2048, RSA-3072 or RSA-4096 (a TPM: up to RSA-3072)")
	kf := addKeyFlags(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), keysCreateUsage+"\nFlags:\n"); fs.PrintDefaults() }
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if *uri == "" {
		fs.Usage()
		return 2
	}
	key, made, err := keystore.Generate(ctx, *uri, *alg, kf.options())
	if err != nil {
		fmt.Fprintf(s.err, "signetctl keys create: %v\n", err)
		return 1
	}
	defer key.Close()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		fmt.Fprintf(s.err, "signetctl keys create: %v\n", err)
		return 1
	}
	scheme, _, _ := strings.Cut(made, ":")
	fmt.Fprintf(s.out, "created a %s key inside the %s device\nuri: %s\n%s", *alg, scheme, keystore.Redact(made),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return 0
}

// runKeysList is "signetctl keys list".
func runKeysList(ctx context.Context, s streams, args []string) int {
	fs := flag.NewFlagSet("signetctl keys list", flag.ContinueOnError)
	fs.SetOutput(s.err)
	uri := fs.String("uri", "", "the token (a pkcs11: URI with token= and the module and PIN attributes) or TPM (tpm: URI, e.g. tpm: or tpm:?socket=PATH)")
	kf := addKeyFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: signetctl keys list --uri URI\n\nLists the keys a PKCS#11 token or a TPM holds, with the URI that opens each.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if *uri == "" {
		fs.Usage()
		return 2
	}
	entries, err := keystore.List(ctx, *uri, kf.options())
	if err != nil {
		fmt.Fprintf(s.err, "signetctl keys list: %v\n", err)
		return 1
	}
	if len(entries) == 0 {
		fmt.Fprintln(s.out, "no keys")
		return 0
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tALGORITHM\tURI")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Label, e.Algorithm, keystore.Redact(e.URI))
	}
	tw.Flush()
	return 0
}
