package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/csrsigner"
	"github.com/signet-pki/signet/watcher/leader"
)

// The placeholders deploy/watcher/rbac.yaml is shipped with.
const (
	rbacFile             = "../../deploy/watcher/rbac.yaml"
	rbacSignerName       = "example.com/serving"
	rbacNamespace        = "signet-system"
	rbacServiceAccount   = "signet-watcher"
	rbacLeaseName        = "signet-watcher"
	eventsNamespaceOfCSR = metav1.NamespaceDefault
)

// deployedRBAC is deploy/watcher/rbac.yaml, decoded.
type deployedRBAC struct {
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roles               []*rbacv1.Role
	roleBindings        []*rbacv1.RoleBinding
}

// loadDeployedRBAC reads rbac.yaml as plain YAML documents separated by "---", with the
// placeholder signer name replaced by signerName and the watcher's namespace by namespace.
func loadDeployedRBAC(t *testing.T, signerName, namespace string) *deployedRBAC {
	t.Helper()
	data, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte(`"`+rbacSignerName+`"`)); n != 1 {
		t.Fatalf("%s names the placeholder signer %s %d times, want once (the sign rule)", rbacFile, rbacSignerName, n)
	}
	data = bytes.ReplaceAll(data, []byte(rbacSignerName), []byte(signerName))
	var out deployedRBAC
	for i, doc := range strings.Split(string(data), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s document %d: %v", rbacFile, i, err)
		}
		decode := func(into any) {
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s document %d (%s): %v", rbacFile, i, meta.Kind, err)
			}
		}
		switch meta.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			decode(&o)
			out.clusterRoles = append(out.clusterRoles, &o)
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			decode(&o)
			out.clusterRoleBindings = append(out.clusterRoleBindings, &o)
		case "Role":
			var o rbacv1.Role
			decode(&o)
			if o.Namespace == rbacNamespace {
				o.Namespace = namespace
			}
			out.roles = append(out.roles, &o)
		case "RoleBinding":
			var o rbacv1.RoleBinding
			decode(&o)
			if o.Namespace == rbacNamespace {
				o.Namespace = namespace
			}
			out.roleBindings = append(out.roleBindings, &o)
		default:
			t.Fatalf("%s document %d: unexpected kind %q", rbacFile, i, meta.Kind)
		}
	}
	return &out
}

// TestDeployedRBACIsMinimal reads the shipped rbac.yaml: every binding names the watcher's
// ServiceAccount, no rule grants approve or anything on approval, nor create, update or
// delete of PodCertificateRequests themselves, `sign` is limited to the configured signer,
// and the Events Role is in the namespace where CSR Events land.
func TestDeployedRBACIsMinimal(t *testing.T) {
	r := loadDeployedRBAC(t, rbacSignerName, rbacNamespace)
	// signet-watcher (CSRs, sign) and signet-watcher:pod-certificates.
	if len(r.clusterRoles) != 2 || len(r.clusterRoleBindings) != 2 {
		t.Fatalf("got %d ClusterRoles and %d ClusterRoleBindings, want two of each", len(r.clusterRoles), len(r.clusterRoleBindings))
	}
	var rules []rbacv1.PolicyRule
	for _, cr := range r.clusterRoles {
		rules = append(rules, cr.Rules...)
	}
	for _, rule := range rules {
		if slices.Contains(rule.Resources, "podcertificaterequests") &&
			slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
			t.Errorf("rule %+v does more than read PodCertificateRequests", rule)
		}
	}
	namespaces := map[string]bool{}
	for _, role := range r.roles {
		rules = append(rules, role.Rules...)
		namespaces[role.Namespace] = true
	}
	if !namespaces[eventsNamespaceOfCSR] || !namespaces[rbacNamespace] || len(namespaces) != 2 {
		t.Errorf("Roles are in %v, want exactly %s (CSR Events) and %s (the Lease)", namespaces, eventsNamespaceOfCSR, rbacNamespace)
	}
	for _, rule := range rules {
		for _, verb := range rule.Verbs {
			if verb == "*" || verb == "approve" || verb == "delete" || verb == "escalate" || verb == "bind" {
				t.Errorf("rule %+v grants %q", rule, verb)
			}
		}
		for _, res := range rule.Resources {
			if res == "*" || strings.HasSuffix(res, "/approval") || res == "secrets" {
				t.Errorf("rule %+v covers %q", rule, res)
			}
			if res == "signers" && !slices.Equal(rule.ResourceNames, []string{rbacSignerName}) {
				t.Errorf("sign rule resourceNames = %v, want exactly the configured signer", rule.ResourceNames)
			}
		}
	}
	var subjects []rbacv1.Subject
	for _, b := range r.clusterRoleBindings {
		subjects = append(subjects, b.Subjects...)
	}
	for _, b := range r.roleBindings {
		subjects = append(subjects, b.Subjects...)
	}
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Name != rbacServiceAccount || s.Namespace != rbacNamespace {
			t.Errorf("binding subject %+v, want the ServiceAccount %s/%s", s, rbacNamespace, rbacServiceAccount)
		}
	}
}

// applyDeployedRBAC creates rbac.yaml's roles, renamed for this test, in namespace (the
// watcher's) and default, and binds them to u instead of the ServiceAccount. It waits until
// the authorizer allows what the watcher needs.
func applyDeployedRBAC(t *testing.T, u *controlplane.User, signerName, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, admin := cluster.Admin()
	r := loadDeployedRBAC(t, signerName, namespace)
	rename := func(name string) string { return name + ":" + u.Name }
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u.Name}}
	create := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	for _, o := range r.clusterRoles {
		o.Name = rename(o.Name)
		_, err := admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		create("ClusterRole "+o.Name, err)
	}
	for _, o := range r.clusterRoleBindings {
		o.Name, o.RoleRef.Name, o.Subjects = rename(o.Name), rename(o.RoleRef.Name), subjects
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		create("ClusterRoleBinding "+o.Name, err)
	}
	for _, o := range r.roles {
		o.Name = rename(o.Name)
		_, err := admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		create("Role "+o.Namespace+"/"+o.Name, err)
	}
	for _, o := range r.roleBindings {
		o.Name, o.RoleRef.Name, o.Subjects = rename(o.Name), rename(o.RoleRef.Name), subjects
		_, err := admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		create("RoleBinding "+o.Namespace+"/"+o.Name, err)
	}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "sign", Group: "certificates.k8s.io", Resource: "signers", Name: signerName},
		{Verb: "update", Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "status"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace, Name: rbacLeaseName},
		{Verb: "create", Resource: "events", Namespace: eventsNamespaceOfCSR},
		{Verb: "watch", Group: "certificates.k8s.io", Resource: "podcertificaterequests"},
		{Verb: "update", Group: "certificates.k8s.io", Resource: "podcertificaterequests", Subresource: "status"},
		{Verb: "create", Resource: "events", Namespace: "any-pod-namespace"},
	} {
		if !allowed(ctx, t, admin, u, attrs) {
			t.Fatalf("the deployed RBAC does not allow %+v", attrs)
		}
	}
}

// allowed polls a SubjectAccessReview for u until it is allowed or ctx ends.
func allowed(ctx context.Context, t *testing.T, admin kubernetes.Interface, u *controlplane.User, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: append([]string{"system:authenticated"}, u.Groups...), ResourceAttributes: &attrs,
	}}
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Allowed, nil
	})
	return err == nil
}

// createNamespace creates the watcher's namespace for a test.
func createNamespace(t *testing.T, name string) {
	t.Helper()
	_, admin := cluster.Admin()
	_, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// electionTimings are short leader-election timings for tests: a dead leader is replaced
// within about 3 s.
var electionTimings = struct{ lease, renew, retry time.Duration }{3 * time.Second, 2 * time.Second, 500 * time.Millisecond}

// replica is one watcher run by a test.
type replica struct {
	cancel   context.CancelFunc
	finished chan struct{}
	err      error // Run's result, set before finished is closed
}

// stop cancels the replica and returns Run's result.
func (r *replica) stop() error {
	r.cancel()
	<-r.finished
	return r.err
}

// runWatcher runs a watcher for s's signer with kube (as some user), with leader election on
// in namespace under identity, until the test ends or the replica is stopped.
func (s *signet) runWatcher(kube kubernetes.Interface, namespace, identity string) *replica {
	t := s.t
	cfg := s.watcherConfig(s.addr)
	// An Event for every certificate, so that the RBAC test sees the watcher record one.
	cfg.SignedEvents = watcher.SignedEventsAll
	enabled := true
	le := &cfg.LeaderElection // LeaseName keeps its default, rbacLeaseName
	le.Enabled, le.Namespace, le.Identity = &enabled, namespace, identity
	le.LeaseDuration.Duration = electionTimings.lease
	le.RenewDeadline.Duration = electionTimings.renew
	le.RetryPeriod.Duration = electionTimings.retry
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = watcher.Run(ctx, cfg, kube, logger.WithValues("replica", identity))
	}()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// leaseHolder returns the holder of the Lease namespace/name, "" if none or absent.
func leaseHolder(ctx context.Context, namespace, name string) string {
	_, admin := cluster.Admin()
	lease, err := admin.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// waitLeaseHolder waits until identity holds the Lease in namespace and returns when it was
// first seen.
func waitLeaseHolder(t *testing.T, namespace, identity string, timeout time.Duration) time.Time {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 25*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return leaseHolder(ctx, namespace, rbacLeaseName) == identity, nil
	})
	if err != nil {
		t.Fatalf("%s did not hold the Lease %s/%s within %s (holder %q)", identity, namespace, rbacLeaseName, timeout, leaseHolder(context.Background(), namespace, rbacLeaseName))
	}
	return time.Now()
}

// approvedCSR submits a CSR for signerName as u and approves it as cluster-admin.
func approvedCSR(t *testing.T, u *controlplane.User, signerName, cn string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr := submit(t, u, signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, nil)
	if err := cluster.Approve(context.Background(), csr.Name); err != nil {
		t.Fatal(err)
	}
	return csr
}

// TestWatcherRunsWithDeployedRBAC runs the watcher, with leader election, as a user holding
// exactly deploy/watcher/rbac.yaml's grants: it takes the Lease in its own namespace, signs
// an approved CSR of its signer, and records an Event in "default". With that user's
// client, approving a CSR and writing a certificate for another signer are Forbidden.
func TestWatcherRunsWithDeployedRBAC(t *testing.T) {
	const namespace = "signet-rbac"
	s := newSignet(t, "it.signet.dev/rbac", time.Hour)
	s.startServer()
	createNamespace(t, namespace)
	u, err := cluster.AddUser("signet-watcher-rbac", nil)
	if err != nil {
		t.Fatal(err)
	}
	applyDeployedRBAC(t, u, s.signerName, namespace)
	requester, err := cluster.AddRequester("rbac-requester", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := s.runWatcher(u.Client(), namespace, "rbac-a")
	waitLeaseHolder(t, namespace, "rbac-a", 10*time.Second)

	csr := approvedCSR(t, requester, s.signerName, "rbac")
	got := waitFor(t, requester.Client(), csr.Name, 30*time.Second, "signed", signed)
	if leaf := parseChain(t, got.Status.Certificate)[0]; leaf.Subject.CommonName != "rbac" {
		t.Errorf("leaf CN = %q, want rbac", leaf.Subject.CommonName)
	}
	waitEvent(t, csr.Name, csrsigner.ReasonSigned)

	ctx := context.Background()
	mine := u.Client().CertificatesV1().CertificateSigningRequests()
	pending := submit(t, requester, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "pending"}}, nil)
	pending.Status.Conditions = append(pending.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "SelfApproved", Message: "by the watcher",
	})
	if _, err := mine.UpdateApproval(ctx, pending.Name, pending, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("watcher approving a CSR: err = %v, want Forbidden", err)
	}

	other := approvedCSR(t, requester, "it.signet.dev/rbac-other", "other")
	other, err = mine.Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("watcher reading another signer's CSR: %v", err)
	}
	other.Status.Certificate = got.Status.Certificate
	if _, err := mine.UpdateStatus(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("watcher writing a certificate for another signer: err = %v, want Forbidden", err)
	}

	if err := w.stop(); err != nil {
		t.Errorf("watcher.Run: %v", err)
	}
	if h := leaseHolder(ctx, namespace, rbacLeaseName); h != "" {
		t.Errorf("Lease holder after a clean stop = %q, want released", h)
	}
}

// waitEvent waits for an Event with reason on the CSR name from the watcher, in the
// namespace where Events on cluster-scoped objects land.
func waitEvent(t *testing.T, name, reason string) {
	t.Helper()
	_, admin := cluster.Admin()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(eventsNamespaceOfCSR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Source.Component == watcher.Component {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Event from %s on CSR %s in namespace %s: %v", reason, watcher.Component, name, eventsNamespaceOfCSR, err)
	}
}

// cuttable is a transport that fails every request once cut, as if the process had died
// or been partitioned from the apiserver: it can neither renew nor release its Lease.
type cuttable struct {
	next http.RoundTripper
	cut  atomic.Bool
}

func (c *cuttable) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, fmt.Errorf("%s %s: connection cut by the test", req.Method, req.URL.Path)
	}
	return c.next.RoundTrip(req)
}

// TestLeaderFailover runs two replicas as the deployed-RBAC user. Only the leader signs.
// When the leader loses the apiserver (it cannot release the Lease), it stops and returns
// leader.ErrLeaseLost within its renew deadline, and the standby takes over within one lease
// period and signs the next CSR.
func TestLeaderFailover(t *testing.T) {
	const namespace = "signet-failover"
	s := newSignet(t, "it.signet.dev/failover", time.Hour)
	s.startServer()
	createNamespace(t, namespace)
	u, err := cluster.AddUser("signet-watcher-failover", nil)
	if err != nil {
		t.Fatal(err)
	}
	applyDeployedRBAC(t, u, s.signerName, namespace)
	requester, err := cluster.AddRequester("failover-requester", nil)
	if err != nil {
		t.Fatal(err)
	}

	link := &cuttable{}
	restA := u.Config()
	restA.Wrap(func(rt http.RoundTripper) http.RoundTripper { link.next = rt; return link })
	kubeA, err := kubernetes.NewForConfig(restA)
	if err != nil {
		t.Fatal(err)
	}
	a := s.runWatcher(kubeA, namespace, "replica-a")
	waitLeaseHolder(t, namespace, "replica-a", 10*time.Second)
	b := s.runWatcher(newClient(t, u.Config()), namespace, "replica-b")

	first := approvedCSR(t, requester, s.signerName, "first")
	waitFor(t, requester.Client(), first.Name, 30*time.Second, "signed by the leader", signed)
	if h := leaseHolder(context.Background(), namespace, rbacLeaseName); h != "replica-a" {
		t.Fatalf("Lease holder = %q while replica-a runs, want replica-a", h)
	}

	link.cut.Store(true)
	cutAt := time.Now()
	select {
	case <-a.finished:
		if !errors.Is(a.err, leader.ErrLeaseLost) {
			t.Errorf("partitioned leader: Run() = %v, want leader.ErrLeaseLost", a.err)
		}
		if d := time.Since(cutAt); d > electionTimings.renew+2*electionTimings.retry+2*time.Second {
			t.Errorf("partitioned leader stopped after %s, want within about its renew deadline (%s)", d, electionTimings.renew)
		}
	case <-time.After(electionTimings.lease + 10*time.Second):
		t.Fatal("partitioned leader kept running")
	}
	tookOver := waitLeaseHolder(t, namespace, "replica-b", electionTimings.lease+10*time.Second)
	// The standby may take the Lease only once it expired, and must within one lease period
	// plus its polling: the last renewal it saw, plus the lease duration, plus a retry.
	if d := tookOver.Sub(cutAt); d < electionTimings.lease-2*electionTimings.retry || d > electionTimings.lease+3*electionTimings.retry+time.Second {
		t.Errorf("standby took over %s after the leader was cut off, want about one lease duration (%s)", d, electionTimings.lease)
	}

	second := approvedCSR(t, requester, s.signerName, "second")
	waitFor(t, requester.Client(), second.Name, 30*time.Second, "signed by the new leader", signed)
	select {
	case <-b.finished:
		t.Fatalf("new leader stopped: %v", b.err)
	default:
	}
	if err := b.stop(); err != nil {
		t.Errorf("new leader: Run() = %v, want nil after a clean stop", err)
	}
	if h := leaseHolder(context.Background(), namespace, rbacLeaseName); h != "" {
		t.Errorf("Lease holder after the new leader stopped = %q, want released", h)
	}
}

func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}
