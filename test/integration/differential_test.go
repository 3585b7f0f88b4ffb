package integration

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/signerclient"
)

// Timeouts of the differential test's asynchronous steps.
const (
	diffAuthTimeout   = 30 * time.Second // the token authenticator and RBAC catching up
	diffKCMTimeout    = 60 * time.Second // kube-controller-manager deciding every approved CSR
	diffSignetTimeout = 30 * time.Second // Signet answering one CSR (transient errors retried)
)

// bootstrapToken is the token the joining kubelet of the differential test uses.
var bootstrapToken = controlplane.BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef"}

// The identities a differential case creates its CSR as (see startDifferentialCluster).
const (
	asBootstrapToken     = "bootstrap token"               // a real token: system:bootstrap:abcdef, as a joining kubelet
	asNodeA              = "node worker-a"                 // system:node:worker-a in system:nodes
	asNodeB              = "node worker-b"                 // system:node:worker-b in system:nodes
	asNodeANoGroup       = "worker-a without system:nodes" // system:node:worker-a in no group of its own
	asAlice              = "alice"                         // a plain user
	asBootstrapGroupUser = "user in system:bootstrappers"  // join-helper in system:bootstrappers, no token
	asServiceAccount     = "service account ci/deployer"   // system:serviceaccount:ci:deployer
)

// impersonated are the identities CSRs are created as through impersonation by cluster-admin:
// the user and groups asked for, and the groups the apiserver records in spec.groups (it adds
// system:authenticated, and a service account's groups when none are asked for).
var impersonated = []struct {
	key, user        string
	groups, recorded []string
}{
	{asNodeA, "system:node:worker-a", []string{"system:nodes"}, []string{"system:nodes", "system:authenticated"}},
	{asNodeB, "system:node:worker-b", []string{"system:nodes"}, []string{"system:nodes", "system:authenticated"}},
	{asNodeANoGroup, "system:node:worker-a", nil, []string{"system:authenticated"}},
	{asAlice, "alice", []string{"developers"}, []string{"developers", "system:authenticated"}},
	{asBootstrapGroupUser, "join-helper", []string{"system:bootstrappers"}, []string{"system:bootstrappers", "system:authenticated"}},
	{asServiceAccount, "system:serviceaccount:ci:deployer", nil,
		[]string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}},
}

// identity is a requester: its client and what the apiserver records as spec.username and
// spec.groups.
type identity struct {
	client   kubernetes.Interface
	username string
	groups   []string
}

// differential is a control plane with bootstrap token authentication and
// kube-controller-manager's CSR signer (its own CA) for the four kubernetes.io signers, beside
// a Signet server serving the same four (another CA), asked as the watcher asks, without a
// watcher.
type differential struct {
	cluster  *controlplane.Cluster
	etcd     *etcdStore
	kcm      *controlplane.Process
	kcmCA    *x509.Certificate
	signet   *signerclient.Client
	signetCA *x509.Certificate
	as       map[string]identity
}

// TestDifferential compares Signet's four kubernetes.io profiles (default settings, default
// lint gate) with kube-controller-manager's signer on the same approved CSRs, created on a
// real apiserver by real identities (see differential_corpus_*_test.go for the cases). Each
// case states the outcome on both sides: where both issue, the certificates must agree field
// by field (certDiffs; the serial's form differs by design, checkSerials); where only Signet
// refuses, the refusal must be a listed deliberate difference (see
// docs/kubernetes-differences.md). All CSRs are created, then approved, then decided, then
// compared one subtest each.
func TestDifferential(t *testing.T) {
	start := time.Now()
	d := startDifferential(t)
	runs := d.decideAll(t, differentialCases())
	t.Logf("%d cases decided by both signers %s after the start", len(runs), time.Since(start).Round(time.Millisecond))
	for _, signer := range diffSignerOrder {
		t.Run(diffSigners[signer].short, func(t *testing.T) {
			for _, r := range runs {
				if r.tc.signer == signer {
					t.Run(r.tc.name, func(t *testing.T) { d.check(t, r) })
				}
			}
		})
	}
}

// startDifferential starts the control plane, kube-controller-manager and Signet.
func startDifferential(t *testing.T) *differential {
	t.Helper()
	d := &differential{}
	d.cluster, d.etcd = startDifferentialCluster(t)
	d.as = d.identities(t)
	d.kcm, d.kcmCA = startKCMSigner(t, d.cluster)
	d.signet, d.signetCA = startDifferentialSignet(t)
	return d
}

// startDifferentialCluster starts a control plane that authenticates bootstrap tokens, with
// kubeadm's node bootstrap bindings and bootstrapToken, and finds its etcd.
func startDifferentialCluster(t *testing.T) (*controlplane.Cluster, *etcdStore) {
	t.Helper()
	c := controlplanetest.Start(t, controlplane.Options{APIServerFlags: controlplane.BootstrapTokenFlags()})
	etcd := &etcdStore{url: c.EtcdURL()}
	ctx := t.Context()
	if err := c.AddBootstrapToken(ctx, bootstrapToken, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	return c, etcd
}

// identities returns the clients of the cases' identities: the bootstrap token's own, and
// cluster-admin impersonating the others, once RBAC lets every authenticated user create
// CSRs.
func (d *differential) identities(t *testing.T) map[string]identity {
	t.Helper()
	ctx := t.Context()
	joiner, err := kubernetes.NewForConfig(d.cluster.BootstrapConfig(bootstrapToken))
	if err != nil {
		t.Fatal(err)
	}
	waitBootstrapToken(t, joiner)
	as := map[string]identity{asBootstrapToken: {client: joiner, username: bootstrapToken.Username(),
		groups: []string{"system:bootstrappers", controlplane.BootstrapGroup, "system:authenticated"}}}
	adminCfg, admin := d.cluster.Admin()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "signet-differential-requesters"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range impersonated {
		cfg := rest.CopyConfig(adminCfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u.user, Groups: u.groups}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		as[u.key] = identity{client: client, username: u.user, groups: u.recorded}
	}
	waitMayCreateCSRs(t, as[asAlice].client)
	return as
}

// waitBootstrapToken waits until the token authenticator, which learns Secrets through an
// informer, knows bootstrapToken.
func waitBootstrapToken(t *testing.T, joiner kubernetes.Interface) {
	t.Helper()
	var who authenticationv1.UserInfo
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, diffAuthTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := joiner.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return false, nil // not known yet
		}
		who = r.Status.UserInfo
		return true, nil
	})
	if err != nil || who.Username != bootstrapToken.Username() {
		t.Fatalf("bootstrap token %s: authenticated as %q (%v), want %s", bootstrapToken.ID, who.Username, err, bootstrapToken.Username())
	}
}

// waitMayCreateCSRs waits until RBAC, applied asynchronously, lets client create CSRs.
func waitMayCreateCSRs(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: certificatesv1.GroupName, Resource: "certificatesigningrequests"},
	}}
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, diffAuthTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("impersonated requesters may not create CSRs: %v", err)
	}
}

// startKCMSigner starts kube-controller-manager's csrsigning controller with a CA of its own
// (PKCS#8 key) for all four kubernetes.io signers and its default signing duration
// (diffMaxLifetime), stopped when the test ends.
func startKCMSigner(t *testing.T, c *controlplane.Cluster) (*controlplane.Process, *x509.Certificate) {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.CA(t)
	certFile, keyFile := writeCA(t, dir, "kcm-ca", ca)
	kcm, err := c.StartControllerManager(dir, []string{"csrsigning"},
		"--cluster-signing-cert-file="+certFile, "--cluster-signing-key-file="+keyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kcm.Stop(); err != nil {
			t.Errorf("stopping kube-controller-manager: %v (log %s)", err, kcm.LogPath())
		}
	})
	return kcm, ca.Cert
}

// startDifferentialSignet starts a Signet server for the four kubernetes.io signers (one CA,
// each signer's default profile, the default lint gate, the default maxLifetime) and returns
// the watcher's client of it.
func startDifferentialSignet(t *testing.T) (*signerclient.Client, *x509.Certificate) {
	t.Helper()
	s := newSignet(t, signerAPIClient, diffMaxLifetime)
	base := s.cfg.Signers[0]
	s.cfg.Signers = s.cfg.Signers[:0]
	for _, signer := range diffSignerOrder {
		sc := base
		sc.Name, sc.Profile, sc.MaxLifetime = signer, profile.Spec{Name: diffSigners[signer].profile}, nil
		s.cfg.Signers = append(s.cfg.Signers, sc)
	}
	s.cfg.Default()
	for _, sc := range s.cfg.Signers {
		if sc.MaxLifetime.Duration != diffMaxLifetime {
			t.Fatalf("signer %s defaults to maxLifetime %s; kube-controller-manager's default is %s", sc.Name, sc.MaxLifetime.Duration, diffMaxLifetime)
		}
	}
	if s.cfg.Lint.Disabled || base.Lint != nil {
		t.Fatal("the differential test needs the default lint gate")
	}
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	client, err := signerclient.New(signerclient.Config{
		Address:    s.addr,
		CAFile:     filepath.Join(s.state, devpki.TLSCACert),
		CertFile:   filepath.Join(s.state, devpki.ClientCert),
		KeyFile:    filepath.Join(s.state, devpki.ClientKey),
		RPCTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, s.caCert
}

// signerDefaults are a signer's subtest name, Signet profile, and what its cases use unless
// they say otherwise.
type signerDefaults struct {
	short, abbrev, profile string
	as                     string
	csr                    func() *x509.CertificateRequest
	usages                 []certificatesv1.KeyUsage
	store                  store
}

// diffSignerOrder is the order of the signers' subtests.
var diffSignerOrder = []string{signerAPIClient, signerKubeletClient, signerKubeletServing, signerLegacyUnknown}

var diffSigners = map[string]signerDefaults{
	signerAPIClient: {short: "kube-apiserver-client", abbrev: "client", profile: profile.NameKubeAPIServerClient, as: asAlice,
		csr: func() *x509.CertificateRequest { return req("alice", developers) }, usages: use(uDS, uCA), store: storeAPI},
	signerKubeletClient: {short: "kube-apiserver-client-kubelet", abbrev: "kubelet", profile: profile.NameKubeAPIServerClientKubelet, as: asBootstrapToken,
		csr: func() *x509.CertificateRequest { return req("system:node:worker-a", nodeA) }, usages: use(uDS, uCA), store: storeAPI},
	signerKubeletServing: {short: "kubelet-serving", abbrev: "serving", profile: profile.NameKubeletServing, as: asNodeA,
		csr: func() *x509.CertificateRequest {
			return req("system:node:worker-a", nodeA, dnsNames("worker-a"), ipAddrs("192.0.2.10"))
		}, usages: use(uDS, uSA), store: storeAPI},
	signerLegacyUnknown: {short: "legacy-unknown", abbrev: "legacy", profile: profile.NameLegacyUnknown, as: asAlice,
		csr: func() *x509.CertificateRequest { return req("legacy-client", developers) }, usages: use(uDS, uCA), store: storeEtcd},
}

// differentialCases returns the whole corpus with each signer's defaults filled in.
func differentialCases() []diffCase {
	cases := concat(apiClientCases(), kubeletClientCases(), kubeletServingCases(), legacyUnknownCases())
	for i, tc := range cases {
		def := diffSigners[tc.signer]
		if tc.as == "" {
			tc.as = def.as
		}
		if tc.key == "" {
			tc.key = testpki.P256
		}
		if tc.csr == nil {
			tc.csr = def.csr()
		}
		tc.csr.ExtraExtensions = append(tc.csr.ExtraExtensions, tc.exts...)
		if tc.usages == nil {
			tc.usages = def.usages
		}
		if tc.lifetime == 0 {
			tc.lifetime = diffMaxLifetime
		}
		if tc.store == storeDefault {
			tc.store = def.store
		}
		cases[i] = tc
	}
	return cases
}
