package controlplane_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/testpki"
)

// TestSetExtraClientCAs: a client CA added to a running kube-apiserver's --client-ca-file is
// trusted without a restart, and the apiserver publishes it in ConfigMap
// kube-system/extension-apiserver-authentication; one taken out is no longer trusted. The
// ConfigMap keeps it: the apiserver publishes the union of what it holds and its own file
// (for control planes whose apiservers differ), dropping only expired CAs.
func TestSetExtraClientCAs(t *testing.T) {
	old, next := testpki.CA(t), testpki.CA(t)
	c := controlplanetest.Start(t, controlplane.Options{ExtraClientCAs: old.CertPEM()})
	ctx := t.Context()
	cfg, admin := c.Admin()
	clientOf := func(ca *testpki.Authority, user string) *rest.Config {
		extra := rest.AnonymousClientConfig(cfg)
		key := testpki.Key(t, testpki.P256)
		extra.CertData = testpki.CertPEM(ca.Sign(t, &x509.Certificate{
			Subject: pkix.Name{CommonName: user}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, key.Public()))
		extra.KeyData = testpki.KeyPEM(t, key)
		return extra
	}
	published := func(ca *testpki.Authority) bool {
		cm, err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["client-ca-file"], strings.TrimSpace(string(ca.CertPEM())))
	}
	oldUser, nextUser := clientOf(old, "old-user"), clientOf(next, "next-user")
	if got := whoamiErr(ctx, nextUser); got.Username != "" {
		t.Fatalf("a client of a CA not in --client-ca-file authenticated as %q", got.Username)
	}
	settles := func(what string, done func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			return done(), nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	if err := c.SetExtraClientCAs(append(old.CertPEM(), next.CertPEM()...)); err != nil {
		t.Fatal(err)
	}
	settles("the added CA is trusted and published", func() bool {
		return whoamiErr(ctx, nextUser).Username == "next-user" && published(next) && published(old)
	})
	if got := whoamiErr(ctx, oldUser).Username; got != "old-user" {
		t.Errorf("the CA kept in the file no longer authenticates: %q", got)
	}

	if err := c.SetExtraClientCAs(next.CertPEM()); err != nil {
		t.Fatal(err)
	}
	settles("the removed CA is no longer trusted", func() bool { return whoamiErr(ctx, oldUser).Username == "" })
	if !published(old) {
		t.Log("the apiserver no longer publishes the removed CA: it used to keep it until it expired")
	}
	if got := whoamiErr(ctx, nextUser).Username; got != "next-user" {
		t.Errorf("the remaining CA no longer authenticates: %q", got)
	}
	if err := c.SetExtraClientCAs([]byte("not pem")); err == nil {
		t.Error("SetExtraClientCAs accepted bytes that are not PEM certificates")
	}
}
