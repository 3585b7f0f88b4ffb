package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/duration"
	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// caCommand is "signetctl ca": the certificates of a CA whose key is in a keystore, and the
// rotation of a signer's CAs on the server (ca_rotate.go).
func caCommand() *cobra.Command {
	return groupCommand("ca",
		"Make a signer's CA certificate with its key (init, csr); rotate a signer's CAs (stage, activate, retire, status)",
		`Makes the certificate of a signer's CA with its key, wherever the key is (init: a self-signed root;
csr: a request for an intermediate that an offline root signs), and rotates a signer's CAs on a
running server: stage the next CA, activate it once every cluster publishes it, retire the old
one once its leaves have expired (stage, activate, retire, status; admin clients only).`,
		`  signetctl ca init --key 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --subject 'CN=Kubernetes client CA' --out kube-ca.crt
  signetctl ca status --signer example.com/serving --dev-state-dir .signet-dev`,
		append([]*cobra.Command{caInitCommand(), caCSRCommand()}, rotateCommands()...)...)
}

// caFlags are the flags ca init and ca csr share.
type caFlags struct {
	key, subject, out string
	keys              keystore.Options
}

// addCAFlags adds the flags of ca init and ca csr to cmd.
func addCAFlags(cmd *cobra.Command) *caFlags {
	f := &caFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.key, "key", "", "the CA key's `URI` (pkcs11:, tpm: or a file; see signetctl keys create)")
	fs.StringVar(&f.subject, "subject", "", "the CA's `name`, e.g. \"CN=Kubernetes client CA,O=Example\" (CN, O, OU, C, ST, L)")
	fs.StringVar(&f.out, "out", "", "write the PEM to this `file` (mode 0644) instead of standard output")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagRequired("subject")
	_ = cmd.MarkFlagFilename("out")
	addKeyFlags(cmd, &f.keys)
	return f
}

// open parses the subject and opens the key.
func (f *caFlags) open(cmd *cobra.Command) (keystore.Key, cacert.Options, error) {
	subject, err := cacert.ParseSubject(f.subject)
	if err != nil {
		return nil, cacert.Options{}, usageError(cmd, "%v", err)
	}
	key, err := keystore.Open(cmd.Context(), f.key, f.keys)
	if err != nil {
		return nil, cacert.Options{}, failure("%v", err)
	}
	return key, cacert.Options{Subject: subject}, nil
}

// write writes data to the --out file or to standard output.
func (f *caFlags) write(cmd *cobra.Command, data []byte) error {
	if f.out == "" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	if err := os.WriteFile(f.out, data, 0o644); err != nil {
		return failure("%v", err)
	}
	return nil
}

// caInitCommand is "signetctl ca init".
func caInitCommand() *cobra.Command {
	lifetime := 3650 * duration.Day // ten years, as kubeadm's CAs and pki init's
	cmd := &cobra.Command{
		Use:   "init --key URI --subject DN [--lifetime 3650d] [--out ca.crt]",
		Short: "Make a self-signed root CA certificate with a key (HSM, TPM or file)",
		Long: `Makes a self-signed root CA certificate (CA:TRUE, path length 0, certificate and CRL signing)
whose key is URI, signed inside the device, and prints it in PEM (or writes it to --out). Put
the certificate in the signer's certificate (and the URI in its key) in the server config.

` + exitCodesHelp,
		Example: `  signetctl ca init --key 'tpm:blob=/var/lib/signet/kube-ca.tpmkey' --subject 'CN=Kubernetes client CA' --out /etc/signet/kube-ca.crt`,
		Args:    cobra.NoArgs,
	}
	f := addCAFlags(cmd)
	cmd.Flags().Var(duration.Var(&lifetime), "lifetime", "how long the root is valid: days (3650d) or a Go duration (87600h)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		key, opts, err := f.open(cmd)
		if err != nil {
			return err
		}
		defer key.Close()
		opts.Lifetime = lifetime
		cert, err := cacert.SelfSigned(key, opts)
		if err != nil {
			return failure("%v", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "root CA %q, serial %x, valid until %s\n", cert.Subject.String(), cert.SerialNumber, cert.NotAfter.UTC().Format(time.RFC3339))
		return f.write(cmd, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	}
	return cmd
}

// caCSRCommand is "signetctl ca csr".
func caCSRCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "csr --key URI --subject DN [--out ca.csr]",
		Short: "Make a certificate request for an intermediate CA, for an offline root to sign",
		Long: `Makes a PKCS #10 request, signed inside the device, for an intermediate CA certificate that an
offline root signs; put the signed certificate in the signer's certificate and the root's chain
in its intermediates.

` + exitCodesHelp,
		Example: `  signetctl ca csr --key 'pkcs11:token=signet;object=kube-ca?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin' \
      --subject 'CN=Kubernetes intermediate CA' --out kube-ca.csr`,
		Args: cobra.NoArgs,
	}
	f := addCAFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		key, opts, err := f.open(cmd)
		if err != nil {
			return err
		}
		defer key.Close()
		out, err := cacert.Request(key, opts)
		if err != nil {
			return failure("%v", err)
		}
		return f.write(cmd, out)
	}
	return cmd
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
		fmt.Fprintln(tw, "    CLUSTER\tSOURCE\tREGISTERED\tBUNDLE\tUP TO DATE\tSTAGED PUBLISHED AT\tLAST SEEN")
		for _, cl := range a.GetClusters() {
			registered, current := "no", "no"
			if cl.GetRegistered() {
				registered = "yes"
			}
			if cl.GetBundleHash() != "" && cl.GetBundleHash() == a.GetBundleHash() {
				current = "yes"
			}
			source := cl.GetSource()
			if source == "" {
				source = "trust-bundle"
			} else if cl.GetSource() != "" {
				current = "-" // another source holds other certificates than the signer's bundle
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", cl.GetCluster(), source, registered, orDash(shortHex(cl.GetBundleHash())), current,
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
