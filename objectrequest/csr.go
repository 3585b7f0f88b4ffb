// Package objectrequest is the one conversion of Kubernetes objects into signet.v1 requests:
// a CertificateSigningRequest into a SignCertificateSigningRequestRequest (CSR) or a
// VerifyAttestationRequest (VerifyAttestation), and a PodCertificateRequest of either served
// version (certificates.k8s.io/v1, or v1beta1) into a SignPodCertificateRequestRequest
// (PCRFromV1, PCRFromV1beta1, PodRequest). It is shared by the watcher (through signerclient),
// the HTTPS webhook and signetctl, so every front door asks the decision core the same thing
// for the same object. It imports nothing of server/, watcher/ or signerclient/.
package objectrequest

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// CSR turns csr into the request the server expects: the spec's signer name, PKCS#10
// request, usages, optional expirationSeconds and requester identity, and the object's UID
// and name (the server derives its idempotency key from them). Node addresses are not part
// of the object: a caller that forwards them sets NodeAddresses itself.
func CSR(csr *certificatesv1.CertificateSigningRequest) *signetv1.SignCertificateSigningRequestRequest {
	spec := &csr.Spec
	usages := make([]string, 0, len(spec.Usages))
	for _, u := range spec.Usages {
		usages = append(usages, string(u))
	}
	var extra map[string]*signetv1.ExtraValue
	if len(spec.Extra) > 0 {
		extra = make(map[string]*signetv1.ExtraValue, len(spec.Extra))
		for k, v := range spec.Extra {
			extra[k] = &signetv1.ExtraValue{Values: append([]string(nil), v...)}
		}
	}
	req := &signetv1.SignCertificateSigningRequestRequest{
		SignerName: spec.SignerName,
		Request:    spec.Request,
		Usages:     usages,
		Requester: &signetv1.Requester{
			Username: spec.Username,
			Uid:      spec.UID,
			Groups:   append([]string(nil), spec.Groups...),
			Extra:    extra,
		},
		Object: &signetv1.KubernetesObject{
			Uid:  string(csr.UID),
			Name: csr.Name,
		},
	}
	if spec.ExpirationSeconds != nil {
		seconds := *spec.ExpirationSeconds
		req.ExpirationSeconds = &seconds
	}
	return req
}

// VerifyAttestation turns csr and its node's addresses (none: nil) into the request that asks
// the server to verify the CSR's TPM evidence without signing: the same fields as CSR's
// request, with the addresses.
func VerifyAttestation(csr *certificatesv1.CertificateSigningRequest, addrs []corev1.NodeAddress) *signetv1.VerifyAttestationRequest {
	r := CSR(csr)
	return &signetv1.VerifyAttestationRequest{SignerName: r.GetSignerName(), Request: r.GetRequest(),
		Usages: r.GetUsages(), ExpirationSeconds: r.ExpirationSeconds, Requester: r.GetRequester(), Object: r.GetObject(),
		NodeAddresses: NodeAddresses(addrs)}
}

// NodeAddresses converts a Node's status.addresses to the wire's; none is nil.
func NodeAddresses(addrs []corev1.NodeAddress) []*signetv1.NodeAddress {
	var out []*signetv1.NodeAddress
	for _, a := range addrs {
		out = append(out, &signetv1.NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	return out
}
