package trustbundle

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/signet-pki/signet/watcher/kubeclient"
)

// APIVersion is a version of certificates.k8s.io in which the cluster serves
// ClusterTrustBundles.
type APIVersion string

const (
	// V1 is certificates.k8s.io/v1: Kubernetes 1.37 and later.
	V1 APIVersion = "v1"
	// V1beta1 is certificates.k8s.io/v1beta1: Kubernetes 1.33–1.36 with the
	// ClusterTrustBundle feature gate and the v1beta1 runtime config on.
	V1beta1 APIVersion = "v1beta1"
	// NotServed: the cluster serves ClusterTrustBundles in neither (v1alpha1, of Kubernetes
	// 1.27–1.32, is not supported).
	NotServed APIVersion = ""
)

// resource is the ClusterTrustBundle resource name.
const resource = "clustertrustbundles"

// Discover returns the newest version of certificates.k8s.io that serves
// ClusterTrustBundles: V1, else V1beta1, else NotServed (kubeclient.CertificatesVersion).
func Discover(ctx context.Context, disc discovery.ServerResourcesInterface) (APIVersion, error) {
	v, err := kubeclient.CertificatesVersion(ctx, disc, resource)
	return APIVersion(v), err
}

// bundle is a ClusterTrustBundle of either version, as the publisher reads and writes it.
type bundle struct {
	meta        metav1.ObjectMeta
	signerName  string
	trustBundle string
}

// bundles reads and writes ClusterTrustBundles in one API version.
type bundles interface {
	get(ctx context.Context, name string) (*bundle, error)
	create(ctx context.Context, b *bundle) (*bundle, error)
	update(ctx context.Context, b *bundle) (*bundle, error)
}

// newBundles returns the client of version's ClusterTrustBundles.
func newBundles(kube kubeclient.Interface, version APIVersion) (bundles, error) {
	switch version {
	case V1:
		return v1Bundles{kube}, nil
	case V1beta1:
		return v1beta1Bundles{kube}, nil
	}
	return nil, fmt.Errorf("ClusterTrustBundle API version %q is not supported", version)
}

// v1Bundles are certificates.k8s.io/v1 ClusterTrustBundles.
type v1Bundles struct{ kube kubeclient.Interface }

func fromV1(o *certificatesv1.ClusterTrustBundle) *bundle {
	return &bundle{meta: o.ObjectMeta, signerName: o.Spec.SignerName, trustBundle: o.Spec.TrustBundle}
}

func toV1(b *bundle) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: b.meta,
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: b.signerName, TrustBundle: b.trustBundle}}
}

func (c v1Bundles) get(ctx context.Context, name string) (*bundle, error) {
	o, err := c.kube.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1(o), nil
}

func (c v1Bundles) create(ctx context.Context, b *bundle) (*bundle, error) {
	o, err := c.kube.CertificatesV1().ClusterTrustBundles().Create(ctx, toV1(b), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1(o), nil
}

func (c v1Bundles) update(ctx context.Context, b *bundle) (*bundle, error) {
	o, err := c.kube.CertificatesV1().ClusterTrustBundles().Update(ctx, toV1(b), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1(o), nil
}

// v1beta1Bundles are certificates.k8s.io/v1beta1 ClusterTrustBundles.
type v1beta1Bundles struct{ kube kubeclient.Interface }

func fromV1beta1(o *certificatesv1beta1.ClusterTrustBundle) *bundle {
	return &bundle{meta: o.ObjectMeta, signerName: o.Spec.SignerName, trustBundle: o.Spec.TrustBundle}
}

func toV1beta1(b *bundle) *certificatesv1beta1.ClusterTrustBundle {
	return &certificatesv1beta1.ClusterTrustBundle{ObjectMeta: b.meta,
		Spec: certificatesv1beta1.ClusterTrustBundleSpec{SignerName: b.signerName, TrustBundle: b.trustBundle}}
}

func (c v1beta1Bundles) get(ctx context.Context, name string) (*bundle, error) {
	o, err := c.kube.CertificatesV1beta1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1beta1(o), nil
}

func (c v1beta1Bundles) create(ctx context.Context, b *bundle) (*bundle, error) {
	o, err := c.kube.CertificatesV1beta1().ClusterTrustBundles().Create(ctx, toV1beta1(b), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1beta1(o), nil
}

func (c v1beta1Bundles) update(ctx context.Context, b *bundle) (*bundle, error) {
	o, err := c.kube.CertificatesV1beta1().ClusterTrustBundles().Update(ctx, toV1beta1(b), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1beta1(o), nil
}
