package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// attestCommand is the group of the TPM node attestation commands: forget.
func attestCommand() *cobra.Command {
	return groupCommand("attest",
		"Manage TPM node attestation on a running server (forget: clear a node's endorsement key binding)",
		`Manages TPM node attestation (docs/attestation.md) on a running server. The first endorsement
key seen for a node is bound to it (trust on first use); forget clears that binding, for a node
whose TPM was replaced or a name that is reused. Admin clients only.`,
		`  signetctl attest forget node-7 --signer example.com/kube-apiserver-client-kubelet-tpm --reason "board replaced, ticket 4711"`,
		attestForgetCommand())
}

// attestForgetCommand clears a node's binding (ForgetAttestationBinding).
func attestForgetCommand() *cobra.Command {
	var signer, reason string
	c := newRotateCmd(&cobra.Command{
		Use:   "forget NODE --signer NAME --reason TEXT",
		Short: "Clear the binding of a node to its TPM's endorsement key, so that its next attestation binds a new one; admin",
		Long: `Clears the binding of NODE to the endorsement key of the TPM that first attested as it (trust
on first use). The removal is recorded in the ledger (decision "unbound", with your identity and
--reason) before the binding goes; the node's next attestation binds the endorsement key it then
shows. Until then, requests of that node's old TPM are accepted again as a first use, so clear a
binding only for a node whose TPM you know was replaced, or a name you reuse.

` + rotateAdminHelp + ` --signer names an attested signer (profile kubelet-client-tpm) you administer.

` + exitCodesHelp,
		Example: `  signetctl attest forget node-7 --signer example.com/kube-apiserver-client-kubelet-tpm --reason "board replaced, ticket 4711"`,
	})
	c.cmd.Args = cobra.ExactArgs(1)
	addSignerFlag(c.cmd, &signer)
	c.cmd.Flags().StringVar(&reason, "reason", "", "why the binding goes, recorded in the ledger (required)")
	_ = c.cmd.MarkFlagRequired("reason")
	c.cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req := &signetv1.ForgetAttestationBindingRequest{SignerName: signer, Node: args[0], Reason: reason}
		var resp *signetv1.ForgetAttestationBindingResponse
		if err := c.call(func(ctx context.Context, client signetv1.AuthorityServiceClient) (err error) {
			resp, err = client.ForgetAttestationBinding(ctx, req)
			return err
		}); err != nil {
			return err
		}
		if !c.out.text() {
			return c.out.print(cmd.OutOrStdout(), resp)
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "cleared the binding of node %s to endorsement key %s (ledger record %d)\n", args[0], resp.GetEk(), resp.GetLedgerSeq())
		return err
	}
	return c.cmd
}
