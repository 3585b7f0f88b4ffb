package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
)

// csrFile writes a P-256 CSR for CN=alice to a temporary file.
func csrFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "alice.csr")
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}})
	if err := os.WriteFile(path, csr, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExplainAllowed(t *testing.T) {
	addr, dir := devServer(t)
	code, out, errOut := runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--signer", devpki.DefaultSigner,
		"--usages", "digital signature, client auth", "--expiration-seconds", "3600", "--username", "alice", "--groups", "dev,ops", csrFile(t))
	t.Logf("output:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "✓ ") || strings.Contains(out, "✗ ") {
		t.Errorf("want only ✓ rules:\n%s", out)
	}
	if !strings.HasSuffix(out, "would be signed, lifetime 1h0m0s\n") {
		t.Errorf("no lifetime verdict:\n%s", out)
	}
}

func TestExplainRefused(t *testing.T) {
	addr, dir := devServer(t)
	// Flags after the file work too.
	code, out, errOut := runCmd("explain", csrFile(t), "--server", addr, "--dev-state-dir", dir, "--signer", devpki.DefaultSigner,
		"--usages", "digital signature,cert sign")
	t.Logf("output:\n%s", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut)
	}
	var failed []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "✗ ") {
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), "cert sign") || !strings.Contains(strings.Join(failed, "\n"), " — ") {
		t.Errorf("want a ✗ rule with its detail about cert sign, got %q", failed)
	}
	if !strings.Contains(out, "would be refused: POLICY_VIOLATION: ") {
		t.Errorf("no POLICY_VIOLATION verdict:\n%s", out)
	}
}

func TestExplainJSONAndStdin(t *testing.T) {
	addr, dir := devServer(t)
	f, err := os.Open(csrFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdin := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = stdin }()
	code, out, errOut := runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--signer", devpki.DefaultSigner,
		"--usages", "digital signature,cert sign", "--output", "json", "-")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut)
	}
	var resp signetv1.ExplainCertificateSigningRequestResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("output is not an ExplainCertificateSigningRequestResponse: %v\n%s", err, out)
	}
	if resp.GetAllowed() || resp.GetReason() != "POLICY_VIOLATION" || len(resp.GetRules()) == 0 {
		t.Fatalf("response = %v", &resp)
	}
}

func TestExplainErrors(t *testing.T) {
	addr, dir := devServer(t)
	csr := csrFile(t)
	conn := []string{"--server", addr, "--dev-state-dir", dir}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--usages", "client auth", csr}, "missing --signer"},
		{[]string{"--signer", devpki.DefaultSigner}, "missing the PEM CSR file"},
		{[]string{"--signer", devpki.DefaultSigner, csr, "other"}, "one argument expected"},
		{[]string{"--signer", devpki.DefaultSigner, filepath.Join(dir, "missing.pem")}, "reading the CSR"},
		{[]string{"--signer", devpki.DefaultSigner, filepath.Join(dir, devpki.ConfigFile)}, "no PEM block"},
		{[]string{"--kubeconfig", "kc", "--signer", "x", "name"}, "cannot be combined"},
		{[]string{"--kubeconfig", "kc"}, "missing the CertificateSigningRequest name"},
		{[]string{"--kubeconfig", filepath.Join(dir, "no-kubeconfig"), "name"}, "kubeconfig"},
	} {
		code, out, errOut := runCmd(append(append([]string{"explain"}, conn...), tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestExplainUnknownSigner: the server refuses the call (exit 1, as a request that would be
// refused), naming its reason.
func TestExplainUnknownSigner(t *testing.T) {
	addr, dir := devServer(t)
	code, out, errOut := runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--signer", "example.com/nope", "--usages", "client auth", csrFile(t))
	if code != 1 || out != "" || !strings.Contains(errOut, "signetctl explain: refused (UNKNOWN_SIGNER): ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestRequestFromCSR(t *testing.T) {
	exp := int32(600)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        "signet.dev/dev",
			Request:           []byte("pem"),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: &exp,
			Username:          "bob",
			UID:               "user-uid",
			Groups:            []string{"g1", "system:authenticated"},
			Extra:             map[string]certificatesv1.ExtraValue{"scopes": {"a", "b"}},
		},
	}
	req := objectrequest.CSR(csr)
	if req.GetSignerName() != "signet.dev/dev" || string(req.GetRequest()) != "pem" || strings.Join(req.GetUsages(), ",") != "digital signature,client auth" ||
		req.GetExpirationSeconds() != 600 || req.GetRequester().GetUsername() != "bob" || req.GetRequester().GetUid() != "user-uid" ||
		strings.Join(req.GetRequester().GetGroups(), ",") != "g1,system:authenticated" ||
		strings.Join(req.GetRequester().GetExtra()["scopes"].GetValues(), ",") != "a,b" ||
		req.GetObject().GetUid() != "uid-1" || req.GetObject().GetName() != "web" {
		t.Fatalf("request = %v", req)
	}
}

func TestExplainFromCluster(t *testing.T) {
	addr, dir := devServer(t)
	cluster := controlplanetest.Start(t, controlplane.Options{})
	alice, err := cluster.AddRequester("alice", []string{"dev"})
	if err != nil {
		t.Fatal(err)
	}
	exp := int32(3600)
	csrPEM, err := os.ReadFile(csrFile(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		usages []certificatesv1.KeyUsage
	}{
		{"good", []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
		{"ca", []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageCertSign}},
	} {
		_, err := alice.Client().CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: devpki.DefaultSigner, Request: csrPEM, Usages: c.usages, ExpirationSeconds: &exp},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	kc, err := alice.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--kubeconfig", kcPath, "good")
	t.Logf("output:\n%s", out)
	if code != 0 || !strings.HasPrefix(out, "CertificateSigningRequest good, signer "+devpki.DefaultSigner) || !strings.HasSuffix(out, "would be signed, lifetime 1h0m0s\n") {
		t.Errorf("explain good: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--kubeconfig", kcPath, "--csr", "ca")
	if code != 1 || !strings.Contains(out, "✗ usages: no cert sign") || !strings.Contains(out, "would be refused: POLICY_VIOLATION") {
		t.Errorf("explain ca: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, _, errOut = runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--kubeconfig", kcPath, "missing")
	if code != 2 || !strings.Contains(errOut, "reading CertificateSigningRequest missing") {
		t.Errorf("explain missing: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestExplainKubeletBootstrap runs signetctl explain and signers against a server whose
// signer has the kube-apiserver-client-kubelet profile: a joining kubelet's request (requester
// system:bootstrap:<id> in system:bootstrappers) passes on the bootstrap rule, and with
// bootstrap.disabled it fails on a rule whose detail names the option, which signetctl
// signers describes.
func TestExplainKubeletBootstrap(t *testing.T) {
	csrPath := filepath.Join(t.TempDir(), "node.csr")
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}}})
	if err := os.WriteFile(csrPath, csr, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		bootstrap *profile.BootstrapSpec
		code      int
		explain   []string // in explain's output
		signers   string   // in signers' output
	}{
		{name: "default", code: 0, explain: []string{"✓ requester: the node itself (username equals the common name, groups include system:nodes) or in a bootstrap group [system:bootstrappers]", "would be signed"},
			signers: "bootstrap group"},
		{name: "disabled", bootstrap: &profile.BootstrapSpec{Disabled: true}, code: 1,
			explain: []string{"✗ requester: the node itself", "bootstrap.disabled: true", "would be refused: POLICY_VIOLATION"}, signers: "Bootstrap is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("COLUMNS", "400")
			addr, dir := devServer(t, func(cfg *config.Config) {
				cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: tc.bootstrap}
			})
			code, out, errOut := runCmd("explain", "--server", addr, "--dev-state-dir", dir, "--signer", devpki.DefaultSigner,
				"--usages", "digital signature,client auth", "--username", "system:bootstrap:abcdef",
				"--groups", "system:bootstrappers,system:bootstrappers:kubeadm:default-node-token,system:authenticated", csrPath)
			t.Logf("explain:\n%s", out)
			if code != tc.code {
				t.Fatalf("explain exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			for _, want := range tc.explain {
				if !strings.Contains(out, want) {
					t.Errorf("explain output lacks %q", want)
				}
			}
			code, out, errOut = runCmd("signers", "--server", addr, "--dev-state-dir", dir)
			if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), tc.signers) {
				t.Errorf("signers (exit %d, stderr %q) does not say %q:\n%s", code, errOut, tc.signers, out)
			}
		})
	}
}
