package objectrequest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func testPCRv1() *certificatesv1.PodCertificateRequest {
	maxSeconds := int32(7200)
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "req-x7", UID: "pcr-uid"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/pods",
			PodName:    "web-0", PodUID: "pod-uid",
			ServiceAccountName: "web", ServiceAccountUID: "sa-uid",
			NodeName: "node-1", NodeUID: "node-uid",
			MaxExpirationSeconds:      &maxSeconds,
			StubPKCS10Request:         []byte{0x30, 0x82, 0x01},
			UnverifiedUserAnnotations: map[string]string{"example.com/role": "frontend"},
		},
	}
}

// wantPCRRequest is what testPCRv1 becomes.
func wantPCRRequest() *signetv1.SignPodCertificateRequestRequest {
	return &signetv1.SignPodCertificateRequestRequest{
		SignerName: "example.com/pods",
		Object:     &signetv1.KubernetesObject{Uid: "pcr-uid", Name: "req-x7", Namespace: "apps"},
		Pod: &signetv1.PodIdentity{
			Namespace: "apps", PodName: "web-0", PodUid: "pod-uid",
			ServiceAccountName: "web", ServiceAccountUid: "sa-uid",
			NodeName: "node-1", NodeUid: "node-uid",
		},
		StubPkcs10Request:         []byte{0x30, 0x82, 0x01},
		MaxExpirationSeconds:      7200,
		UnverifiedUserAnnotations: map[string]string{"example.com/role": "frontend"},
	}
}

func TestPodRequestV1(t *testing.T) {
	pcr := testPCRv1()
	got := PodRequest(PCRFromV1(pcr))
	if !proto.Equal(got, wantPCRRequest()) {
		t.Errorf("PodRequest() =\n%v\nwant\n%v", got, wantPCRRequest())
	}
	// The annotations are copied: the request never aliases the (cached) object's map.
	got.UnverifiedUserAnnotations["example.com/role"] = "changed"
	if pcr.Spec.UnverifiedUserAnnotations["example.com/role"] != "frontend" {
		t.Error("PodRequest shares the object's annotation map")
	}

	pcr.Spec.MaxExpirationSeconds = nil
	pcr.Spec.UnverifiedUserAnnotations = nil
	got = PodRequest(PCRFromV1(pcr))
	if got.MaxExpirationSeconds != 0 || got.UnverifiedUserAnnotations != nil {
		t.Errorf("unset fields: max %d, annotations %v; want 0, nil", got.MaxExpirationSeconds, got.UnverifiedUserAnnotations)
	}
}

// TestPodRequestV1beta1 covers both ways a v1beta1 object names its key: the stub PKCS#10
// request (1.36), and the PKIX key with a proof of possession (1.35), forwarded as set.
func TestPodRequestV1beta1(t *testing.T) {
	v1 := testPCRv1()
	beta := &certificatesv1beta1.PodCertificateRequest{
		ObjectMeta: v1.ObjectMeta,
		Spec: certificatesv1beta1.PodCertificateRequestSpec{
			SignerName: v1.Spec.SignerName,
			PodName:    v1.Spec.PodName, PodUID: v1.Spec.PodUID,
			ServiceAccountName: v1.Spec.ServiceAccountName, ServiceAccountUID: v1.Spec.ServiceAccountUID,
			NodeName: v1.Spec.NodeName, NodeUID: v1.Spec.NodeUID,
			MaxExpirationSeconds:      v1.Spec.MaxExpirationSeconds,
			StubPKCS10Request:         v1.Spec.StubPKCS10Request,
			UnverifiedUserAnnotations: v1.Spec.UnverifiedUserAnnotations,
		},
	}
	if got := PodRequest(PCRFromV1beta1(beta)); !proto.Equal(got, wantPCRRequest()) {
		t.Errorf("v1beta1 with a stub: PodRequest() =\n%v\nwant\n%v", got, wantPCRRequest())
	}

	beta.Spec.StubPKCS10Request = nil
	beta.Spec.PKIXPublicKey = []byte("spki")
	beta.Spec.ProofOfPossession = []byte("signature over pod-uid")
	want := wantPCRRequest()
	want.StubPkcs10Request = nil
	want.PkixPublicKey = []byte("spki")
	want.ProofOfPossession = []byte("signature over pod-uid")
	if got := PodRequest(PCRFromV1beta1(beta)); !proto.Equal(got, want) {
		t.Errorf("v1beta1 with a PKIX key: PodRequest() =\n%v\nwant\n%v", got, want)
	}
}
