package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// signersCommand is "signetctl signers": what each signer the client may use issues.
func signersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signers",
		Short: "Describe the signers the server offers this client (the KEP's seven points)",
		Long: `Describes every signer the server lets this client use: profile, maximum lifetime, key types, the
lint gate, and the seven points the Kubernetes certificates KEP asks each signer to document.

` + exitCodesHelp,
		Example: `  signetctl signers --dev-state-dir .signet-dev
  signetctl signers --server signet.example.com:8443 --tls-ca ca.crt --tls-cert me.crt --tls-key me.key -o yaml`,
		Args: cobra.NoArgs,
	}
	conn := addConnFlags(cmd)
	out := addOutputFlag(cmd, "the ListSigners response")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		resp, err := listSigners(cmd.Context(), conn)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			return out.print(w, resp)
		}
		if len(resp.GetSigners()) == 0 {
			fmt.Fprintln(w, "no signers: the server offers this client none")
			return nil
		}
		width := terminalWidth(w)
		for i, sg := range resp.GetSigners() {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeSigner(w, sg, width)
		}
		return nil
	}
	return cmd
}

// listSigners dials the server and calls ListSigners; errors are exit errors.
func listSigners(ctx context.Context, conn *connFlags) (*signetv1.ListSignersResponse, error) {
	cc, err := conn.dial()
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	callCtx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := signetv1.NewSignerServiceClient(cc).ListSigners(callCtx, &signetv1.ListSignersRequest{})
	if err != nil {
		return nil, conn.callError(err)
	}
	return resp, nil
}

// completeSigners completes a signer name with the signers the server offers this client,
// when the connection settings resolve and the server answers within a second; nothing
// otherwise (a completion never prints an error).
func completeSigners(conn *connFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if err := conn.resolve(); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		conn.settings.timeout = min(conn.settings.timeout, time.Second)
		resp, err := listSigners(cmd.Context(), conn)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, s := range resp.GetSigners() {
			if strings.HasPrefix(s.GetSignerName(), toComplete) {
				names = append(names, cobra.CompletionWithDesc(s.GetSignerName(), s.GetProfile()))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
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
