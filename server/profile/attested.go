package profile

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/signet-pki/signet/server/issuance"
)

// RequiresAttestation reports whether the profile's requests must carry TPM evidence, which
// the server verifies before the profile's rules run (issuance.Request.Attested).
func (p Profile) RequiresAttestation() bool {
	return p.spec.Name == NameKubeletClientTPM || p.spec.Name == NameKubeletServingTPM
}

// nodeSANsRule accepts only DNS SANs among the node's Hostname, InternalDNS and ExternalDNS
// addresses and IP SANs among its InternalIP and ExternalIP addresses, as the client
// forwarded them (issuance.Request.NodeAddresses). A request without forwarded addresses is
// refused: nothing would bind its names to the node.
func nodeSANsRule() rule {
	return rule{name: "sans: every DNS name and IP address is one of the node's own addresses (Node status.addresses)", check: func(in *input) (string, error) {
		addrs := in.req.NodeAddresses
		if len(addrs) == 0 {
			return "no node addresses came with the request: the watcher forwards them for this signer when its nodeAddresses.signerNames lists it, " +
				"and the Node must exist", issuance.ErrPolicyViolation
		}
		dns, ips := map[string]bool{}, []net.IP{}
		for _, a := range addrs {
			switch a.Type {
			case "Hostname", "InternalDNS", "ExternalDNS":
				dns[strings.ToLower(a.Address)] = true
			case "InternalIP", "ExternalIP":
				if ip := net.ParseIP(a.Address); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
		for _, d := range in.csr.DNSNames {
			if !dns[strings.ToLower(d)] {
				return fmt.Sprintf("DNS name %q is not one of the node's addresses %s", d, describeAddresses(addrs)), issuance.ErrPolicyViolation
			}
		}
		for _, ip := range in.csr.IPAddresses {
			if !slices.ContainsFunc(ips, ip.Equal) {
				return fmt.Sprintf("IP address %s is not one of the node's addresses %s", ip, describeAddresses(addrs)), issuance.ErrPolicyViolation
			}
		}
		return fmt.Sprintf("every SAN is one of the node's addresses %s", describeAddresses(addrs)), nil
	}}
}

// describeAddresses lists addresses as "[InternalIP 10.0.0.7, Hostname node-7]".
func describeAddresses(addrs []issuance.NodeAddress) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.Type + " " + a.Address
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describeNodeSANs explains the node-address binding of serving certificates, when on.
func (p Profile) describeNodeSANs() string {
	if p.spec.Name != NameKubeletServingTPM && !p.spec.BindSANsToNode {
		return ""
	}
	return " Every DNS SAN must be one of the node's Hostname, InternalDNS or ExternalDNS addresses and every IP SAN one of its InternalIP or ExternalIP addresses " +
		"(Node status.addresses, forwarded by the watcher for the signer names of its nodeAddresses setting); a request for any other name is refused naming it, " +
		"unlike kube-controller-manager, which never checks them."
}

// Insecure reports whether the profile signs kubelet client certificates with no proof of
// the node's identity at all (kubelet-client-insecure), which the server announces wherever
// the signer shows.
func (p Profile) Insecure() bool { return p.spec.Name == NameKubeletClientInsecure }

// InsecureGrounds are the grounds of every certificate a kubelet-client-insecure signer
// issues, recorded in the ledger.
const InsecureGrounds = "insecure: no node attestation (profile kubelet-client-insecure signs any node name its approver approved)"

// attestedNodeRule requires verified TPM evidence for the node of the common name: the server
// verified it (attestation.Verify, the ticket's single use, the EK's binding to the node)
// before the rules run, and the rule checks that the node it proved is the node the
// certificate names. It adds the attestation to the decision's grounds.
func attestedNodeRule() rule {
	return rule{name: "attestation: TPM evidence verified for the node of the common name", check: func(in *input) (string, error) {
		a := in.req.Attested
		if a == nil {
			return "the request carries no verified attestation", issuance.ErrPolicyViolation
		}
		node, ok := strings.CutPrefix(in.csr.Subject.CommonName, nodeCommonPrefix)
		if !ok || node != a.Node {
			return fmt.Sprintf("the evidence proves node %q, the common name is %q", a.Node, in.csr.Subject.CommonName), issuance.ErrPolicyViolation
		}
		grounds := fmt.Sprintf("attested: node %q, EK %s (%s), AK %s, provider ID %q", a.Node, a.EK, a.EKTrust, a.AKName, a.ProviderID)
		if a.BootState != "" {
			grounds += fmt.Sprintf(", boot state %q", a.BootState)
		}
		if in.grounds != "" {
			grounds = in.grounds + "; " + grounds
		}
		in.grounds = grounds
		return fmt.Sprintf("node %q proved by EK %s (%s)", a.Node, a.EK, a.EKTrust), nil
	}}
}

// insecureRule always passes and marks the decision's grounds InsecureGrounds.
func insecureRule() rule {
	return rule{name: "attestation: none (kubelet-client-insecure)", check: func(in *input) (string, error) {
		if in.grounds != "" {
			in.grounds += "; " + InsecureGrounds
		} else {
			in.grounds = InsecureGrounds
		}
		return "no proof of the node's identity is asked for", nil
	}}
}

// describeAttestation explains what the attested and insecure kubelet client profiles add.
func describeAttestation(name string) string {
	switch name {
	case NameKubeletClientTPM, NameKubeletServingTPM:
		return " The request must also carry TPM 2.0 evidence (docs/attestation.md) that the server verifies before any rule: an endorsement key that chains to a configured manufacturer root " +
			"or is on the allow-list, an attestation key proven to live in that TPM, a fresh single-use ticket for the node of the common name, and a TPM-resident binding key that vouches " +
			"for the request's key. The first endorsement key seen for a node is bound to it in the ledger; another key for that node, or that key for another node, is refused."
	case NameKubeletClientInsecure:
		return " INSECURE: no proof of the node's identity is asked for; whoever the approver approves gets a certificate for any node name. Every issuance is recorded with grounds \"insecure\"."
	}
	return ""
}
