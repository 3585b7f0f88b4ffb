// Command signet-node is Signet's node agent (seed 004's kubelet authentication plugin): it
// obtains the kubelet's client certificate through TPM 2.0 attestation, verified by the
// signing server, and keeps it renewed. The kubelet runs it as a client-go exec credential
// plugin from its kubeconfig:
//
//	users:
//	- name: kubelet
//	  user:
//	    exec:
//	      apiVersion: client.authentication.k8s.io/v1
//	      command: /usr/local/bin/signet-node
//	      args: [credential, --tpm, /dev/tpmrm0,
//	             --attest-url, https://signet.example.com:8444, --attest-ca, /etc/signet/server-ca.crt,
//	             --signer-name, example.com/kube-apiserver-client-kubelet-tpm,
//	             --bootstrap-kubeconfig, /etc/kubernetes/bootstrap-kubelet.conf]
//	      interactiveMode: Never
//
// `signet-node ek` prints the fingerprint of the TPM's endorsement key, for the signing
// server's allow-list. docs/attestation.md has the protocol and the setup.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "signet-node:", err)
		os.Exit(1)
	}
}

// newRoot builds the command line: credential, serving and ek.
func newRoot(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "signet-node",
		Short:         "Signet's node agent: the kubelet's client certificate through TPM attestation",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newCredentialCmd(), newServingCmd(), newEKCmd())
	return root
}

// errUsage marks a usage error.
var errUsage = errors.New("usage")
