package tpmapprover

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/looptest"
)

const (
	attested = "example.com/kube-apiserver-client-kubelet-tpm"
	other    = "example.com/serving"
)

// fakeVerifier answers err, or an identity for node-a.
type fakeVerifier struct {
	err   error
	calls int
}

func (v *fakeVerifier) VerifyAttestation(context.Context, *certificatesv1.CertificateSigningRequest) (signerclient.Attested, error) {
	v.calls++
	if v.err != nil {
		return signerclient.Attested{}, v.err
	}
	return signerclient.Attested{Node: "node-a", EK: "ab12", EKTrust: "allow-list", ProviderID: "tpm://node-a", FirstUse: true}, nil
}

// refusal is a server refusal with reason, as the signing server answers.
func refusal(code codes.Code, reason, msg string) error {
	st, _ := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "signet.dev"})
	return st.Err()
}

func newCSR(name, signer string, conds ...certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequest {
	c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	c.Spec.SignerName = signer
	for _, t := range conds {
		c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue})
	}
	return c
}

// TestSync decides one CSR per case and checks the conditions written and the calls made.
func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		csr      *certificatesv1.CertificateSigningRequest
		err      error
		want     certificatesv1.RequestConditionType // "" when nothing is written
		reason   string
		calls    int
		syncFail bool
	}{
		{"verified", newCSR("a", attested), nil, certificatesv1.CertificateApproved, ReasonVerified, 1, false},
		{"refused", newCSR("b", attested), refusal(codes.FailedPrecondition, "ATTESTATION_FAILED", "attestation refused: ticket single use: used"),
			certificatesv1.CertificateDenied, "AttestationFailed", 1, false},
		{"server unavailable", newCSR("c", attested), refusal(codes.Unavailable, "LEDGER_UNAVAILABLE", "retry"), "", "", 1, true},
		{"no answer", newCSR("d", attested), errors.New("connection refused"), "", "", 1, true},
		{"already approved", newCSR("e", attested, certificatesv1.CertificateApproved), nil, "", "", 0, false},
		{"already denied", newCSR("f", attested, certificatesv1.CertificateDenied), nil, "", "", 0, false},
		{"another signer", newCSR("g", other), nil, "", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := looptest.NewClientset(tc.csr)
			v := &fakeVerifier{err: tc.err}
			rec := record.NewFakeRecorder(10)
			c, err := New(kube, v, Options{SignerNames: []string{attested}, BackoffInitial: time.Millisecond, BackoffMax: time.Second, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			looptest.Start(t, ctx, cancel, c.loop)
			err = c.sync(ctx, tc.csr.Name)
			if (err != nil) != tc.syncFail {
				t.Fatalf("sync = %v; want an error: %v", err, tc.syncFail)
			}
			if v.calls != tc.calls {
				t.Fatalf("%d verifications, want %d", v.calls, tc.calls)
			}
			got, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, tc.csr.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			added := got.Status.Conditions[len(tc.csr.Status.Conditions):]
			switch {
			case tc.want == "" && len(added) != 0:
				t.Fatalf("conditions written: %+v", added)
			case tc.want != "" && (len(added) != 1 || added[0].Type != tc.want || added[0].Reason != tc.reason || added[0].Status != corev1.ConditionTrue):
				t.Fatalf("conditions written: %+v; want %s %s", added, tc.want, tc.reason)
			case tc.want == certificatesv1.CertificateDenied && !strings.Contains(added[0].Message, "ticket single use"):
				t.Fatalf("denial message %q does not carry the server's", added[0].Message)
			case tc.want == certificatesv1.CertificateApproved && !strings.Contains(added[0].Message, `node "node-a"`):
				t.Fatalf("approval message %q does not name the node", added[0].Message)
			}
		})
	}
}
