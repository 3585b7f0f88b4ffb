package integration

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/server/profile"
)

// TestKubeletServingProfile takes over kubernetes.io/kubelet-serving: a node's own serving
// CSR is signed; a CSR whose subject names another node, submitted by this node, ends Failed
// with the requester rule in the message; so does one without DNS or IP SAN. The requester
// identity is the real one the apiserver authenticated (spec.username, spec.groups).
func TestKubeletServingProfile(t *testing.T) {
	s := newSignet(t, "kubernetes.io/kubelet-serving", 24*time.Hour)
	s.cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeletServing}
	s.startServer()
	s.startWatcher()
	node, err := cluster.AddRequester("system:node:worker-1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	nodeSubject := pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}}

	good := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{
		Subject: nodeSubject, DNSNames: []string{"worker-1"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.10")},
	}, nil, usages...)
	impersonating := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:worker-2", Organization: []string{"system:nodes"}}, DNSNames: []string{"worker-2"},
	}, nil, usages...)
	noSAN := submit(t, node, s.signerName, p256(t), &x509.CertificateRequest{Subject: nodeSubject}, nil, usages...)
	for _, name := range []string{good.Name, impersonating.Name, noSAN.Name} {
		if err := cluster.Approve(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	got := waitFor(t, node.Client(), good.Name, 30*time.Second, "signed", signed)
	leaf := parseChain(t, got.Status.Certificate)[0]
	if leaf.Subject.CommonName != "system:node:worker-1" || leaf.DNSNames[0] != "worker-1" || !leaf.IPAddresses[0].Equal(net.ParseIP("192.0.2.10")) {
		t.Errorf("kubelet serving certificate: subject %s, SANs %v %v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d != 24*time.Hour {
		t.Errorf("lifetime %s, want 24h (a lifetime of 8 h or more is not extended by the backdate)", d)
	}
	for _, tc := range []struct{ name, want string }{
		{impersonating.Name, `requester: username equals the common name`},
		{noSAN.Name, `sans: at least one DNS name or IP address`},
	} {
		got := waitFor(t, node.Client(), tc.name, 30*time.Second, "Failed", func(c *certificatesv1.CertificateSigningRequest) bool {
			return condition(c, certificatesv1.CertificateFailed) != nil
		})
		cond := condition(got, certificatesv1.CertificateFailed)
		if cond.Reason != "PolicyViolation" || !strings.Contains(cond.Message, tc.want) {
			t.Errorf("CSR %s: Failed %s %q, want PolicyViolation naming %q", tc.name, cond.Reason, cond.Message, tc.want)
		}
	}
}
