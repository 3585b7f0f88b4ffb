package controlplane

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionDefaults(t *testing.T) {
	beta := map[string]bool{"PodCertificateRequest": true, "ClusterTrustBundle": true, "ClusterTrustBundleProjection": true}
	for _, tc := range []struct {
		version string
		gates   map[string]bool
		rc      map[string]string
	}{
		{"v1.36.3", beta, map[string]string{"certificates.k8s.io/v1beta1": "true"}},
		{"v1.35.0", beta, map[string]string{"certificates.k8s.io/v1beta1": "true"}},
		{"v1.37.1", nil, nil},
		{"v1.38.0", nil, nil},
		{"v1.34.2", nil, nil},
		{"devel", nil, nil},
	} {
		if got := VersionFeatureGates(tc.version); !maps.Equal(got, tc.gates) {
			t.Errorf("VersionFeatureGates(%s) = %v, want %v", tc.version, got, tc.gates)
		}
		if got := VersionRuntimeConfig(tc.version); !maps.Equal(got, tc.rc) {
			t.Errorf("VersionRuntimeConfig(%s) = %v, want %v", tc.version, got, tc.rc)
		}
	}
}

func TestCallerFlagsWinOverVersionDefaults(t *testing.T) {
	got := merged(VersionFeatureGates("v1.36.3"), map[string]bool{"ClusterTrustBundleProjection": false, "Other": true})
	want := map[string]bool{"PodCertificateRequest": true, "ClusterTrustBundle": true, "ClusterTrustBundleProjection": false, "Other": true}
	if !maps.Equal(got, want) {
		t.Errorf("merged gates = %v, want %v", got, want)
	}
	if got := merged[string](nil, nil); got != nil {
		t.Errorf("merged(nil, nil) = %v, want nil", got)
	}
}

// TestWrongVersionBinaryIsRefused: the default version's kube-apiserver, asked for as
// another version (as when $SIGNET_KUBE_ASSETS points at the wrong build), is refused with
// the command that builds the right one.
func TestWrongVersionBinaryIsRefused(t *testing.T) {
	dir, err := AssetsDir(DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kube-apiserver")
	if err := checkBinaryVersion(path, DefaultVersion); err != nil {
		t.Errorf("checkBinaryVersion(%s, %s) = %v, want nil", path, DefaultVersion, err)
	}
	err = checkBinaryVersion(path, "v1.36.3")
	if err == nil {
		t.Fatalf("checkBinaryVersion(%s, v1.36.3) accepted a %s build", path, DefaultVersion)
	}
	for _, want := range []string{DefaultVersion, "hack/kube-bins.sh v1.36.3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
