package controlplane

import (
	"debug/buildinfo"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// kubernetesModule is the module the control-plane binaries are built from.
const kubernetesModule = "k8s.io/kubernetes"

// VersionFeatureGates returns the kube-apiserver feature gates that version needs to serve
// PodCertificateRequests and ClusterTrustBundles, nil if none. Kubernetes 1.35 and 1.36
// serve both only as beta APIs behind gates that are off by default: PodCertificateRequest
// (beta since 1.35), ClusterTrustBundle and ClusterTrustBundleProjection (beta since 1.33).
// From 1.37 they are served as certificates.k8s.io/v1 by default and nothing is needed.
func VersionFeatureGates(version string) map[string]bool {
	if !servesV1beta1Only(version) {
		return nil
	}
	return map[string]bool{"PodCertificateRequest": true, "ClusterTrustBundle": true, "ClusterTrustBundleProjection": true}
}

// VersionRuntimeConfig returns the kube-apiserver --runtime-config entries that version needs
// to serve PodCertificateRequests and ClusterTrustBundles, nil if none: certificates.k8s.io/v1beta1
// on Kubernetes 1.35 and 1.36 (a beta API group version is off by default).
func VersionRuntimeConfig(version string) map[string]string {
	if !servesV1beta1Only(version) {
		return nil
	}
	return map[string]string{"certificates.k8s.io/v1beta1": "true"}
}

// servesV1beta1Only reports whether version (v1.MINOR.PATCH) is 1.35 or 1.36, which serve
// PodCertificateRequests and ClusterTrustBundles as certificates.k8s.io/v1beta1 only.
func servesV1beta1Only(version string) bool {
	minor, ok := minorVersion(version)
	return ok && (minor == 35 || minor == 36)
}

// minorVersion returns MINOR of v1.MINOR[.PATCH...].
func minorVersion(version string) (int, bool) {
	rest, ok := strings.CutPrefix(version, "v1.")
	if !ok {
		return 0, false
	}
	minor, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(minor)
	return n, err == nil
}

// merged returns base with over's entries added or replacing base's; nil when both are empty.
func merged[V any](base, over map[string]V) map[string]V {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, over)
	return out
}

// checkBinaryVersion refuses a kube-apiserver binary built from k8s.io/kubernetes at another
// version than version (for example $SIGNET_KUBE_ASSETS pointing at another version's
// build), so that a test meant for one version never passes on another. Binaries whose
// build information names no k8s.io/kubernetes version (built from a checkout, stripped)
// are accepted as they are.
func checkBinaryVersion(path, version string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil
	}
	built := ""
	if info.Main.Path == kubernetesModule {
		built = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == kubernetesModule {
			built = d.Version
			if d.Replace != nil {
				built = d.Replace.Version
			}
		}
	}
	if built == "" || built == "(devel)" || built == version {
		return nil
	}
	return fmt.Errorf("kube binary %s is %s %s, not %s: run `make kube-bins KUBE_VERSION=%s` (hack/kube-bins.sh %s), or point %s at a %s build",
		path, kubernetesModule, built, version, version, version, AssetsEnv, version)
}
