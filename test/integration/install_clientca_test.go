package integration

import (
	"path/filepath"
	"testing"
)

// TestInstallClientCAReader: the chart binds the watcher to kube-system's
// extension-apiserver-authentication-reader Role exactly when it serves a kubernetes.io client
// signer and publishes trust bundles (the rotation gate of those signers waits for the API
// server's client-ca-file, which the watcher reads there); the kustomize component renders
// the same binding.
func TestInstallClientCAReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   bool
	}{
		{"defaults", nil, false},
		{"a kubelet client signer", []string{`signerNames=["kubernetes.io/kube-apiserver-client-kubelet"]`}, true},
		{"an apiserver client signer", []string{`signerNames=["kubernetes.io/kube-apiserver-client","example.com/x"]`}, true},
		{"without trust bundles", []string{`signerNames=["kubernetes.io/kube-apiserver-client-kubelet"]`, `trustBundles={"enabled":false}`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderHelm(t, "signet-watcher", "signet-system", tc.values...)
			var found int
			for _, o := range objs {
				if o.GetKind() != "RoleBinding" || o.GetNamespace() != "kube-system" {
					continue
				}
				found++
				ref := o.Object["roleRef"].(map[string]any)
				subjects := o.Object["subjects"].([]any)
				subj := subjects[0].(map[string]any)
				if ref["kind"] != "Role" || ref["name"] != "extension-apiserver-authentication-reader" || len(subjects) != 1 ||
					subj["kind"] != "ServiceAccount" || subj["name"] != "signet-watcher" || subj["namespace"] != "signet-system" {
					t.Fatalf("the kube-system RoleBinding %s binds %v to %v", o.GetName(), subjects, ref)
				}
			}
			if (found == 1) != tc.want || found > 1 {
				t.Fatalf("%d kube-system RoleBindings rendered; want one: %v", found, tc.want)
			}
		})
	}
	kustomized := renderKustomizeWith(t, filepath.Join(kustomizeBase, "components", "client-ca-reader"))
	var found bool
	for _, o := range kustomized {
		found = found || (o.GetKind() == "RoleBinding" && o.GetNamespace() == "kube-system" && o.Object["roleRef"].(map[string]any)["name"] == "extension-apiserver-authentication-reader")
	}
	if !found {
		t.Fatal("the kustomize component client-ca-reader renders no binding to extension-apiserver-authentication-reader")
	}
}
