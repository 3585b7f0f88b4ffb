package integration

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// TestClientCAGate: the staged CA of kubernetes.io/kube-apiserver-client-kubelet is not
// activated while the API server does not trust it, although the watcher has published it
// in the signer's ClusterTrustBundle: the gate waits for the API server's own client-ca-file
// (ConfigMap kube-system/extension-apiserver-authentication, which the watcher reads and
// reports). Once the cluster's kube-apiserver runs with a --client-ca-file that holds it (a
// control plane started with it), activation proceeds; the status names the source.
func TestClientCAGate(t *testing.T) {
	next := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "next kubelet client CA"} })
	s := newSignet(t, kubeletClientCAs, time.Hour)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
	s.cfg.Signers[0].Rotation = config.Rotation{Clusters: []string{"east"}, MinPropagationDelay: &metav1.Duration{Duration: time.Second}}
	s.cfg.Clients[0].Admin = true
	s.startServer()
	admin := adminClient(t, s)
	keyPath := filepath.Join(t.TempDir(), "next.key")
	if err := os.WriteFile(keyPath, testpki.KeyPEM(t, next.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StageCA(rpcContext(t), &signetv1.StageCARequest{SignerName: kubeletClientCAs, KeyUri: keyPath, CertificatePem: string(next.CertPEM())}); err != nil {
		t.Fatalf("StageCA: %v", err)
	}
	fp := sourceFingerprint(next.Cert)

	// The cluster as it is: its API server trusts only its own client CA.
	before := controlplanetest.Start(t, controlplane.Options{})
	stop := s.startClientCAWatcher(t, before)
	waitReport(t, admin, "", fp, true)                                     // the ClusterTrustBundle holds the staged CA
	waitReport(t, admin, signetv1.TrustSourceAPIServerClientCA, fp, false) // the API server's client CAs do not
	wantRefused(t, activate(t, admin, kubeletClientCAs), `has not published the staged CA`)
	wantRefused(t, activate(t, admin, kubeletClientCAs), `client-ca-file`)
	stop()

	// kube-apiserver restarted with a --client-ca-file that holds the staged CA.
	after := controlplanetest.Start(t, controlplane.Options{ExtraClientCAs: next.CertPEM()})
	s.startClientCAWatcher(t, after)
	waitReport(t, admin, signetv1.TrustSourceAPIServerClientCA, fp, true)
	waitActivation(t, admin, kubeletClientCAs)
	if err := activate(t, admin, kubeletClientCAs); err != nil {
		t.Fatalf("ActivateCA once the API server trusts the staged CA: %v", err)
	}
}

// startClientCAWatcher runs a watcher for the kubelet client signer in c, reporting as
// cluster "east", as a user with the watcher's RBAC and get on the API server's
// authentication ConfigMap; stop ends it.
func (s *signet) startClientCAWatcher(t *testing.T, c *controlplane.Cluster) (stop func()) {
	t.Helper()
	u, err := c.AddWatcher("watcher-client-ca", []string{kubeletClientCAs})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Grant(context.Background(), "signet-test:client-ca-reader", u, []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"},
		ResourceNames: []string{trustbundle.AuthenticationConfigMap},
	}}); err != nil {
		t.Fatal(err)
	}
	cfg := s.trustWatcherConfig([]string{kubeletClientCAs}, freeAddress(t))
	cfg.ClusterName = "east"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return runStoppableWatcher(t, cfg, u.Client())
}

// runStoppableWatcher is runWatcher with a stop, which the end of the test also calls.
func runStoppableWatcher(t *testing.T, cfg *watcher.Config, kube kubernetes.Interface) func() {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watcher.Run(ctx, cfg, kube, logger) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("watcher.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitReport waits until the server's status has cluster east's report of source holding (or
// not holding, with holds false) the CA of fingerprint fp.
func waitReport(t *testing.T, admin signetv1.AuthorityServiceClient, source, fp string, holds bool) {
	t.Helper()
	var last []*signetv1.ClusterReport
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = authorityOf(t, admin, kubeletClientCAs).GetClusters()
		for _, cl := range last {
			if cl.GetCluster() == "east" && cl.GetSource() == source && cl.GetBundleHash() != "" {
				has := false
				for _, a := range cl.GetAnchorFingerprints() {
					has = has || a == fp
				}
				return has == holds, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no report of source %q holding=%v the staged CA: %v (last %v)", source, holds, err, last)
	}
}

// sourceFingerprint is the hex SHA-256 of a certificate's DER.
func sourceFingerprint(c *x509.Certificate) string {
	hash, fps := trustbundle.Digest(string(testpki.CertPEM(c)))
	_ = hash
	return strings.Join(fps, "")
}
