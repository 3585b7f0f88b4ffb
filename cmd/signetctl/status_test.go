package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/signerclient"
)

// TestStatusCSR: a CSR approved, signed by the server (as the watcher would) and given an Event
// shows its state, conditions, certificate, Events and the server's ledger record.
func TestStatusCSR(t *testing.T) {
	addr, dir := devServer(t)
	cluster := controlplanetest.Start(t, controlplane.Options{})
	ops, err := cluster.AddUser("ops", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := ops.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kcPath := writeTemp(t, "kubeconfig", kc)
	kube := ops.Client()
	ctx := context.Background()
	csrPEM, err := os.ReadFile(csrFile(t))
	if err != nil {
		t.Fatal(err)
	}
	exp := int32(3600)
	csr, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: devpki.DefaultSigner, Request: csrPEM, ExpirationSeconds: &exp,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "OpsApproved", Message: "checked by hand"})
	if csr, err = kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "web", csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client, err := signerclient.New(signerclient.Config{Address: addr, CAFile: filepath.Join(dir, devpki.TLSCACert),
		CertFile: filepath.Join(dir, devpki.ClientCert), KeyFile: filepath.Join(dir, devpki.ClientKey), RPCTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	issued, err := client.SignCSR(ctx, csr)
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Certificate = issued.Chain
	if _, err = kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.signed"},
		InvolvedObject: corev1.ObjectReference{Kind: "CertificateSigningRequest", Name: "web", UID: csr.UID, APIVersion: "certificates.k8s.io/v1"},
		Type:           corev1.EventTypeNormal, Reason: "Signed", Message: "signed by signet", Count: 1,
		Source: corev1.EventSource{Component: "signet-watcher"}, LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	conn := []string{"--kubeconfig", kcPath, "--server", addr, "--dev-state-dir", dir}
	code, out, errOut := runCmd(append([]string{"status", "csr", "web"}, conn...)...)
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		"CertificateSigningRequest web (certificates.k8s.io/v1, uid " + string(csr.UID) + ")\n",
		"  Signer:      " + devpki.DefaultSigner + "\n",
		"  Requester:   ops (groups system:masters, system:authenticated)\n",
		"  State:       issued\n",
		"  Certificate: CN=alice, serial " + issued.Serial,
		"    Approved  True    OpsApproved",
		"Normal  Signed  signet-watcher  signed by signet\n",
		"  Ledger of " + addr + ":\n    SEQ  TIME",
		"issued    " + devpki.DefaultSigner + "  csr/" + string(csr.UID) + "  serial " + issued.Serial,
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status (exit %d, stderr %q) lacks %q", code, errOut, want)
		}
	}

	code, out, _ = runCmd(append([]string{"status", "csr", "web", "-o", "json"}, conn...)...)
	var st objectStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("-o json: exit %d, %v\n%s", code, err, out)
	}
	if st.State != "issued" || st.UID != string(csr.UID) || len(st.Events) != 1 || len(st.Ledger.Records) != 1 ||
		st.Ledger.Records[0].Serial != issued.Serial || st.Certificate == nil || st.Certificate.SerialNumber != issued.Serial {
		t.Errorf("-o json: %+v", st)
	}

	// Without connection settings the ledger is not asked; the cluster part is shown.
	code, out, _ = runCmd("status", "csr", "web", "--kubeconfig", kcPath)
	if code != 0 || !strings.Contains(out, "  State:       issued\n") || !strings.Contains(out, "  Ledger:\n    not asked: no connection settings") {
		t.Errorf("status without a server: exit %d, output:\n%s", code, out)
	}
	// The server does not answer: the cluster part, and exit 2.
	code, out, errOut = runCmd("status", "csr", "web", "--kubeconfig", kcPath, "--server", deadAddress(t), "--dev-state-dir", dir, "--timeout", "2s")
	if code != 2 || !strings.Contains(out, "  State:       issued\n") || !strings.Contains(errOut, "the server's ledger records: Unavailable") {
		t.Errorf("status with the server down: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "csr", "missing"}, 1, "CertificateSigningRequest missing not found"},
		{[]string{"status", "pcr", "default/missing"}, 1, "PodCertificateRequest default/missing not found"},
		{[]string{"status", "pcr", "missing"}, 2, `"missing" is not NAMESPACE/NAME`},
		{[]string{"status", "csr"}, 2, "accepts 1 arg"},
	} {
		code, out, errOut := runCmd(append(tc.args, "--kubeconfig", kcPath)...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
	if code, _, errOut = runCmd("status", "csr", "web", "--kubeconfig", filepath.Join(t.TempDir(), "none")); code != 2 || !strings.Contains(errOut, "kubeconfig") {
		t.Errorf("missing kubeconfig: exit %d, stderr %q", code, errOut)
	}
}
