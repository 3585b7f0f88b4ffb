package objectrequest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func testCSR() *certificatesv1.CertificateSigningRequest {
	seconds := int32(3600)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "0b6c1b3e-uid"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        "example.com/serving",
			Request:           []byte("-----BEGIN CERTIFICATE REQUEST-----\n..."),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			ExpirationSeconds: &seconds,
			Username:          "system:node:n1",
			UID:               "user-uid",
			Groups:            []string{"system:nodes", "system:authenticated"},
			Extra:             map[string]certificatesv1.ExtraValue{"scopes": {"a", "b"}},
		},
	}
}

func TestCSR(t *testing.T) {
	seconds := int32(3600)
	want := &signetv1.SignCertificateSigningRequestRequest{
		SignerName:        "example.com/serving",
		Request:           []byte("-----BEGIN CERTIFICATE REQUEST-----\n..."),
		Usages:            []string{"digital signature", "server auth"},
		ExpirationSeconds: &seconds,
		Requester: &signetv1.Requester{
			Username: "system:node:n1",
			Uid:      "user-uid",
			Groups:   []string{"system:nodes", "system:authenticated"},
			Extra:    map[string]*signetv1.ExtraValue{"scopes": {Values: []string{"a", "b"}}},
		},
		Object: &signetv1.KubernetesObject{Uid: "0b6c1b3e-uid", Name: "csr-1"},
	}
	if got := CSR(testCSR()); !proto.Equal(got, want) {
		t.Errorf("CSR() =\n%v\nwant\n%v", got, want)
	}

	csr := testCSR()
	csr.Spec.ExpirationSeconds = nil
	csr.Spec.Extra = nil
	got := CSR(csr)
	if got.ExpirationSeconds != nil {
		t.Errorf("ExpirationSeconds = %d, want absent", *got.ExpirationSeconds)
	}
	if got.Requester.Extra != nil {
		t.Errorf("Extra = %v, want nil", got.Requester.Extra)
	}
}

// TestVerifyAttestation checks that the verification request carries exactly what CSR's
// request carries, plus the node's addresses.
func TestVerifyAttestation(t *testing.T) {
	r := CSR(testCSR())
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: "n1"}}
	want := &signetv1.VerifyAttestationRequest{SignerName: r.SignerName, Request: r.Request, Usages: r.Usages,
		ExpirationSeconds: r.ExpirationSeconds, Requester: r.Requester, Object: r.Object,
		NodeAddresses: []*signetv1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.7"}, {Type: "Hostname", Address: "n1"}}}
	if got := VerifyAttestation(testCSR(), addrs); !proto.Equal(got, want) {
		t.Errorf("VerifyAttestation() =\n%v\nwant\n%v", got, want)
	}
	if got := VerifyAttestation(testCSR(), nil); got.NodeAddresses != nil {
		t.Errorf("VerifyAttestation without addresses: NodeAddresses = %v, want nil", got.NodeAddresses)
	}
}
