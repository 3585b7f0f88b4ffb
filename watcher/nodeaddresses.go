package watcher

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// NodeAddressesConfig configures the forwarding of node addresses: for the CSRs of these
// signer names, the watcher reads the Node the request names (common name
// system:node:<name>) and forwards its status.addresses with the request, so that a signer
// whose serving certificates are bound to their node (kubelet-serving-tpm, kubelet-serving
// with bindSANsToNode) accepts only the node's own names. It needs get on nodes
// (deploy/watcher). Off when SignerNames is empty.
type NodeAddressesConfig struct {
	// SignerNames are the signer names whose requests carry the node's addresses.
	SignerNames []string `json:"signerNames,omitempty"`
}

func (n NodeAddressesConfig) validate() []error {
	var errs []error
	for i, name := range n.SignerNames {
		if problems := configfile.SignerNameProblems(name); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("nodeAddresses.signerNames[%d] %q is not a signer name: %v", i, name, problems))
		}
	}
	return errs
}

// nodeAddresser reads the addresses of the Node a CSR names, for the configured signers.
type nodeAddresser struct {
	kube    kubeclient.Interface
	signers map[string]bool
}

func newNodeAddresser(kube kubeclient.Interface, cfg NodeAddressesConfig) *nodeAddresser {
	n := &nodeAddresser{kube: kube, signers: map[string]bool{}}
	for _, s := range cfg.SignerNames {
		n.signers[s] = true
	}
	return n
}

// addresses returns the status.addresses of the Node csr's request names, for a configured
// signer; none for another signer, a request that names no node, or a Node that does not
// exist (the signer then refuses for want of them). Another error reading the Node is
// returned: a transient failure.
func (n *nodeAddresser) addresses(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]corev1.NodeAddress, error) {
	if n == nil || !n.signers[csr.Spec.SignerName] {
		return nil, nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil, nil
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, nil
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:")
	if !ok || name == "" {
		return nil, nil
	}
	node, err := n.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Node %s for its addresses: %w", name, err)
	}
	return node.Status.Addresses, nil
}

// addressingVerifier is the approver's verifier: the client, with the node's addresses.
type addressingVerifier struct {
	client    *signerclient.Client
	addresser *nodeAddresser
}

func (v addressingVerifier) VerifyAttestation(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (signerclient.Attested, error) {
	addrs, err := v.addresser.addresses(ctx, csr)
	if err != nil {
		return signerclient.Attested{}, err
	}
	return v.client.VerifyAttestation(ctx, csr, addrs...)
}
