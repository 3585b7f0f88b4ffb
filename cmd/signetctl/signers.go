package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// signersCommand is "signetctl signers": what each signer the client may use issues.
func signersCommand() command {
	return command{name: "signers", summary: "describe the signers the server offers this client (the KEP's seven points)", run: runSigners}
}

// runSigners calls ListSigners and prints every signer. Exit 0 on success, 1 when the call
// fails, 2 on a usage error.
func runSigners(ctx context.Context, s streams, args []string) int {
	const prog = "signetctl signers"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(s.err)
	var conn connFlags
	conn.register(fs)
	output := fs.String("output", "text", "`format`: text, or json (the ListSigners response as protojson)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: signetctl signers [--server HOST:PORT] (--tls-ca FILE --tls-cert FILE --tls-key FILE | --dev-state-dir DIR) [--output json]\n\nDescribes every signer the server lets this client use: profile, maximum lifetime, key types and\nthe seven points the Kubernetes certificates KEP asks each signer to document.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(s.err, "%s: unexpected argument %q\n", prog, pos[0])
		return 2
	}
	if err := outputFormat(*output); err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 2
	}
	if err := conn.resolve(); err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 2
	}
	client, closer, err := conn.dial()
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 2
	}
	defer closer.Close()
	callCtx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := client.ListSigners(callCtx, &signetv1.ListSignersRequest{})
	if err != nil {
		fmt.Fprintf(s.err, "%s: %s\n", prog, describeRPCError(conn.server, err))
		return 1
	}
	if *output == "json" {
		if err := writeJSON(s.out, resp); err != nil {
			fmt.Fprintf(s.err, "%s: %v\n", prog, err)
			return 1
		}
		return 0
	}
	if len(resp.GetSigners()) == 0 {
		fmt.Fprintln(s.out, "no signers: the server offers this client none")
		return 0
	}
	width := terminalWidth(s.out)
	for i, sg := range resp.GetSigners() {
		if i > 0 {
			fmt.Fprintln(s.out)
		}
		writeSigner(s.out, sg, width)
	}
	return 0
}

// signerLabelWidth fits the longest label, "Permitted extensions:", plus a space.
const signerLabelWidth = 23

// lintFields describes a signer's lint gate: how many lints from which sources, then the
// excluded lints and the findings the profile accepts, grouped by reason.
func lintFields(g *signetv1.LintGate) []struct{ label, value string } {
	if g == nil {
		return []struct{ label, value string }{{"Lint gate", "off (lint.disabled): certificates are signed unlinted"}}
	}
	return []struct{ label, value string }{
		{"Lint gate", fmt.Sprintf("%d lints in force from %s (--output json lists them); any error refuses the certificate",
			len(g.GetLints()), strings.Join(g.GetSources(), ", "))},
		{"Lints excluded", byReason(g.GetExcluded())},
		{"Accepted findings", byReason(g.GetAccepted())},
	}
}

// byReason lists lint rules grouped by reason, in first-seen order: "a, b: reason; c: other".
func byReason(rules []*signetv1.LintRule) string {
	var reasons []string
	names := map[string][]string{}
	for _, r := range rules {
		if _, ok := names[r.GetReason()]; !ok {
			reasons = append(reasons, r.GetReason())
		}
		names[r.GetReason()] = append(names[r.GetReason()], r.GetName())
	}
	parts := make([]string, len(reasons))
	for i, reason := range reasons {
		parts[i] = strings.Join(names[reason], ", ") + ": " + reason
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// writeSigner prints one signer description as a block: the name, then one labelled field per
// line, values wrapped to width with continuation lines aligned under the value.
func writeSigner(w io.Writer, sg *signetv1.SignerDescription, width int) {
	fmt.Fprintln(w, sg.GetSignerName())
	maxLifetime := "unknown"
	if sg.GetMaxLifetime() != nil {
		maxLifetime = sg.GetMaxLifetime().AsDuration().String()
	}
	fields := []struct{ label, value string }{
		{"Profile", sg.GetProfile()},
		{"Max lifetime", maxLifetime},
		{"Key types", strings.Join(sg.GetKeyTypes(), ", ")},
		{"Trust distribution", sg.GetTrustDistribution()},
		{"Permitted subjects", sg.GetPermittedSubjects()},
		{"Permitted extensions", sg.GetPermittedExtensions()},
		{"Permitted key usages", sg.GetPermittedKeyUsages()},
		{"Expiration", sg.GetExpiration()},
		{"CA bit", sg.GetCaBit()},
		{"Extra PEM blocks", sg.GetExtraPemBlocks()},
	}
	fields = append(fields, lintFields(sg.GetLint())...)
	indent := 2 + signerLabelWidth
	for _, f := range fields {
		value := f.value
		if value == "" {
			value = "-"
		}
		writeWrapped(w, fmt.Sprintf("  %-*s", signerLabelWidth, f.label+":"), value, indent, width)
	}
}
