package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// Helpers of TestTrustBundles: running watchers, reading and waiting for bundles, Events
// and metrics.

// leaderElection turns leader election on for cfg in namespace as identity, with the tests'
// short timings.
func leaderElection(cfg *watcher.Config, namespace, identity string) {
	enabled := true
	le := &cfg.LeaderElection
	le.Enabled, le.Namespace, le.Identity = &enabled, namespace, identity
	le.LeaseDuration.Duration = electionTimings.lease
	le.RenewDeadline.Duration = electionTimings.renew
	le.RetryPeriod.Duration = electionTimings.retry
}

// startTrustWatcher runs watcher.Run with cfg as kube until the test ends, and checks then
// that it stopped cleanly.
func startTrustWatcher(t *testing.T, cfg *watcher.Config, kube kubernetes.Interface) *replica {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = watcher.Run(ctx, cfg, kube, logger.WithValues("replica", cfg.LeaderElection.Identity))
	}()
	t.Cleanup(func() {
		if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("watcher.Run: %v", err)
		}
	})
	return r
}

// getBundle reads signerName's bundle as cluster-admin.
func getBundle(t *testing.T, signerName string) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	_, admin := cluster.Admin()
	b, err := admin.CertificatesV1().ClusterTrustBundles().Get(context.Background(), trustbundle.Name(signerName), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the bundle of %s: %v", signerName, err)
	}
	return b
}

// waitBundle polls signerName's bundle until done, failing the test after timeout.
func waitBundle(t *testing.T, signerName string, timeout time.Duration, what string, done func(*certificatesv1.ClusterTrustBundle) bool) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	_, admin := cluster.Admin()
	var last *certificatesv1.ClusterTrustBundle
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 25*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last, lastErr = admin.CertificatesV1().ClusterTrustBundles().Get(ctx, trustbundle.Name(signerName), metav1.GetOptions{})
		return lastErr == nil && done(last), nil
	})
	if err != nil {
		t.Fatalf("bundle of %s not %s within %s: last %+v, %v", signerName, what, timeout, last, lastErr)
	}
	return last
}

// holds reports whether a bundle is signer-linked and holds exactly ca.
func holds(ca *x509.Certificate) func(*certificatesv1.ClusterTrustBundle) bool {
	return func(b *certificatesv1.ClusterTrustBundle) bool {
		certs, err := parseBundle(b.Spec.TrustBundle)
		return err == nil && b.Spec.SignerName != "" && len(certs) == 1 && certs[0].Equal(ca)
	}
}

// parseBundle returns the certificates of a trustBundle.
func parseBundle(pemData string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for block, rest := pem.Decode([]byte(pemData)); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// verifiesAgainstBundle gets a CSR of signerName signed and verifies the leaf against the
// bundle's anchors alone, as a relying party that mounts the bundle would.
func verifiesAgainstBundle(t *testing.T, signerName string, b *certificatesv1.ClusterTrustBundle) {
	t.Helper()
	requester, err := cluster.AddRequester("trust-requester", nil)
	if err != nil {
		t.Fatal(err)
	}
	csr := approvedCSR(t, requester, signerName, "trust-leaf")
	got := waitFor(t, requester.Client(), csr.Name, 30*time.Second, "signed", signed)
	chain := parseChain(t, got.Status.Certificate)
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(b.Spec.TrustBundle)) {
		t.Fatal("no certificate in the bundle")
	}
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("a certificate of %s does not verify against its published bundle: %v", signerName, err)
	}
}

// replaceWithForeign deletes signerName's bundle and creates one of the same name without the
// watcher's label, as someone else would, retrying when the watcher re-created it first.
func replaceWithForeign(t *testing.T, signerName string, ca *testpki.Authority) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	_, admin := cluster.Admin()
	ctbs := admin.CertificatesV1().ClusterTrustBundles()
	name := trustbundle.Name(signerName)
	ctx := context.Background()
	for attempt := 0; attempt < 20; attempt++ {
		if err := ctbs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		got, err := ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner": "someone-else"}},
			Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: string(ca.CertPEM())},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Fatalf("could not replace %s: the watcher re-created it every time", name)
	return nil
}

// waitWarningEvent waits for a Warning Event from the watcher with reason on the
// ClusterTrustBundle name, in "default", whose message contains substr.
func waitWarningEvent(t *testing.T, name, reason, substr string) {
	t.Helper()
	_, admin := cluster.Admin()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
		})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Type+" "+e.Reason+" "+e.Message)
			if e.Type == "Warning" && e.Reason == reason && e.Source.Component == watcher.Component &&
				e.InvolvedObject.Kind == "ClusterTrustBundle" && strings.Contains(e.Message, substr) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning %s Event naming %q on ClusterTrustBundle %s: %v; seen %q", reason, substr, name, err, seen)
	}
}

// metricsScrape is one /metrics exposition.
type metricsScrape struct{ body string }

func scrapeMetrics(t *testing.T, addr string) metricsScrape {
	t.Helper()
	code, body := httpGet("http://" + addr + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET %s/metrics = %d", addr, code)
	}
	return metricsScrape{body}
}

// value returns the sample of series (name{labels} exactly as exposed); -1 if absent.
func (m metricsScrape) value(t *testing.T, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(m.body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

func grepMetricLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// httpGet fetches url: the status code and body, 0 if the request failed.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
