package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// The CA rotation commands: ca stage, ca activate, ca retire and ca status call the server's
// AuthorityService (admin clients only).

const rotateAdminHelp = `Needs a client certificate whose identity has admin: true in the server's clients, for the
signer.`

// rotateCommands are the ca subcommands that call the AuthorityService.
func rotateCommands() []*cobra.Command {
	return []*cobra.Command{caStageCommand(), caActivateCommand(), caConfirmCommand(), caRetireCommand(), caStatusCommand()}
}

// rotateCmd holds what every rotation command shares: the connection and output flags.
type rotateCmd struct {
	cmd  *cobra.Command
	conn *connFlags
	out  *outputFlag
}

// newRotateCmd adds the connection and output flags to cmd.
func newRotateCmd(cmd *cobra.Command) *rotateCmd {
	cmd.Args = cobra.NoArgs
	return &rotateCmd{cmd: cmd, conn: addConnFlags(cmd), out: addOutputFlag(cmd, "the response")}
}

// call connects to the server and runs do with the AuthorityService client, within the
// timeout; a failed connection or call is an exit error (see callError).
func (c *rotateCmd) call(do func(context.Context, signetv1.AuthorityServiceClient) error) error {
	if err := c.out.check(c.cmd); err != nil {
		return err
	}
	cc, err := c.conn.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := c.conn.callContext(c.cmd.Context())
	defer cancel()
	if err := do(ctx, signetv1.NewAuthorityServiceClient(cc)); err != nil {
		return c.conn.callError(err)
	}
	return nil
}

// errNoAuthority is the answer of a rotation step without the signer's CA set.
var errNoAuthority = errors.New("the server answered without the signer's CA set")

// done prints the response of a rotation step: -o json|yaml the response, else the line what
// followed by the signer's CA set.
func (c *rotateCmd) done(resp proto.Message, a *signetv1.SignerAuthority, what string) error {
	w := c.cmd.OutOrStdout()
	if !c.out.text() {
		return c.out.print(w, resp)
	}
	if a == nil {
		return inputError("%v", errNoAuthority)
	}
	fmt.Fprintln(w, what)
	fmt.Fprintln(w)
	writeAuthority(w, a)
	return nil
}

// forceFlags are --force and --reason of ca activate and ca retire.
type forceFlags struct {
	force  bool
	reason string
}

func (f *forceFlags) register(cmd *cobra.Command, skips string) {
	cmd.Flags().BoolVar(&f.force, "force", false, "skip "+skips+"; needs --reason")
	cmd.Flags().StringVar(&f.reason, "reason", "", "why --force is used (`text`, recorded in the ledger)")
}

// check refuses --force without a reason, and a reason without --force.
func (f *forceFlags) check(cmd *cobra.Command) error {
	f.reason = strings.TrimSpace(f.reason)
	switch {
	case f.force && f.reason == "":
		return usageError(cmd, "--force needs --reason TEXT: say why the gate is skipped (it is recorded in the ledger)")
	case !f.force && f.reason != "":
		return usageError(cmd, "--reason goes with --force only")
	}
	return nil
}

// addSignerFlag adds the required --signer flag.
func addSignerFlag(cmd *cobra.Command, signer *string) {
	cmd.Flags().StringVar(signer, "signer", "", "the signer's `name`")
	_ = cmd.MarkFlagRequired("signer")
}

// caConfirmCommand is "signetctl ca confirm".
func caConfirmCommand() *cobra.Command {
	var signer, cluster, anchor, reason string
	c := newRotateCmd(&cobra.Command{
		Use:   "confirm --signer NAME --cluster NAME --anchor kubelet-certificate-authority --reason TEXT",
		Short: "Confirm that a cluster trusts the staged CA where nothing publishes it (kubelet-serving); admin",
		Long: `Records your confirmation that the cluster's relying party trusts the signer's staged CA in a
place nothing publishes: kube-apiserver's --kubelet-certificate-authority, for
kubernetes.io/kubelet-serving. It counts as that cluster's report for the activation gate, which
waits for one per registered cluster; --reason (how you checked) is recorded in the ledger.
Other signers need no confirmation: a ClusterTrustBundle, or for the kubernetes.io client
signers the API server's own client-ca-file, is reported by the watcher.

` + rotateAdminHelp + "\n\n" + exitCodesHelp,
		Example: `  signetctl ca confirm --signer kubernetes.io/kubelet-serving --cluster prod --anchor kubelet-certificate-authority \
    --reason "kube-apiserver restarted with the bundle on all three control-plane nodes"`,
	})
	addSignerFlag(c.cmd, &signer)
	c.cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster (its watcher's clusterName)")
	c.cmd.Flags().StringVar(&anchor, "anchor", "", "where the CA is now trusted: kubelet-certificate-authority")
	c.cmd.Flags().StringVar(&reason, "reason", "", "how you checked (`text`, recorded in the ledger)")
	for _, f := range []string{"cluster", "anchor", "reason"} {
		_ = c.cmd.MarkFlagRequired(f)
	}
	c.cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req := &signetv1.ConfirmTrustRequest{SignerName: signer, Cluster: cluster, Anchor: anchor, Reason: reason}
		var resp *signetv1.ConfirmTrustResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.ConfirmTrust(ctx, req)
			return err
		}); err != nil {
			return err
		}
		return c.done(resp, resp.GetAuthority(), fmt.Sprintf("confirmed that cluster %s trusts the staged CA of %s in %s", cluster, signer, anchor))
	}
	return c.cmd
}

// caStageCommand is "signetctl ca stage".
func caStageCommand() *cobra.Command {
	var signer, key, certFile, chainFile string
	c := newRotateCmd(&cobra.Command{
		Use:   "stage --signer NAME --key URI --cert FILE [--intermediates FILE]",
		Short: "Stage a signer's next CA (published, not yet issuing); admin",
		Long: `Stages the signer's next CA: the server opens the key URI (on its host), checks it matches the
certificate, and publishes the certificate in the signer's trust bundle; the active CA keeps
issuing. Watch 'signetctl ca status' until every cluster has published it and the propagation
delay has passed, then 'signetctl ca activate'.

` + rotateAdminHelp + "\n\n" + exitCodesHelp,
		Example: `  signetctl ca stage --signer example.com/workloads --key 'tpm:blob=/var/lib/signet/workloads-2.tpmkey' --cert workloads-2.crt`,
	})
	addSignerFlag(c.cmd, &signer)
	c.cmd.Flags().StringVar(&key, "key", "", "the new CA key's `URI` as the server opens it (file path, pkcs11: with pin-source, tpm:)")
	c.cmd.Flags().StringVar(&certFile, "cert", "", "PEM `file` of the new CA certificate")
	c.cmd.Flags().StringVar(&chainFile, "intermediates", "", "PEM `file` of certificates appended to every chain the CA issues")
	_ = c.cmd.MarkFlagRequired("key")
	_ = c.cmd.MarkFlagRequired("cert")
	c.cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := c.out.check(cmd); err != nil {
			return err
		}
		if err := c.conn.resolve(); err != nil {
			return err
		}
		cert, certPEM, err := readCACert(certFile)
		if err != nil {
			return inputError("%v", err)
		}
		req := &signetv1.StageCARequest{SignerName: signer, KeyUri: key, CertificatePem: string(certPEM)}
		if chainFile != "" {
			chain, err := readCertificates(chainFile, "--intermediates")
			if err != nil {
				return inputError("%v", err)
			}
			req.IntermediatesPem = string(chain)
		}
		var resp *signetv1.StageCAResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.StageCA(ctx, req)
			return err
		}); err != nil {
			return err
		}
		return c.done(resp, resp.GetAuthority(), fmt.Sprintf("staged CA %s (%s) for %s: published, not issuing yet",
			shortHex(fingerprint(cert.Raw)), cert.Subject, signer))
	}
	return c.cmd
}

// caActivateCommand is "signetctl ca activate".
func caActivateCommand() *cobra.Command {
	var (
		signer string
		f      forceFlags
	)
	c := newRotateCmd(&cobra.Command{
		Use:   "activate --signer NAME [--force --reason TEXT]",
		Short: "Make the staged CA the one that issues, once every cluster has it; admin",
		Long: `Makes the signer's staged CA the one that issues; the active CA becomes retired (still
published). The server refuses until every registered cluster has published the staged CA and
the signer's minimum propagation delay has passed. --force skips that gate: clusters that have
not published the new CA will reject the certificates it issues until they do. It needs
--reason, which is logged and recorded in the ledger.

` + rotateAdminHelp + "\n\n" + exitCodesHelp,
		Example: `  signetctl ca activate --signer example.com/workloads
  signetctl ca activate --signer example.com/workloads --force --reason "incident 7: cluster prod-us is gone"`,
	})
	addSignerFlag(c.cmd, &signer)
	f.register(c.cmd, "the propagation gate (every cluster published the staged CA, the delay passed)")
	c.cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.check(cmd); err != nil {
			return err
		}
		req := &signetv1.ActivateCARequest{SignerName: signer, Force: f.force, Reason: f.reason}
		var resp *signetv1.ActivateCAResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.ActivateCA(ctx, req)
			return err
		}); err != nil {
			return err
		}
		what := "activated the staged CA of " + signer
		for _, ca := range resp.GetAuthority().GetCas() {
			if a := ca.GetAnchor(); a.GetState() == signetv1.AnchorState_ANCHOR_STATE_ACTIVE {
				what = fmt.Sprintf("activated CA %s (%s) of %s: it issues now", shortHex(a.GetFingerprint()), a.GetSubject(), signer)
				break
			}
		}
		if f.force {
			what += " (forced: " + f.reason + ")"
		}
		return c.done(resp, resp.GetAuthority(), what)
	}
	return c.cmd
}

// caRetireCommand is "signetctl ca retire".
func caRetireCommand() *cobra.Command {
	var (
		signer, certFile, serial, fp string
		f                            forceFlags
	)
	c := newRotateCmd(&cobra.Command{
		Use:   "retire --signer NAME (--cert FILE | --serial HEX | --fingerprint HEX) [--force --reason TEXT]",
		Short: "Take a retired CA out of the trust bundle, once its leaves expired; admin",
		Long: `Takes a retired (or staged) CA out of the signer's trust bundle. The server refuses while a
leaf the CA signed can still be valid. --force skips that check: those leaves stop verifying in
every cluster that picks up the new bundle. It needs --reason, which is logged and recorded in
the ledger. --cert names the CA by the SHA-256 fingerprint of the certificate in FILE.

` + rotateAdminHelp + "\n\n" + exitCodesHelp,
		Example: `  signetctl ca retire --signer example.com/workloads --serial 1f
  signetctl ca retire --signer example.com/workloads --cert old.crt --force --reason "key compromise"`,
	})
	addSignerFlag(c.cmd, &signer)
	c.cmd.Flags().StringVar(&certFile, "cert", "", "PEM `file` of the CA certificate to retire")
	c.cmd.Flags().StringVar(&serial, "serial", "", "the CA certificate's serial number in `hex` (colons allowed)")
	c.cmd.Flags().StringVar(&fp, "fingerprint", "", "the CA certificate's SHA-256 fingerprint in `hex` (colons allowed)")
	f.register(c.cmd, "the check that no leaf of the CA can still be valid")
	c.cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if n := countSet(certFile, serial, fp); n != 1 {
			return usageError(cmd, "name the CA by exactly one of --cert, --serial and --fingerprint (%d given)", n)
		}
		if err := f.check(cmd); err != nil {
			return err
		}
		req := &signetv1.RetireCARequest{SignerName: signer, Force: f.force, Reason: f.reason}
		var err error
		switch {
		case certFile != "":
			var cert *x509.Certificate
			if cert, _, err = readCACert(certFile); err != nil {
				return inputError("%v", err)
			}
			req.Fingerprint = fingerprint(cert.Raw)
		case serial != "":
			if req.SerialNumber, err = normalizeSerial(serial); err != nil {
				return usageError(cmd, "%v", err)
			}
		default:
			if req.Fingerprint, err = normalizeFingerprint(fp); err != nil {
				return usageError(cmd, "%v", err)
			}
		}
		var resp *signetv1.RetireCAResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.RetireCA(ctx, req)
			return err
		}); err != nil {
			return err
		}
		named := "fingerprint " + shortHex(req.GetFingerprint())
		if req.GetSerialNumber() != "" {
			named = "serial " + req.GetSerialNumber()
		}
		what := fmt.Sprintf("retired CA %s of %s: out of the trust bundle", named, signer)
		if f.force {
			what += " (forced: " + f.reason + ")"
		}
		return c.done(resp, resp.GetAuthority(), what)
	}
	return c.cmd
}

// caStatusCommand is "signetctl ca status".
func caStatusCommand() *cobra.Command {
	var signers []string
	c := newRotateCmd(&cobra.Command{
		Use:   "status [--signer NAME ...]",
		Short: "Show signers' CAs, what their clusters published, and the rotation gates; admin",
		Long: `Shows each signer's CAs (state, since when and by whom, subject, serial, fingerprint, key, the
latest NotAfter of a leaf it signed, whether it may be retired), the clusters that reported its
trust bundle (registered, bundle hash, when they published the staged CA, last report), and
whether the staged CA may be activated: ready, or what blocks it and from when time alone
will not. Without --signer: every signer this client administers.

` + rotateAdminHelp + "\n\n" + exitCodesHelp,
		Example: `  signetctl ca status --signer example.com/workloads
  signetctl ca status -o yaml`,
	})
	c.cmd.Flags().StringArrayVar(&signers, "signer", nil, "a signer's `name` (repeatable; default: every signer this client administers)")
	c.cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if slices.Contains(signers, "") {
			return usageError(cmd, "--signer: empty signer name")
		}
		var resp *signetv1.GetAuthorityResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.GetAuthority(ctx, &signetv1.GetAuthorityRequest{SignerNames: signers})
			return err
		}); err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if !c.out.text() {
			return c.out.print(w, resp)
		}
		if len(resp.GetSigners()) == 0 {
			fmt.Fprintln(w, "no signers: this client administers none")
			return nil
		}
		for i, a := range resp.GetSigners() {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeAuthority(w, a)
		}
		return nil
	}
	return c.cmd
}

// countSet counts the non-empty values.
func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// readCertificates reads the PEM file path (named by flag in errors), which must hold one or
// more CERTIFICATE blocks and nothing else (a private key is never sent), each a parsable
// certificate, and returns them re-encoded.
func readCertificates(path, flag string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", flag, err)
	}
	var out []byte
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s %s: block %d is a %s; only CERTIFICATE blocks are accepted", flag, path, n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("%s %s: certificate %d: %w", flag, path, n, err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %s holds no PEM CERTIFICATE", flag, path)
	}
	return out, nil
}

// readCACert reads the --cert file, which must hold exactly one certificate, and returns it
// with its PEM.
func readCACert(path string) (*x509.Certificate, []byte, error) {
	data, err := readCertificates(path, "--cert")
	if err != nil {
		return nil, nil, err
	}
	block, rest := pem.Decode(data)
	if len(rest) > 0 {
		return nil, nil, fmt.Errorf("--cert %s holds more than one certificate; give the CA's alone (its chain goes in --intermediates)", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert %s: %w", path, err)
	}
	return cert, data, nil
}

// fingerprint is the lower-case hex SHA-256 of a certificate's DER, as the server names CAs.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// normalizeFingerprint accepts a SHA-256 fingerprint in hex, either case, with or without
// colons (as openssl x509 -fingerprint -sha256 prints it).
func normalizeFingerprint(v string) (string, error) {
	h := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(v), ":", ""))
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("--fingerprint %q is not a SHA-256 fingerprint (64 hex digits)", v)
	}
	return h, nil
}

// normalizeSerial accepts a serial number in hex, either case, with or without colons or a
// 0x prefix, and returns it in lower-case hex without leading zeros.
func normalizeSerial(v string) (string, error) {
	h := strings.TrimPrefix(strings.ToLower(strings.ReplaceAll(strings.TrimSpace(v), ":", "")), "0x")
	n, ok := new(big.Int).SetString(h, 16)
	if !ok || h == "" || strings.ContainsAny(h, "+-") {
		return "", fmt.Errorf("--serial %q is not a hexadecimal serial number", v)
	}
	return n.Text(16), nil
}
