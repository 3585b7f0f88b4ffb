package main

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/keystore"
)

// caCommand is "signetctl ca": the certificates of a CA whose key is in a keystore.
func caCommand() command {
	subs := []command{
		{name: "init", summary: "make a self-signed root CA certificate with a key (HSM, TPM or file)", run: runCAInit},
		{name: "csr", summary: "make a certificate request for an intermediate CA, for an offline root to sign", run: runCACSR},
	}
	return command{
		name:    "ca",
		summary: "make a signer's CA certificate with its key (init, csr)",
		run: func(ctx context.Context, s streams, args []string) int {
			return dispatch(ctx, s, "signetctl ca", subs, args)
		},
	}
}

// caFlags are the flags ca init and ca csr share.
type caFlags struct {
	key, subject, out *string
	keys              keyFlags
}

func addCAFlags(fs *flag.FlagSet) caFlags {
	return caFlags{
		key:     fs.String("key", "", "the CA key's URI (pkcs11:, tpm: or a file; see signetctl keys create)"),
		subject: fs.String("subject", "", `the CA's name, e.g. "CN=Kubernetes client CA,O=Example" (CN, O, OU, C, ST, L)`),
		out:     fs.String("out", "", "write the PEM here (mode 0644) instead of standard output"),
		keys:    addKeyFlags(fs),
	}
}

// open checks the flags and opens the key; it returns the exit code on failure.
func (f caFlags) open(ctx context.Context, s streams, fs *flag.FlagSet, prog string) (keystore.Key, cacert.Options, int) {
	if *f.key == "" || *f.subject == "" {
		fs.Usage()
		return nil, cacert.Options{}, 2
	}
	subject, err := cacert.ParseSubject(*f.subject)
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return nil, cacert.Options{}, 2
	}
	key, err := keystore.Open(ctx, *f.key, f.keys.options())
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return nil, cacert.Options{}, 1
	}
	return key, cacert.Options{Subject: subject}, -1
}

// write writes data to the --out file or to standard output.
func (f caFlags) write(s streams, prog string, data []byte) int {
	if *f.out == "" {
		_, _ = s.out.Write(data)
		return 0
	}
	if err := os.WriteFile(*f.out, data, 0o644); err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

const caInitUsage = `Usage: signetctl ca init --key URI --subject DN [--lifetime 87600h] [--out ca.crt]

Makes a self-signed root CA certificate (CA:TRUE, path length 0, certificate and CRL signing)
whose key is URI, signed inside the device. Put the certificate in the signer's
certificate (and the URI in its key) in the server config. Example:

  signetctl ca init --key 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --subject 'CN=Kubernetes client CA' --out /etc/signet/kube-ca.crt
`

// runCAInit is "signetctl ca init".
func runCAInit(ctx context.Context, s streams, args []string) int {
	const prog = "signetctl ca init"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(s.err)
	f := addCAFlags(fs)
	lifetime := fs.Duration("lifetime", 10*365*24*time.Hour, "how long the root is valid")
	fs.Usage = func() { fmt.Fprint(fs.Output(), caInitUsage+"\nFlags:\n"); fs.PrintDefaults() }
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	key, opts, code := f.open(ctx, s, fs, prog)
	if code >= 0 {
		return code
	}
	defer key.Close()
	opts.Lifetime = *lifetime
	cert, err := cacert.SelfSigned(key, opts)
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 1
	}
	fmt.Fprintf(s.err, "root CA %q, serial %x, valid until %s\n", cert.Subject.String(), cert.SerialNumber, cert.NotAfter.UTC().Format(time.RFC3339))
	return f.write(s, prog, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

// runCACSR is "signetctl ca csr".
func runCACSR(ctx context.Context, s streams, args []string) int {
	const prog = "signetctl ca csr"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(s.err)
	f := addCAFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: signetctl ca csr --key URI --subject DN [--out ca.csr]\n\n"+
			"Makes a PKCS #10 request, signed inside the device, for an intermediate CA certificate that\n"+
			"an offline root signs; put the signed certificate in the signer's certificate and the root's\n"+
			"chain in its intermediates.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	key, opts, code := f.open(ctx, s, fs, prog)
	if code >= 0 {
		return code
	}
	defer key.Close()
	out, err := cacert.Request(key, opts)
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 1
	}
	return f.write(s, prog, out)
}
