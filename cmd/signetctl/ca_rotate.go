package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
)

// The CA rotation commands: ca stage, ca activate, ca retire and ca status call the server's
// AuthorityService (admin clients only). Exit codes: 0 done, 1 the server refused (its
// message and reason are printed), 2 usage error, unreadable file, or no answer from the
// server.

const rotateExitCodes = `
Needs a client certificate whose identity has admin: true in the server's clients, for the
signer. Exit codes: 0 done, 1 the server refused (its message and reason are printed), 2 usage
error, unreadable file, or no answer from the server.

Flags:`

const caStageUsage = `Usage: signetctl ca stage --signer NAME --key URI --cert FILE [--intermediates FILE] [connection flags] [-o json]

Stages the signer's next CA: the server opens the key URI (on its host), checks it matches the
certificate, and publishes the certificate in the signer's trust bundle; the active CA keeps
issuing. Watch 'signetctl ca status' until every cluster has published it and the propagation
delay has passed, then 'signetctl ca activate'.
` + rotateExitCodes

const caActivateUsage = `Usage: signetctl ca activate --signer NAME [--force --reason TEXT] [connection flags] [-o json]

Makes the signer's staged CA the one that issues; the active CA becomes retired (still
published). The server refuses until every registered cluster has published the staged CA and
the signer's minimum propagation delay has passed. --force skips that gate: clusters that have
not published the new CA will reject the certificates it issues until they do. It needs
--reason, which is logged and recorded in the ledger.
` + rotateExitCodes

const caRetireUsage = `Usage: signetctl ca retire --signer NAME (--cert FILE | --serial HEX | --fingerprint HEX) [--force --reason TEXT] [connection flags] [-o json]

Takes a retired (or staged) CA out of the signer's trust bundle. The server refuses while a
leaf the CA signed can still be valid. --force skips that check: those leaves stop verifying in
every cluster that picks up the new bundle. It needs --reason, which is logged and recorded in
the ledger. --cert names the CA by the SHA-256 fingerprint of the certificate in FILE.
` + rotateExitCodes

const caStatusUsage = `Usage: signetctl ca status [--signer NAME ...] [connection flags] [-o json]

Shows each signer's CAs (state, since when and by whom, subject, serial, fingerprint, key, the
latest NotAfter of a leaf it signed, whether it may be retired), the clusters that reported its
trust bundle (registered, bundle hash, when they published the staged CA, last report), and
whether the staged CA may be activated: ready, or what blocks it and from when time alone
will not. Without --signer: every signer this client administers.
` + rotateExitCodes

// rotateCommands are the ca subcommands that call the AuthorityService.
func rotateCommands() []command {
	return []command{
		{name: "stage", summary: "stage a signer's next CA (published, not yet issuing); admin", run: runCAStage},
		{name: "activate", summary: "make the staged CA the one that issues, once every cluster has it; admin", run: runCAActivate},
		{name: "retire", summary: "take a retired CA out of the trust bundle, once its leaves expired; admin", run: runCARetire},
		{name: "status", summary: "show signers' CAs, what their clusters published, and the rotation gates; admin", run: runCAStatus},
	}
}

// rotateCmd holds what every rotation command shares: its name, flags, streams, and the
// connection and output flags.
type rotateCmd struct {
	prog   string
	fs     *flag.FlagSet
	s      streams
	conn   connFlags
	output string
}

// newRotateCmd makes the flag set of prog with the connection and output flags; usage is
// printed before the flag defaults.
func newRotateCmd(prog, usage string, s streams) *rotateCmd {
	c := &rotateCmd{prog: prog, s: s, fs: flag.NewFlagSet(prog, flag.ContinueOnError)}
	c.fs.SetOutput(s.err)
	c.conn.register(c.fs)
	const outputHelp = "`format`: text, or json (the response as protojson)"
	c.fs.StringVar(&c.output, "output", "text", outputHelp)
	c.fs.StringVar(&c.output, "o", "text", "shorthand for --output")
	c.fs.Usage = func() {
		fmt.Fprintln(c.fs.Output(), usage)
		c.fs.PrintDefaults()
	}
	return c
}

// parse parses args, refuses positional arguments and a bad --output, and resolves the
// connection flags; it returns the exit code when the command must stop (-1 otherwise).
func (c *rotateCmd) parse(args []string) int {
	pos, err := parseInterspersed(c.fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 0 {
		return c.usageErr("unexpected argument %q", pos[0])
	}
	if err := outputFormat(c.output); err != nil {
		return c.usageErr("%v", err)
	}
	if err := c.conn.resolve(); err != nil {
		return c.usageErr("%v", err)
	}
	return -1
}

// usageErr prints a usage error and returns 2.
func (c *rotateCmd) usageErr(format string, a ...any) int {
	fmt.Fprintf(c.s.err, "%s: %s\n", c.prog, fmt.Sprintf(format, a...))
	fmt.Fprintf(c.s.err, "Run '%s -h' for usage.\n", c.prog)
	return 2
}

// fail prints err and returns 2.
func (c *rotateCmd) fail(err error) int {
	fmt.Fprintf(c.s.err, "%s: %v\n", c.prog, err)
	return 2
}

// call connects to the server and runs do with the client; it returns the exit code of a
// failed connection or call (see callFailed), -1 when do succeeded.
func (c *rotateCmd) call(do func(*signerclient.Client) error) int {
	client, err := signerclient.New(signerclient.Config{
		Address:    c.conn.server,
		CAFile:     c.conn.tlsCA,
		CertFile:   c.conn.tlsCert,
		KeyFile:    c.conn.tlsKey,
		ServerName: c.conn.serverName,
		RPCTimeout: c.conn.timeout,
	})
	if err != nil {
		return c.fail(err)
	}
	defer client.Close()
	if err := do(client); err != nil {
		return c.callFailed(err)
	}
	return -1
}

// callFailed reports a failed call: a refusal by the server (a status carrying a signet.dev
// reason) as its message and reason name, exit 1; anything else (no answer, a status without
// reason) as describeRPCError does, exit 2.
func (c *rotateCmd) callFailed(err error) int {
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) || carrier.GRPCStatus() == nil {
		return c.fail(err)
	}
	st := carrier.GRPCStatus()
	if reason := signetReason(st); reason != "" {
		fmt.Fprintf(c.s.err, "%s: refused (%s): %s\n", c.prog, reason, st.Message())
		return 1
	}
	fmt.Fprintf(c.s.err, "%s: %s\n", c.prog, describeRPCError(c.conn.server, st.Err()))
	return 2
}

// signetReason is the reason of st's first ErrorInfo of domain signet.dev, e.g.
// "ROTATION_REFUSED"; empty when there is none.
func signetReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == signetv1.ErrorDomain && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return ""
}

// done prints the response of a rotation step: protojson with -o json, else the line what
// followed by the signer's CA set. It returns the exit code.
func (c *rotateCmd) done(resp proto.Message, a *signetv1.SignerAuthority, what string) int {
	if c.output == "json" {
		if err := writeJSON(c.s.out, resp); err != nil {
			return c.fail(err)
		}
		return 0
	}
	fmt.Fprintln(c.s.out, what)
	fmt.Fprintln(c.s.out)
	writeAuthority(c.s.out, a)
	return 0
}

// forceFlags are --force and --reason of ca activate and ca retire.
type forceFlags struct {
	force  bool
	reason string
}

func (f *forceFlags) register(fs *flag.FlagSet, skips string) {
	fs.BoolVar(&f.force, "force", false, "skip "+skips+"; needs --reason")
	fs.StringVar(&f.reason, "reason", "", "why --force is used (`text`, recorded in the ledger)")
}

// check refuses --force without a reason, and a reason without --force.
func (f *forceFlags) check() error {
	f.reason = strings.TrimSpace(f.reason)
	switch {
	case f.force && f.reason == "":
		return errors.New("--force needs --reason TEXT: say why the gate is skipped (it is recorded in the ledger)")
	case !f.force && f.reason != "":
		return errors.New("--reason goes with --force only")
	}
	return nil
}

// runCAStage is "signetctl ca stage".
func runCAStage(ctx context.Context, s streams, args []string) int {
	c := newRotateCmd("signetctl ca stage", caStageUsage, s)
	signer := c.fs.String("signer", "", "the signer's `name`")
	key := c.fs.String("key", "", "the new CA key's `URI` as the server opens it (file path, pkcs11: with pin-source, tpm:)")
	certFile := c.fs.String("cert", "", "PEM `file` of the new CA certificate")
	chainFile := c.fs.String("intermediates", "", "PEM `file` of certificates appended to every chain the CA issues")
	if code := c.parse(args); code >= 0 {
		return code
	}
	switch {
	case *signer == "":
		return c.usageErr("missing --signer")
	case *key == "":
		return c.usageErr("missing --key: the URI of the new CA's key, as the server opens it")
	case *certFile == "":
		return c.usageErr("missing --cert: the new CA's certificate")
	}
	cert, certPEM, err := readCACert(*certFile)
	if err != nil {
		return c.fail(err)
	}
	req := &signetv1.StageCARequest{SignerName: *signer, KeyUri: *key, CertificatePem: string(certPEM)}
	if *chainFile != "" {
		chain, err := readCertificates(*chainFile, "--intermediates")
		if err != nil {
			return c.fail(err)
		}
		req.IntermediatesPem = string(chain)
	}
	var resp *signetv1.StageCAResponse
	if code := c.call(func(client *signerclient.Client) (err error) {
		resp, err = client.StageCA(ctx, req)
		return err
	}); code >= 0 {
		return code
	}
	return c.done(resp, resp.GetAuthority(), fmt.Sprintf("staged CA %s (%s) for %s: published, not issuing yet",
		shortHex(fingerprint(cert.Raw)), cert.Subject, *signer))
}

// runCAActivate is "signetctl ca activate".
func runCAActivate(ctx context.Context, s streams, args []string) int {
	c := newRotateCmd("signetctl ca activate", caActivateUsage, s)
	signer := c.fs.String("signer", "", "the signer's `name`")
	var f forceFlags
	f.register(c.fs, "the propagation gate (every cluster published the staged CA, the delay passed)")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *signer == "" {
		return c.usageErr("missing --signer")
	}
	if err := f.check(); err != nil {
		return c.usageErr("%v", err)
	}
	req := &signetv1.ActivateCARequest{SignerName: *signer, Force: f.force, Reason: f.reason}
	var resp *signetv1.ActivateCAResponse
	if code := c.call(func(client *signerclient.Client) (err error) {
		resp, err = client.ActivateCA(ctx, req)
		return err
	}); code >= 0 {
		return code
	}
	what := "activated the staged CA of " + *signer
	for _, ca := range resp.GetAuthority().GetCas() {
		if a := ca.GetAnchor(); a.GetState() == signetv1.AnchorState_ANCHOR_STATE_ACTIVE {
			what = fmt.Sprintf("activated CA %s (%s) of %s: it issues now", shortHex(a.GetFingerprint()), a.GetSubject(), *signer)
			break
		}
	}
	if f.force {
		what += " (forced: " + f.reason + ")"
	}
	return c.done(resp, resp.GetAuthority(), what)
}

// runCARetire is "signetctl ca retire".
func runCARetire(ctx context.Context, s streams, args []string) int {
	c := newRotateCmd("signetctl ca retire", caRetireUsage, s)
	signer := c.fs.String("signer", "", "the signer's `name`")
	certFile := c.fs.String("cert", "", "PEM `file` of the CA certificate to retire")
	serial := c.fs.String("serial", "", "the CA certificate's serial number in `hex` (colons allowed)")
	fp := c.fs.String("fingerprint", "", "the CA certificate's SHA-256 fingerprint in `hex` (colons allowed)")
	var f forceFlags
	f.register(c.fs, "the check that no leaf of the CA can still be valid")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *signer == "" {
		return c.usageErr("missing --signer")
	}
	if n := countSet(*certFile, *serial, *fp); n != 1 {
		return c.usageErr("name the CA by exactly one of --cert, --serial and --fingerprint (%d given)", n)
	}
	if err := f.check(); err != nil {
		return c.usageErr("%v", err)
	}
	req := &signetv1.RetireCARequest{SignerName: *signer, Force: f.force, Reason: f.reason}
	var err error
	switch {
	case *certFile != "":
		var cert *x509.Certificate
		if cert, _, err = readCACert(*certFile); err != nil {
			return c.fail(err)
		}
		req.Fingerprint = fingerprint(cert.Raw)
	case *serial != "":
		if req.SerialNumber, err = normalizeSerial(*serial); err != nil {
			return c.usageErr("%v", err)
		}
	default:
		if req.Fingerprint, err = normalizeFingerprint(*fp); err != nil {
			return c.usageErr("%v", err)
		}
	}
	var resp *signetv1.RetireCAResponse
	if code := c.call(func(client *signerclient.Client) (err error) {
		resp, err = client.RetireCA(ctx, req)
		return err
	}); code >= 0 {
		return code
	}
	named := "fingerprint " + shortHex(req.GetFingerprint())
	if req.GetSerialNumber() != "" {
		named = "serial " + req.GetSerialNumber()
	}
	what := fmt.Sprintf("retired CA %s of %s: out of the trust bundle", named, *signer)
	if f.force {
		what += " (forced: " + f.reason + ")"
	}
	return c.done(resp, resp.GetAuthority(), what)
}

// runCAStatus is "signetctl ca status".
func runCAStatus(ctx context.Context, s streams, args []string) int {
	c := newRotateCmd("signetctl ca status", caStatusUsage, s)
	var signers []string
	c.fs.Func("signer", "a signer's `name` (repeatable; default: every signer this client administers)", func(v string) error {
		if v == "" {
			return errors.New("empty signer name")
		}
		signers = append(signers, v)
		return nil
	})
	if code := c.parse(args); code >= 0 {
		return code
	}
	var resp *signetv1.GetAuthorityResponse
	if code := c.call(func(client *signerclient.Client) (err error) {
		resp, err = client.GetAuthority(ctx, signers...)
		return err
	}); code >= 0 {
		return code
	}
	if c.output == "json" {
		if err := writeJSON(s.out, resp); err != nil {
			return c.fail(err)
		}
		return 0
	}
	if len(resp.GetSigners()) == 0 {
		fmt.Fprintln(s.out, "no signers: this client administers none")
		return 0
	}
	for i, a := range resp.GetSigners() {
		if i > 0 {
			fmt.Fprintln(s.out)
		}
		writeAuthority(s.out, a)
	}
	return 0
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
