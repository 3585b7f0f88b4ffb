package main

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/signet-pki/signet/internal/nodeagent"
	"github.com/signet-pki/signet/internal/tpmconn"
)

// nodeFlags are the settings of the agent.
type nodeFlags struct {
	tpm, attestURL, attestCA, nodeName, providerID, signerName string
	servingSignerName                                          string
	bootstrapKubeconfig, cacheDir                              string
	renewFraction                                              float64
	lifetime, timeout                                          time.Duration
}

func (f *nodeFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.tpm, "tpm", "/dev/tpmrm0", "the TPM: a device (/dev/tpmrm0) or a swtpm unix socket")
	fs.StringVar(&f.attestURL, "attest-url", "", "the signing server's attestation endpoint, https://host:port (required)")
	fs.StringVar(&f.attestCA, "attest-ca", "", "PEM file of the CA that issued the signing server's TLS certificate (required)")
	fs.StringVar(&f.nodeName, "node-name", "", "the node's name (default: the host name, lower-cased)")
	fs.StringVar(&f.providerID, "provider-id", "", "the node's provider ID, carried in the request (default: tpm://<node name>)")
	fs.StringVar(&f.signerName, "signer-name", "", "the attested signer, e.g. example.com/kube-apiserver-client-kubelet-tpm (required)")
	fs.StringVar(&f.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with the bootstrap credentials, for a node without a valid certificate (required)")
	fs.StringVar(&f.cacheDir, "cache-dir", "/var/lib/signet-node", "where the current certificate and key are kept (0700)")
	fs.Float64Var(&f.renewFraction, "renew-fraction", nodeagent.DefaultRenewFraction, "fraction of a certificate's life after which it is renewed")
	fs.DurationVar(&f.lifetime, "lifetime", 0, "certificate lifetime to ask for (default: the signer's maximum)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long to wait for approval and signing")
}

// agent builds the agent from the flags.
func (f *nodeFlags) agent() (*nodeagent.Agent, func(), error) {
	for name, v := range map[string]string{"--attest-url": f.attestURL, "--attest-ca": f.attestCA, "--signer-name": f.signerName, "--bootstrap-kubeconfig": f.bootstrapKubeconfig} {
		if v == "" {
			return nil, nil, fmt.Errorf("%w: %s is required", errUsage, name)
		}
	}
	if f.renewFraction <= 0 || f.renewFraction >= 1 {
		return nil, nil, fmt.Errorf("%w: --renew-fraction %v is not between 0 and 1 (exclusive)", errUsage, f.renewFraction)
	}
	roots, err := readRoots(f.attestCA)
	if err != nil {
		return nil, nil, err
	}
	bootstrap, err := clientcmd.BuildConfigFromFlags("", f.bootstrapKubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("reading --bootstrap-kubeconfig: %w", err)
	}
	node := f.nodeName
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return nil, nil, fmt.Errorf("reading the host name (set --node-name): %w", err)
		}
		node = strings.ToLower(node)
	}
	provider := f.providerID
	if provider == "" {
		provider = "tpm://" + node
	}
	tpm, err := tpmconn.Open(f.tpm)
	if err != nil {
		return nil, nil, err
	}
	a, err := nodeagent.New(nodeagent.Config{
		TPM: tpm, AttestURL: f.attestURL, AttestRoots: roots, NodeName: node, ProviderID: provider, SignerName: f.signerName,
		ServingSignerName: f.servingSignerName,
		Bootstrap:         bootstrap, CacheDir: f.cacheDir, RenewFraction: f.renewFraction, Lifetime: f.lifetime,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		_ = tpm.Close()
		return nil, nil, err
	}
	return a, func() { _ = tpm.Close() }, nil
}

func readRoots(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --attest-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--attest-ca %s holds no PEM certificate", path)
	}
	return pool, nil
}

// newCredentialCmd is the exec credential plugin: it prints an ExecCredential with the
// node's client certificate, its expiration the renewal point.
func newCredentialCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "credential",
		Short: "Print the kubelet's client credential (client-go exec credential plugin, client.authentication.k8s.io/v1)",
		Long: "Prints an ExecCredential holding the node's client certificate and key: the cached one until its renewal point " +
			"(--renew-fraction of its life), else a new one obtained through TPM attestation, approved and signed. " +
			"When a renewal fails and the current certificate is still valid, it is printed with a renewal point after a back-off.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, closeTPM, err := f.agent()
			if err != nil {
				return err
			}
			defer closeTPM()
			ctx, cancel := contextWithTimeout(cmd, f.timeout)
			defer cancel()
			c, err := a.Credential(ctx)
			if err != nil {
				return err
			}
			renew := metav1.NewTime(c.RenewAt)
			return json.NewEncoder(cmd.OutOrStdout()).Encode(clientauthv1.ExecCredential{
				TypeMeta: metav1.TypeMeta{APIVersion: clientauthv1.SchemeGroupVersion.String(), Kind: "ExecCredential"},
				Status: &clientauthv1.ExecCredentialStatus{ExpirationTimestamp: &renew,
					ClientCertificateData: string(c.CertPEM), ClientKeyData: string(c.KeyPEM)},
			})
		},
	}
	f.register(cmd)
	return cmd
}
