package controlplane

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
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
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// setupTimeout bounds the API calls AddRequester, AddSigner and Grant make.
const setupTimeout = 30 * time.Second

// User is an identity the apiserver authenticates by client certificate. Its methods are
// safe for concurrent use.
type User struct {
	// Name is the username the apiserver sees.
	Name string
	// Groups are the groups the apiserver sees, besides system:authenticated.
	Groups []string

	auth       *envtest.AuthenticatedUser
	clientOnce sync.Once
	client     kubernetes.Interface
	clientErr  error
}

// Config returns a fresh copy of the user's REST config (QPS 1000, burst 2000).
func (u *User) Config() *rest.Config { return rest.CopyConfig(u.auth.Config()) }

// Client returns a client that acts as the user. It is built once and shared.
func (u *User) Client() kubernetes.Interface {
	u.clientOnce.Do(func() {
		u.client, u.clientErr = kubernetes.NewForConfig(u.Config())
	})
	if u.clientErr != nil {
		// NewForConfig fails only on a malformed config, which envtest never produces.
		panic(fmt.Sprintf("controlplane: building client for %s: %v", u.Name, u.clientErr))
	}
	return u.client
}

// Kubeconfig returns a kubeconfig with the user's client certificate and key inline.
func (u *User) Kubeconfig() ([]byte, error) { return u.auth.KubeConfig() }

// AddUser provisions a user with a client certificate for name and groups. The user has no
// permissions beyond those of system:authenticated until granted some (see Grant).
func (c *Cluster) AddUser(name string, groups []string) (*User, error) {
	// envtest's client-certificate CA counts serials without a lock.
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	auth, err := c.plane.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	return &User{Name: name, Groups: append([]string(nil), groups...), auth: auth}, nil
}

// AddRequester provisions a user that may create, get, list, watch and delete
// CertificateSigningRequests, and nothing else.
func (c *Cluster) AddRequester(name string, groups []string) (*User, error) {
	return c.addUserWithRules("requester", name, groups, []rbacv1.PolicyRule{{
		APIGroups: []string{certificatesv1.GroupName},
		Resources: []string{"certificatesigningrequests"},
		Verbs:     []string{"create", "get", "list", "watch", "delete"},
	}})
}

// AddSigner provisions the watcher's least-privilege identity for signerNames: get, list and
// watch CertificateSigningRequests, update their status, `sign` on exactly those signers,
// and create and patch Events (core and events.k8s.io). It may not approve.
func (c *Cluster) AddSigner(name string, signerNames []string) (*User, error) {
	if len(signerNames) == 0 {
		return nil, fmt.Errorf("adding signer %s: no signer names", name)
	}
	return c.addUserWithRules("signer", name, nil, SignerRules(signerNames))
}

// AddWatcher provisions signet-watcher's least-privilege identity for signerNames: the rules
// of AddSigner (CSRs, `sign`, Events), those of PodCertificateSignerRules (get, list and
// watch PodCertificateRequests in every namespace, update their status) and those of
// TrustBundleRules (publish the signers' ClusterTrustBundles). It may not approve CSRs nor
// create PodCertificateRequests.
func (c *Cluster) AddWatcher(name string, signerNames []string) (*User, error) {
	if len(signerNames) == 0 {
		return nil, fmt.Errorf("adding watcher %s: no signer names", name)
	}
	rules := append(SignerRules(signerNames), PodCertificateSignerRules()...)
	rules = append(rules, TrustBundleRules(signerNames)...)
	return c.addUserWithRules("watcher", name, nil, rules)
}

// PodCertificateSignerRules returns the RBAC rules a PodCertificateRequest signer needs on top
// of SignerRules (which grants `sign` on its signer names, and Events): get, list and watch
// podcertificaterequests and update podcertificaterequests/status, in every namespace. They
// are separate so that a CSR-only signer (kube-controller-manager's in the benchmark) keeps
// exactly SignerRules.
func PodCertificateSignerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"podcertificaterequests"},
			Verbs:     []string{"get", "list", "watch"},
		},
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"podcertificaterequests/status"},
			Verbs:     []string{"update"},
		},
	}
}

// SignerRules returns the RBAC rules AddSigner grants for signerNames.
func SignerRules(signerNames []string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"certificatesigningrequests"},
			Verbs:     []string{"get", "list", "watch"},
		},
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"certificatesigningrequests/status"},
			Verbs:     []string{"update"},
		},
		{
			APIGroups:     []string{certificatesv1.GroupName},
			Resources:     []string{"signers"},
			ResourceNames: append([]string(nil), signerNames...),
			Verbs:         []string{"sign"},
		},
		{
			APIGroups: []string{corev1.GroupName, "events.k8s.io"},
			Resources: []string{"events"},
			Verbs:     []string{"create", "patch"},
		},
	}
}

// TrustBundleRules returns the RBAC rules signet-watcher needs to publish signer-linked
// ClusterTrustBundles for signerNames: `attest` on exactly those signers, and get, create and
// update on clustertrustbundles (as deploy/watcher grants them).
func TrustBundleRules(signerNames []string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups:     []string{certificatesv1.GroupName},
			Resources:     []string{"signers"},
			ResourceNames: append([]string(nil), signerNames...),
			Verbs:         []string{"attest"},
		},
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"clustertrustbundles"},
			Verbs:     []string{"get", "create", "update"},
		},
	}
}

// ApproverRules returns the RBAC rules signet-watcher's TPM approver needs for signerNames:
// `approve` on exactly those signers and update on certificatesigningrequests/approval (as
// deploy/watcher grants them when tpmApprover is on).
func ApproverRules(signerNames []string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups:     []string{certificatesv1.GroupName},
			Resources:     []string{"signers"},
			ResourceNames: append([]string(nil), signerNames...),
			Verbs:         []string{"approve"},
		},
		{
			APIGroups: []string{certificatesv1.GroupName},
			Resources: []string{"certificatesigningrequests/approval"},
			Verbs:     []string{"update"},
		},
	}
}

// NodeAddressRules returns the RBAC rule signet-watcher needs to forward node addresses
// (nodeAddresses): get on nodes.
func NodeAddressRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{corev1.GroupName}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}
}

// AddApprovingWatcher is AddWatcher with ApproverRules for approverSignerNames and
// NodeAddressRules.
func (c *Cluster) AddApprovingWatcher(name string, signerNames, approverSignerNames []string) (*User, error) {
	rules := append(SignerRules(signerNames), PodCertificateSignerRules()...)
	rules = append(rules, TrustBundleRules(signerNames)...)
	rules = append(rules, ApproverRules(approverSignerNames)...)
	rules = append(rules, NodeAddressRules()...)
	return c.addUserWithRules("watcher", name, nil, rules)
}

// addUserWithRules provisions a user and grants it rules under a role named after kind.
func (c *Cluster) addUserWithRules(kind, name string, groups []string, rules []rbacv1.PolicyRule) (*User, error) {
	u, err := c.AddUser(name, groups)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := c.Grant(ctx, "signet-testcluster:"+kind+":"+name, u, rules); err != nil {
		return nil, err
	}
	return u, nil
}

// Grant creates the ClusterRole role with rules and binds it to user u, then waits until the
// apiserver's authorizer allows the first verb of every rule (RBAC is applied asynchronously).
func (c *Cluster) Grant(ctx context.Context, role string, u *User, rules []rbacv1.PolicyRule) error {
	_, admin := c.Admin()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The same user granted again (a test run twice on one cluster): replace the rules.
		_, err = admin.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating ClusterRole %s: %w", role, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u.Name}},
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = admin.RbacV1().ClusterRoleBindings().Update(ctx, crb, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", role, err)
	}
	for _, r := range rules {
		if err := c.waitAllowed(ctx, u, r); err != nil {
			return fmt.Errorf("waiting for ClusterRole %s to take effect: %w", role, err)
		}
	}
	return nil
}

// waitAllowed polls a SubjectAccessReview for the first verb, group, resource and name of r.
func (c *Cluster) waitAllowed(ctx context.Context, u *User, r rbacv1.PolicyRule) error {
	if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
		return nil
	}
	attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
	if res, sub, ok := strings.Cut(r.Resources[0], "/"); ok {
		attrs.Resource, attrs.Subresource = res, sub
	}
	if len(r.ResourceNames) > 0 {
		attrs.Name = r.ResourceNames[0]
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: append([]string{"system:authenticated"}, u.Groups...), ResourceAttributes: attrs,
	}}
	_, admin := c.Admin()
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Allowed, nil
	})
}

// Approve approves the CertificateSigningRequest name as cluster-admin through the approval
// subresource, as `kubectl certificate approve` does, with reason SignetTest. It retries on
// conflict and does nothing if the CSR is already approved.
func (c *Cluster) Approve(ctx context.Context, name string) error {
	return c.decide(ctx, name, certificatesv1.CertificateApproved)
}

// Deny denies the CertificateSigningRequest name as cluster-admin, as `kubectl certificate
// deny` does, with reason SignetTest. It retries on conflict and does nothing if the CSR is
// already denied.
func (c *Cluster) Deny(ctx context.Context, name string) error {
	return c.decide(ctx, name, certificatesv1.CertificateDenied)
}

// decide adds the condition typ (Approved or Denied) to the CSR name.
func (c *Cluster) decide(ctx context.Context, name string, typ certificatesv1.RequestConditionType) error {
	_, admin := c.Admin()
	csrs := admin.CertificatesV1().CertificateSigningRequests()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range csr.Status.Conditions {
			if cond.Type == typ && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           typ,
			Status:         corev1.ConditionTrue,
			Reason:         "SignetTest",
			Message:        "set by internal/controlplane",
			LastUpdateTime: metav1.Now(),
		})
		_, err = csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting %s on CSR %s: %w", typ, name, err)
	}
	return nil
}

// WriteKubeconfig writes u's kubeconfig (cluster-admin's if u is nil) to path with mode
// 0600, for subprocesses.
func (c *Cluster) WriteKubeconfig(u *User, path string) error {
	if u == nil {
		u = c.admin
	}
	data, err := u.Kubeconfig()
	if err != nil {
		return fmt.Errorf("rendering kubeconfig for %s: %w", u.Name, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig for %s: %w", u.Name, err)
	}
	return nil
}
