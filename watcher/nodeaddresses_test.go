package watcher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"slices"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// nodeCSR is a CSR of signer whose request names cn.
func nodeCSR(t *testing.T, signer, cn string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: signer, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

func TestNodeAddresses(t *testing.T) {
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: "node-a"}}
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Addresses: want}})
	n := newNodeAddresser(kube, NodeAddressesConfig{SignerNames: []string{"example.com/kubelet-serving-tpm"}})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want []corev1.NodeAddress
	}{
		{"the node's", nodeCSR(t, "example.com/kubelet-serving-tpm", "system:node:node-a"), want},
		{"another signer", nodeCSR(t, "example.com/other", "system:node:node-a"), nil},
		{"no such node", nodeCSR(t, "example.com/kubelet-serving-tpm", "system:node:node-b"), nil},
		{"not a node", nodeCSR(t, "example.com/kubelet-serving-tpm", "alice"), nil},
	} {
		got, err := n.addresses(ctx, tc.csr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: addresses = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	kube.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	if _, err := n.addresses(ctx, nodeCSR(t, "example.com/kubelet-serving-tpm", "system:node:node-a")); err == nil {
		t.Error("a failed read of the Node was not reported")
	}
}
