package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// showTrustBundle waits for the signer-linked ClusterTrustBundle signet-watcher publishes for
// signer, prints it and verifies the issued chain against its content alone: what a pod that
// mounts the bundle (a clusterTrustBundle projection by signerName and label selector) trusts.
func showTrustBundle(ctx context.Context, cluster *controlplane.Cluster, signer string, chain []*x509.Certificate) error {
	_, admin := cluster.Admin()
	name := trustbundle.Name(signer)
	step("reading the ClusterTrustBundle %s that signet-watcher publishes for %s", name, signer)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var bundle string
	var labels map[string]string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ctb, err := admin.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if ctb.Spec.SignerName != signer {
			return false, fmt.Errorf("ClusterTrustBundle %s is linked to %q, not %q", name, ctb.Spec.SignerName, signer)
		}
		bundle, labels = ctb.Spec.TrustBundle, ctb.Labels
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ClusterTrustBundle %s: %w", name, err)
	}
	anchors, err := filereload.ParseCertificates([]byte(bundle))
	if err != nil {
		return fmt.Errorf("ClusterTrustBundle %s: %w", name, err)
	}
	fmt.Printf("    spec.signerName %s, %d anchor(s), labels %v\n", signer, len(anchors), labels)
	for _, a := range anchors {
		fmt.Printf("      %s (until %s)\n", a.Subject, a.NotAfter.UTC().Format(time.RFC3339))
	}
	roots := x509.NewCertPool()
	for _, a := range anchors {
		roots.AddCert(a)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("verifying the issued chain against ClusterTrustBundle %s: %w", name, err)
	}
	done("chain verifies against ClusterTrustBundle %s alone (what a pod's clusterTrustBundle projection of signer %s mounts)", name, signer)
	return nil
}
