package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/nodeagent"
)

// newServingCmd obtains the kubelet's serving certificate through attestation, into the cache
// directory, where the kubelet's --tls-cert-file and --tls-private-key-file point.
func newServingCmd() *cobra.Command {
	var (
		f   nodeFlags
		dns []string
		ips []net.IP
	)
	cmd := &cobra.Command{
		Use:   "serving --serving-signer-name NAME --dns NAME --ip ADDRESS ...",
		Short: "Obtain or renew the kubelet's serving certificate through TPM attestation",
		Long: "Writes the kubelet's serving certificate and key to the cache directory (serving.crt, serving.key): " +
			"the cached one stays until its renewal point or until the names asked for change; else a new one is obtained through TPM attestation, " +
			"asked for as the node with its client certificate (obtained first, if need be), for the attested serving signer " +
			"(profile kubelet-serving-tpm, which accepts only the node's own addresses). Run it at boot and from a timer; " +
			"point the kubelet's --tls-cert-file and --tls-private-key-file at the printed paths.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.servingSignerName == "" {
				return fmt.Errorf("%w: --serving-signer-name is required", errUsage)
			}
			a, closeTPM, err := f.agent()
			if err != nil {
				return err
			}
			defer closeTPM()
			ctx, cancel := contextWithTimeout(cmd, f.timeout)
			defer cancel()
			c, err := a.Serving(ctx, dns, ips)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\tvalid until %s, renews from %s\n",
				nodeagent.CertFile(f.cacheDir, true), nodeagent.KeyFile(f.cacheDir, true), c.NotAfter.UTC().Format("2006-01-02T15:04:05Z"), c.RenewAt.UTC().Format("2006-01-02T15:04:05Z"))
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.servingSignerName, "serving-signer-name", "", "the attested serving signer, e.g. example.com/kubelet-serving-tpm (required)")
	cmd.Flags().StringSliceVar(&dns, "dns", nil, "a DNS name of the node (repeatable)")
	cmd.Flags().IPSliceVar(&ips, "ip", nil, "an IP address of the node (repeatable)")
	return cmd
}
