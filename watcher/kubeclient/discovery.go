package kubeclient

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// CertificatesVersion returns the newest version of certificates.k8s.io, "v1" then
// "v1beta1", in which the API server serves resource (podcertificaterequests,
// clustertrustbundles), or "" when it serves it in neither. A group version the API server
// does not serve (404) counts as not serving it; any other discovery error is returned.
func CertificatesVersion(ctx context.Context, disc discovery.ServerResourcesInterface, resource string) (string, error) {
	client := discovery.ToServerResourcesInterfaceWithContext(disc)
	for _, v := range []string{"v1", "v1beta1"} {
		gv := certificatesv1.GroupName + "/" + v
		list, err := client.ServerResourcesForGroupVersionWithContext(ctx, gv)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return "", fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return v, nil
			}
		}
	}
	return "", nil
}
