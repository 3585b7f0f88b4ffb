package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
	"github.com/signet-pki/signet/internal/tpmconn"
)

// newEKCmd prints the TPM's endorsement key fingerprint, for the server's allow-list.
func newEKCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ek",
		Short: "Print the fingerprint of the TPM's endorsement key (for attestation.ekAllowListFile) and whether it has a certificate",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tpm, err := tpmconn.Open(path)
			if err != nil {
				return err
			}
			defer tpm.Close()
			keys, err := nodetpm.New(tpm).Keys()
			if err != nil {
				return err
			}
			fp, err := attestation.EKFingerprint(keys.EKPublic)
			if err != nil {
				return err
			}
			cert := "no EK certificate (list the fingerprint in the server's attestation.ekAllowListFile)"
			if len(keys.EKCertificate) > 0 {
				cert = "EK certificate present (its manufacturer's root goes in attestation.ekRootsFile)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\t# %s\n", fp, cert)
			return err
		},
	}
	cmd.Flags().StringVar(&path, "tpm", "/dev/tpmrm0", "the TPM: a device (/dev/tpmrm0) or a swtpm unix socket")
	return cmd
}

// contextWithTimeout is the command's context, bounded by d.
func contextWithTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}
