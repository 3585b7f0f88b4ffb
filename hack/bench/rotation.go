package main

// The -rotation mode: how long a CA staged on the signing server takes to appear in the
// cluster's signer-linked ClusterTrustBundle, and a retired one to leave it, with the
// watcher's default trust bundle settings (trustBundles.period 2 s, not shortened).
//
// One real control plane (internal/controlplane) and Signet's two processes started as for
// -cluster (clusterBench.setup and startSigner; the dev client has the admin role), nothing
// else running. Once the first bundle of clientSigner is seen, n times: a fresh self-signed
// P-256 CA (internal/cacert; its key in a file of mode 0600); a pause drawn uniformly from
// [0, jitter), so that the step lands anywhere in the publisher's cycle rather than right
// after its last write; StageCA, timed until a watch on certificates.k8s.io/v1
// ClusterTrustBundles sees the CA in the signer's bundle; another pause; RetireCA (a staged
// CA never issued, so no gate holds it), timed until the bundle no longer holds it. Each time
// runs from just before the call to the watch event.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// rotationWait bounds each wait for the bundle: far above the target (5 s), so that a slow
// step is measured, not cut short.
const rotationWait = time.Minute

type rotationOpts struct {
	bin         string // folder with signet-server and signet-watcher
	kubeVersion string
	out         string
	n           int           // CAs staged and retired
	jitter      time.Duration // pause before each step: uniform in [0, jitter)
}

// rotationSample is one CA's round trip: the StageCA call, stage → in the bundle, the
// RetireCA call, retire → out of the bundle.
type rotationSample struct {
	stageCall, visible, retireCall, gone time.Duration
}

func runRotation(ctx context.Context, opts rotationOpts) (err error) {
	if opts.n < 1 {
		return fmt.Errorf("-rotation-n %d: want at least 1", opts.n)
	}
	started := time.Now()
	binaries, err := binariesNote(opts.bin)
	if err != nil {
		return err
	}
	cluster, err := controlplane.Start(ctx, controlplane.Options{Version: opts.kubeVersion})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	_, kube := cluster.Admin()
	dir, err := os.MkdirTemp("", "signet-bench-rotation-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: kept %s for the signers' log\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	b := &clusterBench{opts: clusterOpts{bin: opts.bin, admin: true}, cluster: cluster, kube: kube, dir: dir, state: filepath.Join(dir, "state")}
	if err := b.setup(); err != nil {
		return err
	}
	bundle := watchBundle(ctx, kube, clientSigner)
	defer bundle.stop()
	proc, err := b.startSigner(ctx, "", signerKind{label: signetLabel, name: "signet", kind: "signet"}, "rotation")
	if err != nil {
		return err
	}
	defer proc.stop()
	client, err := signerclient.New(signerclient.Config{Address: proc.grpc, ServerName: "localhost", RPCTimeout: 10 * time.Second,
		CAFile:   filepath.Join(b.state, devpki.TLSCACert),
		CertFile: filepath.Join(b.state, devpki.ClientCert), KeyFile: filepath.Join(b.state, devpki.ClientKey)})
	if err != nil {
		return err
	}
	defer client.Close()

	devCA, err := os.ReadFile(filepath.Join(b.state, devpki.SignerCACert))
	if err != nil {
		return err
	}
	first := fingerprints(string(devCA))
	if _, err := bundle.wait(ctx, "the first bundle", func(fps map[string]bool) bool { return len(fps) > 0 && containsAll(fps, first) }); err != nil {
		return err
	}
	var samples []rotationSample
	for i := range opts.n {
		s, err := rotateOnce(ctx, client, bundle, dir, i, opts.jitter)
		if err != nil {
			return fmt.Errorf("CA %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "CA %2d: StageCA %s ms, in the bundle after %s ms; RetireCA %s ms, out after %s ms\n",
			i+1, ms(s.stageCall), ms(s.visible), ms(s.retireCall), ms(s.gone))
		samples = append(samples, s)
	}
	table := rotationTable(samples, opts.kubeVersion, opts.jitter, time.Since(started)) + "\n" + binaries
	fmt.Print(table)
	if opts.out != "" {
		return os.WriteFile(opts.out, []byte(table), 0o644)
	}
	return nil
}

// rotateOnce stages a fresh CA (number i, its files in dir), waits until the bundle holds it,
// retires it and waits until the bundle no longer does; each step after a random pause in
// [0, jitter).
func rotateOnce(ctx context.Context, client *signerclient.Client, bundle *bundleWatch, dir string, i int, jitter time.Duration) (rotationSample, error) {
	var s rotationSample
	keyPath, certPEM, err := newStagedCA(dir, i)
	if err != nil {
		return s, err
	}
	fp := fingerprints(certPEM)
	pause(jitter)
	t0 := time.Now()
	if _, err := client.StageCA(ctx, &signetv1.StageCARequest{SignerName: clientSigner, KeyUri: keyPath, CertificatePem: certPEM}); err != nil {
		return s, err
	}
	s.stageCall = time.Since(t0)
	seen, err := bundle.wait(ctx, "the staged CA in the bundle", func(fps map[string]bool) bool { return containsAll(fps, fp) })
	if err != nil {
		return s, err
	}
	s.visible = seen.Sub(t0)

	pause(jitter)
	t1 := time.Now()
	for f := range fp {
		if _, err := client.RetireCA(ctx, &signetv1.RetireCARequest{SignerName: clientSigner, Fingerprint: f}); err != nil {
			return s, err
		}
	}
	s.retireCall = time.Since(t1)
	gone, err := bundle.wait(ctx, "the retired CA out of the bundle", func(fps map[string]bool) bool { return len(fps) > 0 && !containsAny(fps, fp) })
	if err != nil {
		return s, err
	}
	s.gone = gone.Sub(t1)
	return s, nil
}

// pause sleeps a random time in [0, jitter); none for a jitter of 0.
func pause(jitter time.Duration) {
	if jitter > 0 {
		time.Sleep(mathrand.N(jitter))
	}
}

// newStagedCA writes a fresh self-signed P-256 CA's key (mode 0600) into dir and returns the
// key's path and the certificate's PEM.
func newStagedCA(dir string, i int) (keyPath, certPEM string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	cert, err := cacert.SelfSigned(key, cacert.Options{Subject: pkix.Name{CommonName: fmt.Sprintf("bench rotation CA %d", i+1)}, Lifetime: 30 * 24 * time.Hour})
	if err != nil {
		return "", "", err
	}
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(key)
	if err != nil {
		return "", "", err
	}
	keyPath = filepath.Join(dir, fmt.Sprintf("rotation-ca-%d.key", i+1))
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), nil
}

// fingerprints returns the hex SHA-256 of the DER of every certificate in bundle, the form
// RetireCA takes.
func fingerprints(bundle string) map[string]bool {
	out := map[string]bool{}
	rest := []byte(bundle)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		if block.Type == "CERTIFICATE" {
			sum := sha256.Sum256(block.Bytes)
			out[hex.EncodeToString(sum[:])] = true
		}
	}
}

func containsAll(set, want map[string]bool) bool {
	for f := range want {
		if !set[f] {
			return false
		}
	}
	return true
}

func containsAny(set, want map[string]bool) bool {
	for f := range want {
		if set[f] {
			return true
		}
	}
	return false
}

// bundleWatch follows one signer's ClusterTrustBundle (the watcher's, trustbundle.Name) on a
// certificates.k8s.io/v1 watch and keeps the fingerprints it holds and when they were seen.
type bundleWatch struct {
	mu      sync.Mutex
	anchors map[string]bool
	at      time.Time     // when anchors were seen
	changed chan struct{} // closed at the next change
	err     error         // the watch failed for good
	stop    context.CancelFunc
}

// watchBundle starts following signer's bundle until ctx is done or stop is called; a watch
// that closes is resumed from its last resource version.
func watchBundle(ctx context.Context, kube kubernetes.Interface, signer string) *bundleWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &bundleWatch{anchors: map[string]bool{}, changed: make(chan struct{}), stop: cancel}
	api := kube.CertificatesV1().ClusterTrustBundles()
	sel := "metadata.name=" + trustbundle.Name(signer)
	go func() {
		rv := ""
		for ctx.Err() == nil {
			wi, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
			if err != nil {
				if ctx.Err() == nil {
					w.set(nil, err)
				}
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error { // resource version too old, most likely: start afresh
					rv = ""
					break
				}
				ctb, ok := ev.Object.(*certificatesv1.ClusterTrustBundle)
				if !ok || ev.Type == watch.Bookmark {
					continue
				}
				rv = ctb.ResourceVersion
				switch {
				case ev.Type == watch.Deleted:
					w.set(map[string]bool{}, nil)
				case ctb.Spec.SignerName == signer:
					w.set(fingerprints(ctb.Spec.TrustBundle), nil)
				}
			}
			wi.Stop()
		}
	}()
	return w
}

// set records the bundle's fingerprints (nil: unchanged) or the watch's failure, now.
func (w *bundleWatch) set(anchors map[string]bool, err error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if anchors != nil {
		w.anchors, w.at = anchors, now
	}
	if err != nil {
		w.err = err
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns when the bundle as last seen first satisfied cond: at once if it does already.
func (w *bundleWatch) wait(ctx context.Context, what string, cond func(map[string]bool) bool) (time.Time, error) {
	timeout := time.NewTimer(rotationWait)
	defer timeout.Stop()
	for {
		w.mu.Lock()
		ok, at, changed, err := cond(w.anchors), w.at, w.changed, w.err
		w.mu.Unlock()
		switch {
		case ok:
			return at, nil
		case err != nil:
			return time.Time{}, fmt.Errorf("watching ClusterTrustBundles: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-timeout.C:
			return time.Time{}, fmt.Errorf("waiting for %s: not seen after %s", what, rotationWait)
		}
	}
}

// rotationTable renders the samples as Markdown: p50, p90 and max of each step, with the bound
// that explains them.
func rotationTable(samples []rotationSample, kubeVersion string, jitter, elapsed time.Duration) string {
	period := watcher.DefaultTrustBundlePeriod
	pick := func(f func(rotationSample) time.Duration) []time.Duration {
		out := make([]time.Duration, len(samples))
		for i, s := range samples {
			out[i] = f(s)
		}
		return out
	}
	rows := []struct {
		step  string
		times []time.Duration
		bound string
	}{
		{"stage → CA in the cluster's bundle", pick(func(s rotationSample) time.Duration { return s.visible }),
			fmt.Sprintf("≤ period (%s) + one publisher pass + watch delivery; target < 5 s", period)},
		{"retire → CA out of the bundle", pick(func(s rotationSample) time.Duration { return s.gone }),
			fmt.Sprintf("the same: ≤ period (%s) + one pass + delivery", period)},
		{"StageCA call (included above)", pick(func(s rotationSample) time.Duration { return s.stageCall }),
			"key opened and checked, the CA set written to the ledger (fsync)"},
		{"RetireCA call (included above)", pick(func(s rotationSample) time.Duration { return s.retireCall }),
			"the CA set written to the ledger (fsync)"},
	}
	phase := fmt.Sprintf("before each call a pause drawn uniformly from [0, %s), so that calls land anywhere in the publisher's cycle", jitter)
	if jitter <= 0 {
		phase = "no pause: each call right after the watch saw the previous change, that is right after the publisher's pass, the worst phase"
	}
	var sb []byte
	sb = fmt.Appendf(sb, "One etcd + kube-apiserver (%s); signet-server and signet-watcher as in -cluster, the watcher with its default trustBundles (on, period %s, not set). "+
		"%d CAs (self-signed P-256, key in a 0600 file) staged on kubernetes.io/kube-apiserver-client with StageCA, each retired with RetireCA once seen; %s. "+
		"Times run from just before the call to the event of a certificates.k8s.io/v1 ClusterTrustBundle watch (on the signer's bundle) that shows the change. Whole run: %s.\n\n",
		kubeVersion, period, len(samples), phase, elapsed.Round(time.Second))
	sb = append(sb, "| step | n | p50 ms | p90 ms | max ms | what bounds it |\n|---|---|---|---|---|---|\n"...)
	for _, r := range rows {
		p50, p90, top := summarize(r.times)
		sb = fmt.Appendf(sb, "| %s | %d | %s | %s | %s | %s |\n", r.step, len(r.times), ms(p50), ms(p90), ms(top), r.bound)
	}
	return string(sb)
}

// summarize returns the p50, p90 and maximum of ds (quantile's nearest rank), without
// reordering ds.
func summarize(ds []time.Duration) (p50, p90, top time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return quantile(s, 0.50), quantile(s, 0.90), s[len(s)-1]
}
