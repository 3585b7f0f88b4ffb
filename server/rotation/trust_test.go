package rotation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/rotation"
)

// stageFor sets up signer on a fresh ledger with an active CA and a staged one, and returns
// the fixture and the staged CA's fingerprint.
func stageFor(t *testing.T, dir, signer string, clock *clocktesting.FakeClock) (*fixture, string) {
	t.Helper()
	ctx := context.Background()
	f := open(t, dir, clock)
	active, next := testpki.CA(t), testpki.CA(t)
	cfg := rotation.Config{Clusters: []string{"east"}, MinPropagationDelay: time.Minute}
	if err := f.m.Adopt(ctx, f.m.Resolve(signer, cfg, []authority.CASpec{{State: authority.Active, KeyURI: "/a.key", Certificate: active.Cert}})); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Stage(ctx, "admin", signer, authority.CASpec{State: authority.Staged, KeyURI: "/n.key", Certificate: next.Cert}); err != nil {
		t.Fatal(err)
	}
	return f, authority.Fingerprint(next.Cert)
}

// TestGateFollowsWhereTrustLives: for kubernetes.io/kube-apiserver-client-kubelet a
// ClusterTrustBundle holding the staged CA does not open the gate (the API server does not
// trust through it); the API server's client-ca-file holding it does, and survives a restart.
// For kubernetes.io/kubelet-serving only an admin's confirmation does, and a report of a source
// the signer's trust does not live in is refused.
func TestGateFollowsWhereTrustLives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))

	const client = "kubernetes.io/kube-apiserver-client-kubelet"
	dir := t.TempDir()
	f, fp := stageFor(t, dir, client, clock)
	ctb := authority.Report{Cluster: "east", BundleHash: fp, Anchors: []string{fp}}
	if err := f.m.Report(ctx, "watcher", ctb, client); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Hour)
	st, err := f.m.Status(client)
	if err != nil {
		t.Fatal(err)
	}
	if st.Activation.Ready || !strings.Contains(strings.Join(st.Activation.Blocking, ";"), "client-ca-file") {
		t.Fatalf("gate after the ClusterTrustBundle alone: %+v; want it blocked on the API server's client-ca-file", st.Activation)
	}
	apiserver := authority.Report{Cluster: "east", Source: "apiserver-client-ca", BundleHash: strings.Repeat("a", 64), Anchors: []string{fp}}
	if err := f.m.Report(ctx, "watcher", apiserver, client); err != nil {
		t.Fatal(err)
	}
	clock.Step(2 * time.Minute)
	if st, _ := f.m.Status(client); !st.Activation.Ready {
		t.Fatalf("gate once the client-ca-file holds the staged CA: %+v", st.Activation)
	}
	var sources []string
	for _, r := range f.records(t, ledger.Published) {
		sources = append(sources, r.Source)
	}
	if len(sources) != 2 || sources[1] != "apiserver-client-ca" {
		t.Fatalf("published records' sources %q", sources)
	}
	_ = f.l.Close()
	if st, _ := open(t, dir, clock).m.Status(client); !st.Activation.Ready {
		t.Fatalf("gate after a restart: %+v; the client-ca-file report is in the ledger", st.Activation)
	}

	const serving = "kubernetes.io/kubelet-serving"
	g, fp2 := stageFor(t, t.TempDir(), serving, clock)
	err = g.m.Report(ctx, "watcher", authority.Report{Cluster: "east", Source: "apiserver-client-ca", BundleHash: fp2, Anchors: []string{fp2}}, serving)
	if !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("a client-ca-file report for kubelet-serving: %v", err)
	}
	if err := g.m.Report(ctx, "watcher", authority.Report{Cluster: "east", BundleHash: fp2, Anchors: []string{fp2}}, serving); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Hour)
	if st, _ := g.m.Status(serving); st.Activation.Ready || !strings.Contains(strings.Join(st.Activation.Blocking, ";"), "--kubelet-certificate-authority") {
		t.Fatalf("kubelet-serving gate without a confirmation: %+v", st.Activation)
	}
	if err := g.m.Confirm(ctx, "admin", serving, "west", "kubelet-certificate-authority", "checked"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("a confirmation for an unregistered cluster: %v", err)
	}
	if err := g.m.Confirm(ctx, "admin", serving, "east", "kubelet-certificate-authority", "kubeadm upgrade apply rolled the CA file, checked on every control-plane node"); err != nil {
		t.Fatal(err)
	}
	clock.Step(2 * time.Minute)
	if st, _ := g.m.Status(serving); !st.Activation.Ready {
		t.Fatalf("kubelet-serving gate after the confirmation: %+v", st.Activation)
	}
	if err := f.m.Confirm(ctx, "admin", client, "east", "kubelet-certificate-authority", "x"); !errors.Is(err, authority.ErrRotationRefused) {
		t.Fatalf("a confirmation for a signer whose trust is published: %v", err)
	}
}
