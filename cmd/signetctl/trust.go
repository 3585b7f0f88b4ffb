package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// trustCommand is "signetctl trust SIGNER": the signer's trust anchors.
func trustCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust SIGNER",
		Short: "Fetch a signer's trust anchors (its CA certificates, PEM)",
		Long: `Fetches the signer's trust bundle (GetTrustAnchors): the certificates of its active, staged and
retired CAs, the ones its ClusterTrustBundle publishes. Prints the PEM bundle on standard output
(one line per anchor, its state and subject, on standard error), or with -o json|yaml the whole
answer: the bundle, each anchor's state, since when, fingerprint and serial, and the bundle's
hash.

` + exitCodesHelp,
		Example: `  signetctl trust example.com/serving > serving-ca.pem
  signetctl trust signet.dev/dev --dev-state-dir .signet-dev -o json`,
		Args: cobra.ExactArgs(1),
	}
	conn := addConnFlags(cmd)
	cmd.ValidArgsFunction = completeSigners(conn)
	out := addOutputFlag(cmd, "the GetTrustAnchors response")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		cc, err := conn.dial()
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := conn.callContext(cmd.Context())
		defer cancel()
		resp, err := signetv1.NewSignerServiceClient(cc).GetTrustAnchors(ctx, &signetv1.GetTrustAnchorsRequest{SignerName: args[0]})
		if err != nil {
			return conn.callError(err)
		}
		if resp.GetTrustAnchorsPem() == "" {
			return inputError("the server answered without a trust anchor for %s", args[0])
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			return out.print(w, resp)
		}
		if _, err := io.WriteString(w, resp.GetTrustAnchorsPem()); err != nil {
			return err
		}
		for _, a := range resp.GetAnchors() {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s, serial %s, SHA-256 %s\n", stateName(a.GetState()), orDash(a.GetSubject()),
				orDash(a.GetSerialNumber()), orDash(shortHex(strings.ToLower(a.GetFingerprint()))))
		}
		return nil
	}
	return cmd
}
