package watcher

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/watcher/kubeclient"
	"github.com/signet-pki/signet/watcher/pcrsigner"
)

// Discovery at start is retried every discoveryRetryInterval for up to discoveryRetryTimeout
// while the API server answers with errors (other than "not served").
const (
	discoveryRetryInterval = time.Second
	discoveryRetryTimeout  = 30 * time.Second
)

// podCertificateVersion returns the version of the PodCertificateRequest API the watcher
// signs, or pcrsigner.NotServed, having logged once why: podCertificateRequests.enabled is
// false; the cluster serves PodCertificateRequests in neither certificates.k8s.io/v1 nor
// v1beta1; or the watcher may not list, watch or update the status of them (logged as an
// error naming the missing permissions). A failure to check the permissions is logged and the
// controller started anyway. It returns an error only if discovery keeps failing.
func (c *Config) podCertificateVersion(ctx context.Context, kube kubeclient.Interface, logger klog.Logger) (pcrsigner.APIVersion, error) {
	if !c.PodCertificateRequests.IsEnabled() {
		logger.Info("Not signing PodCertificateRequests", "why", "podCertificateRequests.enabled is false")
		return pcrsigner.NotServed, nil
	}
	var version pcrsigner.APIVersion
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, discoveryRetryInterval, discoveryRetryTimeout, true, func(ctx context.Context) (bool, error) {
		version, lastErr = pcrsigner.Discover(ctx, kube.Discovery())
		if lastErr != nil {
			logger.V(2).Info("Discovering the PodCertificateRequest API failed, retrying", "err", lastErr)
		}
		return lastErr == nil, nil
	})
	switch {
	case err != nil && lastErr != nil:
		return pcrsigner.NotServed, fmt.Errorf("discovering the PodCertificateRequest API: %w", lastErr)
	case err != nil:
		return pcrsigner.NotServed, fmt.Errorf("discovering the PodCertificateRequest API: %w", err)
	case version == pcrsigner.NotServed:
		logger.Info("Not signing PodCertificateRequests", "why",
			"the cluster does not serve them (neither certificates.k8s.io/v1 nor v1beta1)")
		return pcrsigner.NotServed, nil
	}
	missing, err := pcrsigner.MissingPermissions(ctx, kube, version)
	switch {
	case err != nil:
		logger.Error(err, "Checking the watcher's PodCertificateRequest permissions; starting the controller anyway")
	case len(missing) > 0:
		logger.Error(nil, "Not signing PodCertificateRequests: the watcher lacks permissions",
			"apiVersion", version, "missing", missing,
			"fix", "grant them (see deploy/watcher/rbac.yaml) or set podCertificateRequests.enabled: false")
		return pcrsigner.NotServed, nil
	}
	return version, nil
}
