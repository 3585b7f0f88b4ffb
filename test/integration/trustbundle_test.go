package integration

import (
	"context"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// trustPeriod is trustBundles.period in these tests.
const trustPeriod = time.Second

// repairWithin bounds the repair of a deleted or edited bundle: one period, plus the pass
// itself (an RPC and two API calls) and the test's polling.
const repairWithin = trustPeriod + 2*time.Second

// The signers and bundles of TestTrustBundles.
const (
	trustNamespace = "signet-trust"
	trustSigner    = "it.signet.dev/trust"       // a CSR signer
	trustPodSigner = "it.signet.dev/trust-pod"   // a pod-identity (PodCertificateRequest) signer
	trustOther     = "it.signet.dev/trust-other" // a signer the watcher does not serve
	trustUnlinked  = "signet-trust-unlinked"     // a bundle without a signer
)

// TestTrustBundles runs the watcher for a CSR signer and a pod-identity signer with leader
// election, as a user holding deploy/watcher/rbac.yaml's grants, with trustBundles.period 1s,
// on the real apiserver:
//   - each signer's bundle appears, named <signer with / as :>:signet, with exactly the signer's
//     CA, and a pod-style selection (spec.signerName field selector plus the label selector)
//     finds exactly it; a certificate the watcher got signed verifies against it;
//   - nothing is written while it is up to date; deleted or edited by hand, it is repaired
//     within a period;
//   - a bundle of the same name someone else made, another signer's bundle carrying the
//     watcher's labels, and an unlinked bundle are never written; the first is reported;
//   - a standby replica publishes nothing;
//   - a watcher without `attest` on its signer is refused (Forbidden) by the apiserver, reports
//     it in its metric and a Warning Event, and keeps running.
func TestTrustBundles(t *testing.T) {
	deleteBundlesAtEnd(t, trustbundle.Name(trustSigner), trustbundle.Name(trustPodSigner), trustbundle.Name(trustOther), trustUnlinked)
	s := newTrustSignet(t, trustSigner, trustPodSigner)
	s.startServer()
	podCA := readCert(t, filepath.Join(s.state, devpki.PodIdentityCACert))
	foreignCA := testpki.CA(t)
	bystanders := createBystanders(t, foreignCA)
	forbidden := startForbiddenPublisher(t)

	u := trustWatcherUser(t)
	leaderMetrics, standbyMetrics := freeAddress(t), freeAddress(t)
	cfg := s.trustWatcherConfig([]string{trustSigner, trustPodSigner}, leaderMetrics)
	leaderElection(cfg, trustNamespace, "trust-a")
	startTrustWatcher(t, cfg, u.Client())
	waitLeaseHolder(t, trustNamespace, "trust-a", 10*time.Second)
	standby := s.trustWatcherConfig([]string{trustSigner, trustPodSigner}, standbyMetrics)
	leaderElection(standby, trustNamespace, "trust-b")
	startTrustWatcher(t, standby, u.Client())

	csrBundle := checkPublished(t, s.caCert, podCA)
	verifiesAgainstBundle(t, trustSigner, csrBundle)
	checkRepairs(t, s.caCert, csrBundle, foreignCA)

	// A bundle of the same name someone else made (without the watcher's label): left alone.
	theirs := replaceWithForeign(t, trustPodSigner, foreignCA)
	time.Sleep(3 * trustPeriod)
	if got := getBundle(t, trustPodSigner); got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the watcher wrote someone else's bundle %s: %+v", got.Name, got)
	}
	waitWarningEvent(t, theirs.Name, trustbundle.ReasonNotOwned, "signet.dev/managed-by")
	_, admin := cluster.Admin()
	for name, rv := range bystanders {
		got, err := admin.CertificatesV1().ClusterTrustBundles().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != rv {
			t.Errorf("bystander bundle %s changed or gone (%v): %+v, want resourceVersion %s", name, err, got, rv)
		}
	}

	checkTrustMetrics(t, leaderMetrics, standbyMetrics)
	forbidden.check(t)
}

// deleteBundlesAtEnd deletes the named bundles, if any, now and when the test ends (after
// the watchers it starts later have stopped), so that it can run again on the same cluster.
func deleteBundlesAtEnd(t *testing.T, names ...string) {
	t.Helper()
	_, admin := cluster.Admin()
	del := func() {
		for _, name := range names {
			err := admin.CertificatesV1().ClusterTrustBundles().Delete(context.Background(), name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting bundle %s: %v", name, err)
			}
		}
	}
	del()
	t.Cleanup(del)
}

// createBystanders creates, as cluster-admin, bundles that are not the watcher's: another
// signer's (carrying the watcher's labels) and an unlinked one. It returns their
// resourceVersions by name.
func createBystanders(t *testing.T, ca *testpki.Authority) map[string]string {
	t.Helper()
	_, admin := cluster.Admin()
	out := map[string]string{}
	for _, b := range []*certificatesv1.ClusterTrustBundle{
		{ObjectMeta: metav1.ObjectMeta{Name: trustbundle.Name(trustOther), Labels: trustbundle.Labels(trustOther)},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: trustOther, TrustBundle: string(ca.CertPEM())}},
		{ObjectMeta: metav1.ObjectMeta{Name: trustUnlinked, Labels: map[string]string{trustbundle.ManagedByLabel: trustbundle.ManagedBy}},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(ca.CertPEM())}},
	} {
		got, err := admin.CertificatesV1().ClusterTrustBundles().Create(context.Background(), b, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating bystander %s: %v", b.Name, err)
		}
		out[got.Name] = got.ResourceVersion
	}
	return out
}

// trustWatcherUser provisions the watcher's user with deploy/watcher/rbac.yaml's grants for
// trustSigner and the same signers rule (sign, attest) for trustPodSigner, and checks that it
// may attest for both and create bundles.
func trustWatcherUser(t *testing.T) *controlplane.User {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, trustNamespace)
	u, err := cluster.AddUser("signet-watcher-trust", nil)
	if err != nil {
		t.Fatal(err)
	}
	applyDeployedRBAC(t, u, trustSigner, trustNamespace)
	if err := cluster.Grant(ctx, "signet-testcluster:trust-pod:"+u.Name, u, []rbacv1.PolicyRule{{
		APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"signers"},
		ResourceNames: []string{trustPodSigner}, Verbs: []string{"sign", "attest"},
	}}); err != nil {
		t.Fatal(err)
	}
	_, admin := cluster.Admin()
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "attest", Group: certificatesv1.GroupName, Resource: "signers", Name: trustSigner},
		{Verb: "attest", Group: certificatesv1.GroupName, Resource: "signers", Name: trustPodSigner},
		{Verb: "create", Group: certificatesv1.GroupName, Resource: "clustertrustbundles"},
	} {
		if !allowed(ctx, t, admin, u, attrs) {
			t.Fatalf("the deployed RBAC does not allow %+v", attrs)
		}
	}
	return u
}

// checkPublished waits for both signers' bundles with exactly their CAs and the labels, and
// selects the CSR signer's as a pod's clusterTrustBundle projection does (signerName field
// selector and label selector). It returns the CSR signer's bundle.
func checkPublished(t *testing.T, ca, podCA *x509.Certificate) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	csrBundle := waitBundle(t, trustSigner, 15*time.Second, "published", holds(ca))
	podBundle := waitBundle(t, trustPodSigner, 5*time.Second, "published", holds(podCA))
	for _, b := range []*certificatesv1.ClusterTrustBundle{csrBundle, podBundle} {
		if b.Labels[trustbundle.ManagedByLabel] != trustbundle.ManagedBy || b.Labels[trustbundle.SignerLabel] != trustbundle.SignerLabelValue(b.Spec.SignerName) {
			t.Errorf("bundle %s labels = %v", b.Name, b.Labels)
		}
	}
	if csrBundle.Name != "it.signet.dev:trust:signet" {
		t.Errorf("bundle name = %q, want it.signet.dev:trust:signet", csrBundle.Name)
	}
	_, admin := cluster.Admin()
	for _, selector := range []string{
		trustbundle.ManagedByLabel + "=" + trustbundle.ManagedBy,
		labels.SelectorFromSet(trustbundle.Labels(trustSigner)).String(),
	} {
		list, err := admin.CertificatesV1().ClusterTrustBundles().List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.signerName", trustSigner).String(), LabelSelector: selector,
		})
		if err != nil {
			t.Fatalf("selecting bundles as a pod's clusterTrustBundle projection does: %v", err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != csrBundle.Name {
			t.Errorf("signerName %s + labels %s select %d bundles, want exactly %s", trustSigner, selector, len(list.Items), csrBundle.Name)
		}
	}
	return csrBundle
}

// checkRepairs: nothing is written while the bundle is up to date; deleted, or its
// trustBundle edited, by hand it is repaired within a period.
func checkRepairs(t *testing.T, ca *x509.Certificate, published *certificatesv1.ClusterTrustBundle, foreignCA *testpki.Authority) {
	t.Helper()
	time.Sleep(3 * trustPeriod)
	if got := getBundle(t, trustSigner); got.ResourceVersion != published.ResourceVersion {
		t.Errorf("bundle rewritten while up to date: resourceVersion %s → %s", published.ResourceVersion, got.ResourceVersion)
	}
	ctx := context.Background()
	_, admin := cluster.Admin()
	ctbs := admin.CertificatesV1().ClusterTrustBundles()
	if err := ctbs.Delete(ctx, published.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	recreated := waitBundle(t, trustSigner, repairWithin, "re-created after deletion", func(b *certificatesv1.ClusterTrustBundle) bool {
		return b.UID != published.UID && holds(ca)(b)
	})
	t.Logf("deleted bundle re-created after %s", time.Since(deleted).Round(time.Millisecond))

	edited := recreated.DeepCopy()
	edited.Spec.TrustBundle = string(foreignCA.CertPEM())
	if _, err := ctbs.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	editedAt := time.Now()
	waitBundle(t, trustSigner, repairWithin, "repaired after an edit", holds(ca))
	t.Logf("edited bundle repaired after %s", time.Since(editedAt).Round(time.Millisecond))
}

// checkTrustMetrics reads the leader's and the standby's trust bundle metrics after
// checkRepairs and the replacement of the pod signer's bundle.
func checkTrustMetrics(t *testing.T, leaderAddr, standbyAddr string) {
	t.Helper()
	m := scrapeMetrics(t, leaderAddr)
	published := m.value(t, `signet_watcher_trust_bundle_published_timestamp_seconds{signer="`+trustSigner+`"}`)
	if age := time.Since(time.Unix(int64(published), 0)); age > 3*trustPeriod {
		t.Errorf("last publication of %s confirmed %s ago, want within a few periods", trustSigner, age)
	}
	for series, want := range map[string]float64{
		`signet_watcher_trust_bundle_anchors{signer="` + trustSigner + `",state="active"}`:                  1,
		`signet_watcher_trust_bundle_anchors{signer="` + trustSigner + `",state="staged"}`:                  0,
		`signet_watcher_trust_bundle_anchors{signer="` + trustPodSigner + `",state="active"}`:               1,
		`signet_watcher_trust_bundle_writes_total{operation="created",signer="` + trustSigner + `"}`:        2,
		`signet_watcher_trust_bundle_writes_total{operation="updated",signer="` + trustSigner + `"}`:        1,
		`signet_watcher_trust_bundle_publish_errors_total{reason="Forbidden",signer="` + trustSigner + `"}`: 0,
		`signet_watcher_trust_bundle_publish_errors_total{reason="APIError",signer="` + trustSigner + `"}`:  0,
	} {
		if got := m.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := m.value(t, `signet_watcher_trust_bundle_reports_total{outcome="reported",signer="`+trustSigner+`"}`); got < 2 {
		t.Errorf("reports of %s's bundle taken by the server = %v, want one per period", trustSigner, got)
	}
	if got := m.value(t, `signet_watcher_trust_bundle_publish_errors_total{reason="NotOwned",signer="`+trustPodSigner+`"}`); got < 2 {
		t.Errorf("NotOwned errors for %s = %v, want one per period since its bundle was replaced", trustPodSigner, got)
	}
	sb := scrapeMetrics(t, standbyAddr)
	if sb.value(t, "signet_watcher_leader") != 0 || strings.Contains(sb.body, "signet_watcher_trust_bundle_published_timestamp_seconds{") ||
		sb.value(t, `signet_watcher_trust_bundle_writes_total{operation="created",signer="`+trustSigner+`"}`) != 0 {
		t.Errorf("the standby published:\n%s", grepMetricLines(sb.body, "signet_watcher_trust_bundle_"))
	}
}

// newTrustSignet prepares a signing server for signerName and, with the pod-identity profile
// and a CA of its own, podSigner.
func newTrustSignet(t *testing.T, signerName, podSigner string) *signet {
	t.Helper()
	s := &signet{t: t, signerName: signerName, state: t.TempDir(), addr: freeAddress(t)}
	path, err := devpki.Ensure(devpki.Options{Dir: s.state, SignerName: signerName, PodIdentitySigner: podSigner, Address: s.addr})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	s.cfg.HTTP.Address = "127.0.0.1:0"
	s.caCert = readCert(t, filepath.Join(s.state, devpki.SignerCACert))
	return s
}

// trustWatcherConfig is a watcher configuration for signerNames on s's server, publishing
// every trustPeriod, serving metrics on metricsAddress.
func (s *signet) trustWatcherConfig(signerNames []string, metricsAddress string) *watcher.Config {
	cfg := s.watcherConfig(s.addr)
	cfg.SignerNames = signerNames
	cfg.TrustBundles.Period.Duration = trustPeriod
	cfg.MetricsAddress = metricsAddress
	return cfg
}

// forbiddenPublisher is a watcher, with its own signing server and signer, whose user may do
// everything the watcher does except `attest` on the signer.
type forbiddenPublisher struct {
	signerName, metrics string
	replica             *replica
}

// startForbiddenPublisher starts it: its RBAC has the watcher's rules (CSRs, PodCertificate-
// Requests, `sign`, Events) and get/create/update on clustertrustbundles, but no `attest`.
func startForbiddenPublisher(t *testing.T) *forbiddenPublisher {
	t.Helper()
	s := newSignet(t, "it.signet.dev/trust-noattest", time.Hour)
	s.startServer()
	u, err := cluster.AddUser("signet-watcher-noattest", nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := append(controlplane.SignerRules([]string{s.signerName}), controlplane.PodCertificateSignerRules()...)
	rules = append(rules, rbacv1.PolicyRule{
		APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"get", "create", "update"},
	})
	ctx := context.Background()
	if err := cluster.Grant(ctx, "signet-testcluster:noattest:"+u.Name, u, rules); err != nil {
		t.Fatal(err)
	}
	_, admin := cluster.Admin()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "attest", Group: certificatesv1.GroupName, Resource: "signers", Name: s.signerName},
	}}
	if got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil || got.Status.Allowed {
		t.Fatalf("the no-attest user may attest (%v): the test needs a user that may not", err)
	}
	f := &forbiddenPublisher{signerName: s.signerName, metrics: freeAddress(t)}
	f.replica = startTrustWatcher(t, s.trustWatcherConfig([]string{s.signerName}, f.metrics), u.Client())
	return f
}

// check: no bundle, Forbidden counted every period, a Warning Event naming attest, and the
// watcher still running (and live).
func (f *forbiddenPublisher) check(t *testing.T) {
	t.Helper()
	var last float64
	series := `signet_watcher_trust_bundle_publish_errors_total{reason="Forbidden",signer="` + f.signerName + `"}`
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = scrapeMetrics(t, f.metrics).value(t, series)
		return last >= 3, nil
	})
	if err != nil {
		t.Errorf("%s = %v, want at least 3 (one per period): %v", series, last, err)
	}
	name := trustbundle.Name(f.signerName)
	_, admin := cluster.Admin()
	if _, err := admin.CertificatesV1().ClusterTrustBundles().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bundle %s of a watcher without attest: err = %v, want NotFound", name, err)
	}
	waitWarningEvent(t, name, trustbundle.ReasonForbidden, "attest")
	select {
	case <-f.replica.finished:
		t.Errorf("the watcher without attest stopped: %v", f.replica.err)
	default:
	}
	if code, _ := httpGet("http://" + f.metrics + "/livez"); code != http.StatusOK {
		t.Errorf("the watcher without attest: /livez = %d, want 200", code)
	}
}
