package integration

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/signerclient"
)

// check compares a decided run with its case: the apiserver's refusal, or the requester the
// apiserver recorded, both signers' outcomes, and, where both issue, the certificates.
func (d *differential) check(t *testing.T, r *caseRun) {
	want := r.tc.want
	if want.apiserver != "" {
		checkAPIRefusal(t, r)
		return
	}
	if r.createErr != nil {
		t.Fatalf("creating CSR %s as %s: %v", r.name, r.tc.as, r.createErr)
	}
	if r.approveErr != nil {
		t.Fatalf("approving CSR %s: %v", r.name, r.approveErr)
	}
	d.checkRequester(t, r)
	if !r.decided {
		t.Fatalf("kube-controller-manager did not decide CSR %s within %s; last status %+v; log %s",
			r.name, diffKCMTimeout, r.obj.Status, d.kcm.LogPath())
	}
	kcmGot, kcmOK := kcmDecision(r.obj, want)
	signetGot, signetOK := signetDecision(r, want)
	if !kcmOK || !signetOK {
		t.Errorf("outcomes differ from the case table:\n  KCM:    %s\n          want %s\n  Signet: %s\n          want %s%s",
			kcmGot, wantKCM(want), signetGot, wantSignet(want), lintNote(r))
	}
	var kcmCert, signetCert *x509.Certificate
	if signed(r.obj) {
		pub, err := publicKeyOf(r.obj.Spec.Request)
		if err != nil {
			t.Fatal(err)
		}
		kcmCert = checkChain(t, "KCM", r.obj.Status.Certificate, d.kcmCA, pub, r.tc.lifetime)
		checkBackdate(t, "KCM", kcmCert, r.approvedAt, r.decidedAt)
	}
	if r.signetErr == nil {
		signetCert = checkChain(t, "Signet", r.issued.Chain, d.signetCA, r.key.Public(), r.tc.lifetime)
		checkBackdate(t, "Signet", signetCert, r.signetFrom, r.signetTo)
	}
	if kcmCert != nil && want.lint != "" {
		checkLintFlags(t, kcmCert, want.lint)
	}
	switch {
	case kcmCert != nil && signetCert != nil:
		for _, diff := range certDiffs(kcmCert, signetCert) {
			t.Errorf("certificates differ: %s", diff)
		}
		checkSerials(t, kcmCert, signetCert)
		t.Logf("both issue; KCM:    %s", describeCert(kcmCert))
		t.Logf("both issue; Signet: %s", describeCert(signetCert))
	case kcmCert != nil:
		t.Logf("KCM issues: %s", describeCert(kcmCert))
	}
	if diff := want.deliberate; diff != nil && kcmOK && signetOK {
		t.Logf("deliberate difference %q: KCM issues, Signet %s; why: %s", diff.id, signetGot, diff.why)
	}
}

// checkAPIRefusal checks that the apiserver refused to create the CSR as the case says.
func checkAPIRefusal(t *testing.T, r *caseRun) {
	t.Helper()
	if r.createErr == nil {
		t.Fatalf("the apiserver created CSR %s, want a refusal containing %q", r.name, r.tc.want.apiserver)
	}
	if !strings.Contains(r.createErr.Error(), r.tc.want.apiserver) {
		t.Fatalf("the apiserver refused with %q, want a refusal containing %q", r.createErr, r.tc.want.apiserver)
	}
	t.Logf("the apiserver refuses it, so no signer ever sees it: %v", r.createErr)
}

// checkRequester checks that the CSR records its identity as spec.username and spec.groups.
func (d *differential) checkRequester(t *testing.T, r *caseRun) {
	t.Helper()
	id, spec := d.as[r.tc.as], r.created.Spec
	if spec.Username != id.username || !slices.Equal(slices.Sorted(slices.Values(spec.Groups)), slices.Sorted(slices.Values(id.groups))) {
		t.Errorf("CSR %s: requester %q in %q, want %q in %q", r.name, spec.Username, spec.Groups, id.username, id.groups)
	}
}

// kcmDecision describes kube-controller-manager's decision on obj, and whether it is the one
// wanted.
func kcmDecision(obj *certificatesv1.CertificateSigningRequest, want expect) (string, bool) {
	if f := condition(obj, certificatesv1.CertificateFailed); f != nil {
		ok := want.kcm == refuses && f.Reason == "SignerValidationFailure" && strings.Contains(f.Message, want.kcmFailed)
		return fmt.Sprintf("refused (%s: %s)", f.Reason, f.Message), ok
	}
	return "issued", want.kcm == issues
}

// signetDecision describes Signet's answer to r, and whether it is the one wanted.
func signetDecision(r *caseRun, want expect) (string, bool) {
	if r.signetErr == nil {
		return "issued", want.signet == issues
	}
	reason, msg, terminal := signerclient.Classify(r.signetErr)
	if !terminal {
		return fmt.Sprintf("no terminal answer (%s: %v)", reason, r.signetErr), false
	}
	ok := want.signet == refuses && reason == want.reason && strings.Contains(msg, want.rule)
	return fmt.Sprintf("refused (%s: %s)", reason, msg), ok
}

// wantKCM describes the KCM outcome a case wants.
func wantKCM(want expect) string {
	if want.kcm == refuses {
		return fmt.Sprintf("refused (SignerValidationFailure: ...%s...)", want.kcmFailed)
	}
	return "issued"
}

// wantSignet describes the Signet outcome a case wants.
func wantSignet(want expect) string {
	switch {
	case want.signet == refuses && want.deliberate != nil:
		return fmt.Sprintf("refused (%s: ...%s...), deliberately: %s", want.reason, want.rule, want.deliberate.id)
	case want.signet == refuses:
		return fmt.Sprintf("refused (%s: ...%s...)", want.reason, want.rule)
	case want.kcm == issues:
		return "issued, the same certificate as KCM"
	}
	return "issued"
}

// lintNote explains Signet's refusal of a case whose certificate a lint flags although the
// profile accepts the request.
func lintNote(r *caseRun) string {
	if r.tc.want.lint == "" || r.signetErr == nil {
		return ""
	}
	_, msg, _ := signerclient.Classify(r.signetErr)
	if strings.Contains(msg, r.tc.want.lint) {
		return fmt.Sprintf("\n  known: the profile accepts this request, but the lint gate refuses what %s flags; "+
			"the case passes once the gate accepts what the profile accepts", r.tc.want.lint)
	}
	return fmt.Sprintf("\n  note: the certificate is one that %s flags", r.tc.want.lint)
}
