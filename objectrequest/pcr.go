package objectrequest

import (
	"maps"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// PCR is a PodCertificateRequest of either served API version (certificates.k8s.io/v1, or
// v1beta1 on Kubernetes 1.35–1.36) as the signing server needs it: the object's identity and
// its spec. Byte slices and the annotation map are shared with the object it was read from
// and must not be modified.
type PCR struct {
	// UID, Namespace and Name identify the object; the UID is the server's idempotency key.
	UID             types.UID
	Namespace, Name string

	// SignerName is spec.signerName.
	SignerName string
	// The pod identity the certificate is for, as the spec names it.
	PodName            string
	PodUID             types.UID
	ServiceAccountName string
	ServiceAccountUID  types.UID
	NodeName           types.NodeName
	NodeUID            types.UID
	// MaxExpirationSeconds is spec.maxExpirationSeconds (the API server defaults it to 86400);
	// nil is sent as 0.
	MaxExpirationSeconds *int32
	// StubPKCS10Request is spec.stubPKCS10Request (DER): the key and its proof of possession.
	StubPKCS10Request []byte
	// PKIXPublicKey and ProofOfPossession are the v1beta1 alternative to StubPKCS10Request.
	PKIXPublicKey, ProofOfPossession []byte
	// UnverifiedUserAnnotations is spec.unverifiedUserAnnotations.
	UnverifiedUserAnnotations map[string]string
}

// PCRFromV1 reads a certificates.k8s.io/v1 PodCertificateRequest.
func PCRFromV1(pcr *certificatesv1.PodCertificateRequest) PCR {
	s := &pcr.Spec
	return PCR{
		UID: pcr.UID, Namespace: pcr.Namespace, Name: pcr.Name,
		SignerName: s.SignerName,
		PodName:    s.PodName, PodUID: s.PodUID,
		ServiceAccountName: s.ServiceAccountName, ServiceAccountUID: s.ServiceAccountUID,
		NodeName: s.NodeName, NodeUID: s.NodeUID,
		MaxExpirationSeconds:      s.MaxExpirationSeconds,
		StubPKCS10Request:         s.StubPKCS10Request,
		UnverifiedUserAnnotations: s.UnverifiedUserAnnotations,
	}
}

// PCRFromV1beta1 reads a certificates.k8s.io/v1beta1 PodCertificateRequest, whose key is
// named either by stubPKCS10Request or (before 1.36) by pkixPublicKey and proofOfPossession;
// whichever is set is forwarded, and the server checks that exactly one is.
func PCRFromV1beta1(pcr *certificatesv1beta1.PodCertificateRequest) PCR {
	s := &pcr.Spec
	return PCR{
		UID: pcr.UID, Namespace: pcr.Namespace, Name: pcr.Name,
		SignerName: s.SignerName,
		PodName:    s.PodName, PodUID: s.PodUID,
		ServiceAccountName: s.ServiceAccountName, ServiceAccountUID: s.ServiceAccountUID,
		NodeName: s.NodeName, NodeUID: s.NodeUID,
		MaxExpirationSeconds:      s.MaxExpirationSeconds,
		StubPKCS10Request:         s.StubPKCS10Request,
		PKIXPublicKey:             s.PKIXPublicKey,
		ProofOfPossession:         s.ProofOfPossession,
		UnverifiedUserAnnotations: s.UnverifiedUserAnnotations,
	}
}

// PodRequest turns pcr into the request the server expects: the signer name, the object's
// identity (the server derives its idempotency key from the UID), the pod identity, the key
// (stub PKCS#10, or PKIX key and proof of possession), the maximum lifetime and the
// unverified user annotations (copied).
func PodRequest(pcr PCR) *signetv1.SignPodCertificateRequestRequest {
	req := &signetv1.SignPodCertificateRequestRequest{
		SignerName: pcr.SignerName,
		Object: &signetv1.KubernetesObject{
			Uid:       string(pcr.UID),
			Name:      pcr.Name,
			Namespace: pcr.Namespace,
		},
		Pod: &signetv1.PodIdentity{
			Namespace:          pcr.Namespace,
			PodName:            pcr.PodName,
			PodUid:             string(pcr.PodUID),
			ServiceAccountName: pcr.ServiceAccountName,
			ServiceAccountUid:  string(pcr.ServiceAccountUID),
			NodeName:           string(pcr.NodeName),
			NodeUid:            string(pcr.NodeUID),
		},
		StubPkcs10Request:         pcr.StubPKCS10Request,
		PkixPublicKey:             pcr.PKIXPublicKey,
		ProofOfPossession:         pcr.ProofOfPossession,
		UnverifiedUserAnnotations: maps.Clone(pcr.UnverifiedUserAnnotations),
	}
	if pcr.MaxExpirationSeconds != nil {
		req.MaxExpirationSeconds = *pcr.MaxExpirationSeconds
	}
	return req
}
