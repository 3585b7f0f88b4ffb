package pcrsigner

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"

	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/watcher/internal/workloop"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// APIVersion is a version of certificates.k8s.io in which the cluster serves
// PodCertificateRequests.
type APIVersion string

const (
	// V1 is certificates.k8s.io/v1: Kubernetes 1.37 and later.
	V1 APIVersion = "v1"
	// V1beta1 is certificates.k8s.io/v1beta1: Kubernetes 1.35–1.36 with the
	// PodCertificateRequest feature gate and the v1beta1 runtime config on.
	V1beta1 APIVersion = "v1beta1"
	// NotServed: the cluster serves no PodCertificateRequests.
	NotServed APIVersion = ""
)

// resource is the PodCertificateRequest resource name.
const resource = "podcertificaterequests"

// Discover returns the newest version of certificates.k8s.io that serves
// PodCertificateRequests: V1, else V1beta1, else NotServed (kubeclient.CertificatesVersion).
func Discover(ctx context.Context, disc discovery.ServerResourcesInterface) (APIVersion, error) {
	v, err := kubeclient.CertificatesVersion(ctx, disc, resource)
	return APIVersion(v), err
}

// MissingPermissions asks the API server, with SelfSubjectAccessReviews, whether the
// client's user may do what the controller needs on version's PodCertificateRequests in
// every namespace: get (to read one again after a conflicting write), list and watch them,
// and update their status. It returns the missing ones
// as "verb resource" strings, none when all are allowed. (The `sign` permission on the
// signer names is shared with the CSR controller and not checked here.)
func MissingPermissions(ctx context.Context, kube kubeclient.Interface, version APIVersion) ([]string, error) {
	var missing []string
	for _, need := range []struct{ verb, subresource string }{{"get", ""}, {"list", ""}, {"watch", ""}, {"update", "status"}} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: need.verb, Group: certificatesv1.GroupName, Version: string(version),
				Resource: resource, Subresource: need.subresource,
			},
		}}
		got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("checking permission to %s %s: %w", need.verb, resource, err)
		}
		if !got.Status.Allowed {
			name := resource
			if need.subresource != "" {
				name += "/" + need.subresource
			}
			missing = append(missing, need.verb+" "+name)
		}
	}
	return missing, nil
}

// request is one PodCertificateRequest as the controller reads it, from either version.
type request struct {
	// object is the typed object (cached or read from the API server); never mutated.
	object runtime.Object
	// pcr is the object's identity and spec, as sent to the signing server.
	pcr objectrequest.PCR
	// status is the object's status (v1beta1's has the same fields), shared with the cached
	// object: read only (updateStatus changes a deep copy of the object).
	status certificatesv1.PodCertificateRequestStatus
	// created is the object's creation time.
	created time.Time
	// generation is metadata.generation, for the condition's observedGeneration.
	generation int64
}

// key is the work-queue key of r: namespace/name.
func (r *request) key() string { return r.pcr.Namespace + "/" + r.pcr.Name }

// toRequest converts a cached object of either version; nil for anything else.
func toRequest(obj any) *request {
	switch o := obj.(type) {
	case *certificatesv1.PodCertificateRequest:
		return fromV1(o)
	case *certificatesv1beta1.PodCertificateRequest:
		return fromV1beta1(o)
	}
	return nil
}

// versionClient reads and writes the PodCertificateRequests of one API version.
type versionClient interface {
	// objects lists and watches this version's PodCertificateRequests in every namespace;
	// object is an empty one. The cache holds objects that toRequest converts.
	objects() workloop.ListWatch
	object() runtime.Object
	// get reads namespace/name from the API server.
	get(ctx context.Context, namespace, name string) (*request, error)
	// updateStatus writes a deep copy of r.object whose status apply has changed, with
	// UpdateStatus (conditional on r's resourceVersion).
	updateStatus(ctx context.Context, r *request, apply func(*certificatesv1.PodCertificateRequestStatus)) error
}

// newVersionClient returns the versionClient of version, or an error for NotServed or an
// unknown version.
func newVersionClient(kube kubeclient.Interface, version APIVersion) (versionClient, error) {
	switch version {
	case V1:
		return v1Client{kube}, nil
	case V1beta1:
		return v1beta1Client{kube}, nil
	}
	return nil, fmt.Errorf("PodCertificateRequest API version %q is not supported", version)
}

// v1Client is the versionClient of certificates.k8s.io/v1.
type v1Client struct{ kube kubeclient.Interface }

func fromV1(o *certificatesv1.PodCertificateRequest) *request {
	return &request{object: o, pcr: objectrequest.PCRFromV1(o), status: o.Status,
		created: o.CreationTimestamp.Time, generation: o.Generation}
}

func (c v1Client) objects() workloop.ListWatch {
	pcrs := c.kube.CertificatesV1().PodCertificateRequests(metav1.NamespaceAll)
	return workloop.ListWatch{
		List:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pcrs.List(ctx, o) },
		Watch:  func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pcrs.Watch(ctx, o) },
		Client: c.kube,
	}
}

func (v1Client) object() runtime.Object { return &certificatesv1.PodCertificateRequest{} }

func (c v1Client) get(ctx context.Context, namespace, name string) (*request, error) {
	o, err := c.kube.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1(o), nil
}

func (c v1Client) updateStatus(ctx context.Context, r *request, apply func(*certificatesv1.PodCertificateRequestStatus)) error {
	o := r.object.(*certificatesv1.PodCertificateRequest).DeepCopy()
	apply(&o.Status)
	_, err := c.kube.CertificatesV1().PodCertificateRequests(o.Namespace).UpdateStatus(ctx, o,
		metav1.UpdateOptions{FieldManager: workloop.FieldManager})
	return err
}

// v1beta1Client is the versionClient of certificates.k8s.io/v1beta1.
type v1beta1Client struct{ kube kubeclient.Interface }

func fromV1beta1(o *certificatesv1beta1.PodCertificateRequest) *request {
	return &request{object: o, pcr: objectrequest.PCRFromV1beta1(o),
		status:  certificatesv1.PodCertificateRequestStatus(o.Status), // same fields; shared, read only
		created: o.CreationTimestamp.Time, generation: o.Generation}
}

func (c v1beta1Client) objects() workloop.ListWatch {
	pcrs := c.kube.CertificatesV1beta1().PodCertificateRequests(metav1.NamespaceAll)
	return workloop.ListWatch{
		List:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pcrs.List(ctx, o) },
		Watch:  func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pcrs.Watch(ctx, o) },
		Client: c.kube,
	}
}

func (v1beta1Client) object() runtime.Object { return &certificatesv1beta1.PodCertificateRequest{} }

func (c v1beta1Client) get(ctx context.Context, namespace, name string) (*request, error) {
	o, err := c.kube.CertificatesV1beta1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromV1beta1(o), nil
}

func (c v1beta1Client) updateStatus(ctx context.Context, r *request, apply func(*certificatesv1.PodCertificateRequestStatus)) error {
	o := r.object.(*certificatesv1beta1.PodCertificateRequest).DeepCopy()
	apply((*certificatesv1.PodCertificateRequestStatus)(&o.Status)) // the same fields
	_, err := c.kube.CertificatesV1beta1().PodCertificateRequests(o.Namespace).UpdateStatus(ctx, o,
		metav1.UpdateOptions{FieldManager: workloop.FieldManager})
	return err
}
