// Package kubeclient is the part of a Kubernetes clientset the watcher uses, and builds only
// that: the certificates API (CSRs; PodCertificateRequests and ClusterTrustBundles in v1 and
// v1beta1, through the same two typed group clients), leases, events, self subject access
// reviews and discovery. A full clientset (k8s.io/client-go/kubernetes),
// and its fake for tests, satisfies Interface; the watcher's binary links none of the other
// API groups' clients and informers.
package kubeclient

import (
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1beta1 "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the clients the watcher uses.
type Interface interface {
	CertificatesV1() certificatesv1.CertificatesV1Interface
	CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	CoreV1() corev1.CoreV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
	Discovery() discovery.DiscoveryInterfaces
}

// clients is Interface built from a rest.Config.
type clients struct {
	certificates        *certificatesv1.CertificatesV1Client
	certificatesV1beta1 *certificatesv1beta1.CertificatesV1beta1Client
	coordination        *coordinationv1.CoordinationV1Client
	core                *corev1.CoreV1Client
	authorization       *authorizationv1.AuthorizationV1Client
	discovery           *discovery.DiscoveryClient
}

// New builds the watcher's clients for cfg as kubernetes.NewForConfig builds a clientset: one
// HTTP client and one rate limiter (cfg.QPS and cfg.Burst) shared by every API group.
func New(cfg *rest.Config) (Interface, error) {
	shared := *cfg
	if shared.UserAgent == "" {
		shared.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if shared.RateLimiter == nil && shared.QPS > 0 {
		if shared.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		shared.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(shared.QPS, shared.Burst)
	}
	cfg = &shared
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes HTTP client: %w", err)
	}
	var c clients
	errs := make([]error, 6)
	c.certificates, errs[0] = certificatesv1.NewForConfigAndClient(cfg, httpClient)
	c.certificatesV1beta1, errs[1] = certificatesv1beta1.NewForConfigAndClient(cfg, httpClient)
	c.coordination, errs[2] = coordinationv1.NewForConfigAndClient(cfg, httpClient)
	c.core, errs[3] = corev1.NewForConfigAndClient(cfg, httpClient)
	c.authorization, errs[4] = authorizationv1.NewForConfigAndClient(cfg, httpClient)
	c.discovery, errs[5] = discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("building the Kubernetes clients: %w", err)
	}
	return c, nil
}

func (c clients) CertificatesV1() certificatesv1.CertificatesV1Interface { return c.certificates }
func (c clients) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.certificatesV1beta1
}
func (c clients) CoordinationV1() coordinationv1.CoordinationV1Interface    { return c.coordination }
func (c clients) CoreV1() corev1.CoreV1Interface                            { return c.core }
func (c clients) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return c.authorization }
func (c clients) Discovery() discovery.DiscoveryInterfaces                  { return c.discovery }
