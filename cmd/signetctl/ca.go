package main

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// caCommand is "signetctl ca": the certificates of a CA whose key is in a keystore, and the
// rotation of a signer's CAs on the server (ca_rotate.go).
func caCommand() command {
	subs := append([]command{
		{name: "init", summary: "make a self-signed root CA certificate with a key (HSM, TPM or file)", run: runCAInit},
		{name: "csr", summary: "make a certificate request for an intermediate CA, for an offline root to sign", run: runCACSR},
	}, rotateCommands()...)
	return command{
		name:    "ca",
		summary: "make a signer's CA certificate with its key (init, csr); rotate a signer's CAs (stage, activate, retire, status)",
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

// writeAuthority prints one signer's CA set for people: a table of its CAs, what blocks the
// retirement of each, a table of its clusters' reports, and the activation gate.
func writeAuthority(w io.Writer, a *signetv1.SignerAuthority) {
	fmt.Fprintln(w, a.GetSignerName())
	fmt.Fprintln(w, "  CAs:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    STATE\tSINCE\tBY\tSUBJECT\tSERIAL\tFINGERPRINT\tKEY\tLAST LEAF NOT AFTER\tRETIREMENT")
	for _, ca := range a.GetCas() {
		an := ca.GetAnchor()
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stateName(an.GetState()), timestamp(an.GetSince()),
			orDash(ca.GetBy()), orDash(an.GetSubject()), orDash(an.GetSerialNumber()), orDash(shortHex(an.GetFingerprint())),
			orDash(ca.GetKeyUri()), timestamp(ca.GetLastLeafNotAfter()), gateWord(ca.GetRetirement()))
	}
	tw.Flush()
	for _, ca := range a.GetCas() {
		if g := ca.GetRetirement(); g != nil && !g.GetReady() {
			writeGate(w, fmt.Sprintf("  Retirement of %s (%s)", shortHex(ca.GetAnchor().GetFingerprint()), stateName(ca.GetAnchor().GetState())), g)
		}
	}
	delay := "-"
	if d := a.GetMinPropagationDelay(); d != nil {
		delay = d.AsDuration().String()
	}
	fmt.Fprintf(w, "  Clusters (minimum propagation delay %s):\n", delay)
	if len(a.GetClusters()) == 0 {
		fmt.Fprintln(w, "    none registered or reported")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    CLUSTER\tREGISTERED\tBUNDLE\tUP TO DATE\tSTAGED PUBLISHED AT\tLAST SEEN")
		for _, cl := range a.GetClusters() {
			registered, current := "no", "no"
			if cl.GetRegistered() {
				registered = "yes"
			}
			if cl.GetBundleHash() != "" && cl.GetBundleHash() == a.GetBundleHash() {
				current = "yes"
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\n", cl.GetCluster(), registered, orDash(shortHex(cl.GetBundleHash())), current,
				timestamp(cl.GetStagedPublishedAt()), timestamp(cl.GetLastSeen()))
		}
		tw.Flush()
	}
	writeGate(w, "  Activation", a.GetActivation())
}

// writeGate prints "label: ready", or "label: blocked" followed by each blocking sentence
// and, when time alone blocks, from when the step is possible.
func writeGate(w io.Writer, label string, g *signetv1.Gate) {
	fmt.Fprintf(w, "%s: %s\n", label, gateWord(g))
	if g == nil || g.GetReady() {
		return
	}
	for _, b := range g.GetBlocking() {
		fmt.Fprintf(w, "    - %s\n", b)
	}
	if g.GetNotBefore() != nil {
		fmt.Fprintf(w, "    not before %s\n", timestamp(g.GetNotBefore()))
	}
}

// gateWord is "ready", "blocked" or, without a gate, "-".
func gateWord(g *signetv1.Gate) string {
	switch {
	case g == nil:
		return "-"
	case g.GetReady():
		return "ready"
	}
	return "blocked"
}

// stateName is an AnchorState without its prefix, lower case: "active", "staged", ...
func stateName(s signetv1.AnchorState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ANCHOR_STATE_"))
}

// timestamp formats ts in UTC (RFC 3339), "-" when unset.
func timestamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// shortHex is the first 16 digits of a fingerprint or hash, as the server's messages show it.
func shortHex(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

// orDash is v, or "-" when empty.
func orDash(v string) string {
	if v == "" {
		return "-"
	}
	return v
}
