package signerapi_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

// TestBootstrapJoinRecorded follows a node's client certificates through the service with
// the default lint gate, as a kubelet asks for them: its first certificate requested with a
// bootstrap token is issued and its ledger record names the bootstrap requester and the
// bootstrap grounds; its renewal as itself is issued on ordinary grounds; a plain user's
// request for the node is refused and recorded; and on a signer with bootstrap.disabled the
// join is refused with a message naming the option.
func TestBootstrapJoinRecorded(t *testing.T) {
	t.Parallel()
	const kubelet, closed = "kubernetes.io/kube-apiserver-client-kubelet", "example.com/kubelet-no-bootstrap"
	h := newHarness(t, harnessOptions{signers: []signerSpec{
		{name: kubelet, spec: profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}, lint: true},
		{name: closed, spec: profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: &profile.BootstrapSpec{Disabled: true}}, lint: true},
	}})
	nodeCSR := func() []byte {
		return testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}}})
	}
	request := func(signer, uid, user string, groups ...string) *signetv1.SignCertificateSigningRequestRequest {
		r := signReq(signer, uid, nodeCSR(), "digital signature", "client auth")
		r.Requester = &signetv1.Requester{Username: user, Uid: user + "-uid", Groups: groups}
		return r
	}
	bootstrapGroups := []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"}
	ctx := context.Background()

	if _, err := h.svc.SignCertificateSigningRequest(ctx, request(kubelet, "join", "system:bootstrap:abcdef", bootstrapGroups...)); err != nil {
		t.Fatalf("bootstrap join: %v", err)
	}
	if _, err := h.svc.SignCertificateSigningRequest(ctx, request(kubelet, "renew", "system:node:worker-1", "system:nodes", "system:authenticated")); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	_, err := h.svc.SignCertificateSigningRequest(ctx, request(kubelet, "plain", "mallory", "system:authenticated"))
	if msg := wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION"); !strings.Contains(msg, "neither the node nor in a bootstrap group") {
		t.Errorf("plain user's refusal %q does not say the requester is neither the node nor a bootstrapper", msg)
	}
	_, err = h.svc.SignCertificateSigningRequest(ctx, request(closed, "closed-join", "system:bootstrap:abcdef", bootstrapGroups...))
	if msg := wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION"); !strings.Contains(msg, "bootstrap.disabled") {
		t.Errorf("join on a signer with bootstrap off: refusal %q does not name bootstrap.disabled", msg)
	}

	want := map[string]struct {
		decision  ledger.Decision
		requester string
		grounds   string
	}{
		"join":        {ledger.Issued, "system:bootstrap:abcdef", `bootstrap: requester in group "system:bootstrappers"`},
		"renew":       {ledger.Issued, "system:node:worker-1", ""},
		"plain":       {ledger.Refused, "mallory", ""},
		"closed-join": {ledger.Refused, "system:bootstrap:abcdef", ""},
	}
	recs := h.records(t)
	if len(recs) != len(want) {
		t.Fatalf("%d ledger records, want %d", len(recs), len(want))
	}
	for _, r := range recs {
		w, ok := want[r.ObjectUID]
		if !ok {
			t.Errorf("unexpected record for %q", r.ObjectUID)
			continue
		}
		if r.Decision != w.decision || r.Requester != w.requester || r.Grounds != w.grounds {
			t.Errorf("record of %s: %s by %q on grounds %q; want %s by %q on grounds %q",
				r.ObjectUID, r.Decision, r.Requester, r.Grounds, w.decision, w.requester, w.grounds)
		}
	}
}
