package watcher

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/watcher/kubeclient"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// trustBundleVersion returns the version of the ClusterTrustBundle API the watcher publishes
// to, or trustbundle.NotServed, having logged once why: trustBundles.enabled is false, or the
// cluster serves ClusterTrustBundles in neither certificates.k8s.io/v1 nor v1beta1. Missing
// permissions are not checked here: the publisher reports each refusal and retries. It
// returns an error only if discovery keeps failing.
func (c *Config) trustBundleVersion(ctx context.Context, kube kubeclient.Interface, logger klog.Logger) (trustbundle.APIVersion, error) {
	if !c.TrustBundles.IsEnabled() {
		logger.Info("Not publishing trust bundles", "why", "trustBundles.enabled is false")
		return trustbundle.NotServed, nil
	}
	var version trustbundle.APIVersion
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, discoveryRetryInterval, discoveryRetryTimeout, true, func(ctx context.Context) (bool, error) {
		version, lastErr = trustbundle.Discover(ctx, kube.Discovery())
		if lastErr != nil {
			logger.V(2).Info("Discovering the ClusterTrustBundle API failed, retrying", "err", lastErr)
		}
		return lastErr == nil, nil
	})
	switch {
	case err != nil && lastErr != nil:
		return trustbundle.NotServed, fmt.Errorf("discovering the ClusterTrustBundle API: %w", lastErr)
	case err != nil:
		return trustbundle.NotServed, fmt.Errorf("discovering the ClusterTrustBundle API: %w", err)
	case version == trustbundle.NotServed:
		logger.Info("Not publishing trust bundles", "why",
			"the cluster does not serve ClusterTrustBundles (neither certificates.k8s.io/v1 nor v1beta1)")
	}
	return version, nil
}
