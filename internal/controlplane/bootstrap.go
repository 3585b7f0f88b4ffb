package controlplane

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// BootstrapGroup is the group kubeadm puts its node-join tokens in (besides
// system:bootstrappers, which every bootstrap token has).
const BootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// BootstrapToken is a bootstrap token stored in the cluster, as `kubeadm token create` makes
// one. The apiserver authenticates it (with --enable-bootstrap-token-auth, see
// BootstrapTokenFlags) as system:bootstrap:<ID> in the groups system:bootstrappers and
// BootstrapGroup.
type BootstrapToken struct {
	// ID is the public part, six characters of [a-z0-9].
	ID string
	// Secret is the private part, sixteen characters of [a-z0-9].
	Secret string
}

// Token returns the bearer token, "<id>.<secret>".
func (b BootstrapToken) Token() string { return b.ID + "." + b.Secret }

// Username returns the username the apiserver gives the token.
func (b BootstrapToken) Username() string { return "system:bootstrap:" + b.ID }

// BootstrapTokenFlags are the kube-apiserver flags (Options.APIServerFlags) that make it
// authenticate bootstrap tokens.
func BootstrapTokenFlags() map[string]string {
	return map[string]string{"enable-bootstrap-token-auth": "true"}
}

// AddBootstrapToken stores tok as a bootstrap token Secret in kube-system, valid for ttl and
// for authentication only, in BootstrapGroup, as kubeadm does.
func (c *Cluster) AddBootstrapToken(ctx context.Context, tok BootstrapToken, ttl time.Duration) error {
	_, admin := c.Admin()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tok.ID, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       tok.ID,
			"token-secret":                   tok.Secret,
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              BootstrapGroup,
			"expiration":                     time.Now().Add(ttl).UTC().Format(time.RFC3339),
		},
	}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating bootstrap token %s: %w", tok.ID, err)
	}
	return nil
}

// BootstrapConfig returns a REST config that authenticates with tok, as a kubelet's
// --bootstrap-kubeconfig does.
func (c *Cluster) BootstrapConfig(tok BootstrapToken) *rest.Config {
	cfg, _ := c.Admin()
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, BearerToken: tok.Token(), QPS: cfg.QPS, Burst: cfg.Burst}
}

// AllowNodeBootstrap creates the ClusterRoleBindings kubeadm creates for joining nodes:
// BootstrapGroup may create CSRs (system:node-bootstrapper) and have them auto-approved
// (nodeclient), and nodes may have their renewals auto-approved (selfnodeclient).
// kube-controller-manager's csrapproving controller acts on the last two.
func (c *Cluster) AllowNodeBootstrap(ctx context.Context) error {
	_, admin := c.Admin()
	bindings := []struct{ name, role, group string }{
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", BootstrapGroup},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", BootstrapGroup},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	for _, b := range bindings {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	// RBAC is applied asynchronously: wait until a bootstrapper may create CSRs.
	joiner := &User{Name: "system:bootstrap:probe", Groups: []string{"system:bootstrappers", BootstrapGroup}}
	rule := rbacv1.PolicyRule{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create"}}
	if err := c.waitAllowed(ctx, joiner, rule); err != nil {
		return fmt.Errorf("waiting for the node bootstrap bindings to take effect: %w", err)
	}
	return nil
}
