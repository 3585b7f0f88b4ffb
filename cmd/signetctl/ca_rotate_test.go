package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/mtlstest"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
)

const testSigner = "example.com/serving"

// fakeAuthority is an AuthorityService answering every call with testAuthority, or with err
// when set, and recording the requests.
type fakeAuthority struct {
	signetv1.UnimplementedAuthorityServiceServer
	err error

	mu       sync.Mutex
	requests []proto.Message
}

func (f *fakeAuthority) record(req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	return f.err
}

// recorded returns the requests so far.
func (f *fakeAuthority) recorded() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.requests...)
}

func (f *fakeAuthority) GetAuthority(_ context.Context, req *signetv1.GetAuthorityRequest) (*signetv1.GetAuthorityResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &signetv1.GetAuthorityResponse{Signers: []*signetv1.SignerAuthority{testAuthority()}}, nil
}

func (f *fakeAuthority) StageCA(_ context.Context, req *signetv1.StageCARequest) (*signetv1.StageCAResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &signetv1.StageCAResponse{Authority: testAuthority()}, nil
}

func (f *fakeAuthority) ActivateCA(_ context.Context, req *signetv1.ActivateCARequest) (*signetv1.ActivateCAResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &signetv1.ActivateCAResponse{Authority: testAuthority()}, nil
}

func (f *fakeAuthority) RetireCA(_ context.Context, req *signetv1.RetireCARequest) (*signetv1.RetireCAResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &signetv1.RetireCAResponse{Authority: testAuthority()}, nil
}

func ts(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

// testAuthority is a signer in the middle of a rotation: an active CA from the
// configuration, a staged one, a retired one whose leaves are still valid; one cluster has
// published the staged CA, the other has not.
func testAuthority() *signetv1.SignerAuthority {
	return &signetv1.SignerAuthority{
		SignerName: testSigner,
		Cas: []*signetv1.AuthorityCA{{
			Anchor: &signetv1.TrustAnchor{State: signetv1.AnchorState_ANCHOR_STATE_ACTIVE, Fingerprint: strings.Repeat("a", 64),
				Subject: "CN=Kube CA 2025", SerialNumber: "1f", NotAfter: ts("2035-01-01T00:00:00Z")},
			KeyUri: "pkcs11:token=signet;object=ca-2025", By: "configuration", LastLeafNotAfter: ts("2026-03-01T00:00:00Z"),
		}, {
			Anchor: &signetv1.TrustAnchor{State: signetv1.AnchorState_ANCHOR_STATE_STAGED, Fingerprint: strings.Repeat("b", 64),
				Subject: "CN=Kube CA 2026", SerialNumber: "20", Since: ts("2026-01-10T10:00:00Z")},
			KeyUri: "tpm:blob=/var/lib/signet/ca-2026.tpmkey", By: "admin-1", Retirement: &signetv1.Gate{Ready: true},
		}, {
			Anchor: &signetv1.TrustAnchor{State: signetv1.AnchorState_ANCHOR_STATE_RETIRED, Fingerprint: strings.Repeat("c", 64),
				Subject: "CN=Kube CA 2024", SerialNumber: "1e", Since: ts("2025-01-01T00:00:00Z")},
			By: "admin-1", LastLeafNotAfter: ts("2026-02-01T00:00:00Z"),
			Retirement: &signetv1.Gate{Blocking: []string{"leaves it signed may be valid until 2026-02-01T00:00:00Z"}, NotBefore: ts("2026-02-01T00:00:00Z")},
		}},
		Clusters: []*signetv1.ClusterReport{
			{Cluster: "prod-eu", Registered: true, BundleHash: strings.Repeat("d", 64), StagedPublishedAt: ts("2026-01-10T11:00:00Z"), LastSeen: ts("2026-01-10T12:00:00Z")},
			{Cluster: "prod-us", Registered: true},
		},
		MinPropagationDelay: durationpb.New(time.Hour),
		Activation:          &signetv1.Gate{Blocking: []string{`cluster "prod-us" has not published the staged CA`}},
		BundleHash:          strings.Repeat("d", 64),
	}
}

// authorityServer serves fake over mTLS on 127.0.0.1 and returns the connection flags of an
// admin client of it.
func authorityServer(t *testing.T, fake *fakeAuthority) []string {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterAuthorityServiceServer(g, fake)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "admin-1")
	return []string{"--server", lis.Addr().String(), "--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile, "--timeout", "5s"}
}

// caCmd runs "signetctl ca" with args then conn.
func caCmd(conn []string, args ...string) (int, string, string) {
	return runCmd(append(append([]string{"ca"}, args...), conn...)...)
}

// writeTemp writes data to a file named name in a temporary folder and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCAStatusText(t *testing.T) {
	fake := &fakeAuthority{}
	conn := authorityServer(t, fake)
	code, out, errOut := caCmd(conn, "status", "--signer", testSigner, "--signer", "example.com/other")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("output:\n%s", out)
	want := &signetv1.GetAuthorityRequest{SignerNames: []string{testSigner, "example.com/other"}}
	if got := fake.recorded(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("requests = %v, want %v", got, want)
	}
	lines := strings.Split(out, "\n")
	row := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return strings.Fields(l)
			}
		}
		t.Errorf("no line starts with %q", prefix)
		return nil
	}
	if r := row("staged"); strings.Join(r, " ") != "staged 2026-01-10T10:00:00Z admin-1 CN=Kube CA 2026 20 bbbbbbbbbbbbbbbb tpm:blob=/var/lib/signet/ca-2026.tpmkey - ready" {
		t.Errorf("staged CA row = %q", r)
	}
	if r := row("active"); strings.Join(r, " ") != "active - configuration CN=Kube CA 2025 1f aaaaaaaaaaaaaaaa pkcs11:token=signet;object=ca-2025 2026-03-01T00:00:00Z -" {
		t.Errorf("active CA row = %q", r)
	}
	if r := row("prod-eu"); strings.Join(r, " ") != "prod-eu trust-bundle yes dddddddddddddddd yes 2026-01-10T11:00:00Z 2026-01-10T12:00:00Z" {
		t.Errorf("prod-eu row = %q", r)
	}
	if r := row("prod-us"); strings.Join(r, " ") != "prod-us trust-bundle yes - no - -" {
		t.Errorf("prod-us row = %q", r)
	}
	for _, want := range []string{
		testSigner + "\n  CAs:\n    STATE ",
		"  Retirement of cccccccccccccccc (retired): blocked\n    - leaves it signed may be valid until 2026-02-01T00:00:00Z\n    not before 2026-02-01T00:00:00Z\n",
		"  Clusters (minimum propagation delay 1h0m0s):\n",
		"  Activation: blocked\n    - cluster \"prod-us\" has not published the staged CA\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, strings.Repeat("b", 17)) {
		t.Error("output shows a whole fingerprint; want the first 16 digits")
	}
}

func TestCAStatusJSON(t *testing.T) {
	conn := authorityServer(t, &fakeAuthority{})
	for _, flag := range []string{"-o", "--output"} {
		code, out, errOut := caCmd(conn, "status", flag, "json")
		if code != 0 {
			t.Fatalf("exit %d, stderr:\n%s", code, errOut)
		}
		var got signetv1.GetAuthorityResponse
		if err := protojson.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("output is not a GetAuthorityResponse: %v\n%s", err, out)
		}
		if want := (&signetv1.GetAuthorityResponse{Signers: []*signetv1.SignerAuthority{testAuthority()}}); !proto.Equal(&got, want) {
			t.Errorf("%s json: got %v, want %v", flag, &got, want)
		}
	}
}

func TestCAStage(t *testing.T) {
	fake := &fakeAuthority{}
	conn := authorityServer(t, fake)
	root := testpki.CA(t)
	sub := root.SubCA(t)
	certFile := writeTemp(t, "ca.crt", sub.CertPEM())
	chainFile := writeTemp(t, "chain.crt", root.CertPEM())
	code, out, errOut := caCmd(conn, "stage", "--signer", testSigner, "--key", "tpm:blob=/k", "--cert", certFile, "--intermediates", chainFile)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := &signetv1.StageCARequest{SignerName: testSigner, KeyUri: "tpm:blob=/k", CertificatePem: string(sub.CertPEM()), IntermediatesPem: string(root.CertPEM())}
	if got := fake.recorded(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("requests = %v, want %v", got, want)
	}
	sum := sha256.Sum256(sub.Cert.Raw)
	if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, "staged CA "+hex.EncodeToString(sum[:])[:16]) || !strings.Contains(first, sub.Cert.Subject.String()) {
		t.Errorf("first line %q does not name the staged CA", first)
	}
	if !strings.Contains(out, "\n"+testSigner+"\n  CAs:") {
		t.Errorf("output lacks the CA set:\n%s", out)
	}

	both := writeTemp(t, "both.crt", append(sub.CertPEM(), root.CertPEM()...))
	withKey := writeTemp(t, "key.pem", append(sub.CertPEM(), testpki.KeyPEM(t, testpki.Key(t, testpki.P256))...))
	for _, args := range [][]string{
		{"stage", "--key", "k", "--cert", certFile},
		{"stage", "--signer", testSigner, "--cert", certFile},
		{"stage", "--signer", testSigner, "--key", "k"},
		{"stage", "--signer", testSigner, "--key", "k", "--cert", both},
		{"stage", "--signer", testSigner, "--key", "k", "--cert", withKey},
		{"stage", "--signer", testSigner, "--key", "k", "--cert", certFile, "--intermediates", withKey},
		{"stage", "--signer", testSigner, "--key", "k", "--cert", filepath.Join(t.TempDir(), "none")},
	} {
		if code, out, errOut := caCmd(conn, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2", args, code, out, errOut)
		}
	}
	if n := len(fake.recorded()); n != 1 {
		t.Errorf("refused command lines reached the server: %d requests", n)
	}
}

// TestCAForce: --force needs --reason and --reason needs --force, refused before any call;
// both together reach the server.
func TestCAForce(t *testing.T) {
	fake := &fakeAuthority{}
	conn := authorityServer(t, fake)
	for _, args := range [][]string{
		{"activate", "--signer", testSigner, "--force"},
		{"activate", "--signer", testSigner, "--force", "--reason", "  "},
		{"activate", "--signer", testSigner, "--reason", "why"},
		{"retire", "--signer", testSigner, "--serial", "1e", "--force"},
		{"activate"},
	} {
		code, out, errOut := caCmd(conn, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Run 'signetctl ca ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
	if n := len(fake.recorded()); n != 0 {
		t.Fatalf("refused command lines reached the server: %d requests", n)
	}
	code, out, errOut := caCmd(conn, "activate", "--signer", testSigner, "--force", "--reason", "incident 7: prod-us is gone")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := &signetv1.ActivateCARequest{SignerName: testSigner, Force: true, Reason: "incident 7: prod-us is gone"}
	if got := fake.recorded(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("requests = %v, want %v", got, want)
	}
	if first := strings.SplitN(out, "\n", 2)[0]; first != "activated CA aaaaaaaaaaaaaaaa (CN=Kube CA 2025) of "+testSigner+": it issues now (forced: incident 7: prod-us is gone)" {
		t.Errorf("first line = %q", first)
	}
}

func TestCARetire(t *testing.T) {
	fake := &fakeAuthority{}
	conn := authorityServer(t, fake)
	ca := testpki.CA(t)
	certFile := writeTemp(t, "old.crt", ca.CertPEM())
	sum := sha256.Sum256(ca.Cert.Raw)
	fp := hex.EncodeToString(sum[:])
	colons := strings.ToUpper(fp[:2])
	for i := 2; i < len(fp); i += 2 {
		colons += ":" + strings.ToUpper(fp[i:i+2])
	}
	for _, tc := range []struct {
		args []string
		want *signetv1.RetireCARequest
	}{
		{[]string{"--cert", certFile}, &signetv1.RetireCARequest{SignerName: testSigner, Fingerprint: fp}},
		{[]string{"--fingerprint", colons}, &signetv1.RetireCARequest{SignerName: testSigner, Fingerprint: fp}},
		{[]string{"--serial", "0x00:1E"}, &signetv1.RetireCARequest{SignerName: testSigner, SerialNumber: "1e"}},
		{[]string{"--serial", "1e", "--force", "--reason", "key compromise"}, &signetv1.RetireCARequest{SignerName: testSigner, SerialNumber: "1e", Force: true, Reason: "key compromise"}},
	} {
		before := len(fake.recorded())
		code, out, errOut := caCmd(conn, append([]string{"retire", "--signer", testSigner}, tc.args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, code, errOut)
			continue
		}
		if got := fake.recorded(); len(got) != before+1 || !proto.Equal(got[before], tc.want) {
			t.Errorf("%v: requests = %v, want %v last", tc.args, got, tc.want)
		}
		if !strings.HasPrefix(out, "retired CA ") {
			t.Errorf("%v: output = %q", tc.args, out)
		}
	}
	n := len(fake.recorded())
	for _, args := range [][]string{
		{"retire", "--signer", testSigner},
		{"retire", "--signer", testSigner, "--serial", "1e", "--fingerprint", fp},
		{"retire", "--signer", testSigner, "--cert", certFile, "--serial", "1e"},
		{"retire", "--signer", testSigner, "--fingerprint", fp[:40]},
		{"retire", "--signer", testSigner, "--serial", "xyz"},
		{"retire", "--signer", testSigner, "--serial", "-1e"},
		{"retire", "--fingerprint", fp},
	} {
		if code, out, errOut := caCmd(conn, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2", args, code, out, errOut)
		}
	}
	if got := len(fake.recorded()); got != n {
		t.Errorf("refused command lines reached the server: %d requests", got-n)
	}
}

// TestCARefusal: a refusal prints the server's message and reason and exits 1, like a refused
// request in signetctl explain; an answer without a reason, or none, exits 2.
func TestCARefusal(t *testing.T) {
	const msg = `cluster "prod-us" has not published the staged CA bbbbbbbbbbbbbbbb; possible from 2026-01-10T12:00:00Z at the earliest`
	refusal := func(code codes.Code, reason signetv1.ErrorReason, message string) error {
		st, err := status.New(code, message).WithDetails(&errdetails.ErrorInfo{Domain: signetv1.ErrorDomain, Reason: signetv1.ReasonName(reason)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, tc := range []struct {
		err      error
		args     []string
		code     int
		contains []string
	}{
		{refusal(codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED, msg),
			[]string{"activate", "--signer", testSigner}, 1, []string{"signetctl ca activate: refused (ROTATION_REFUSED): " + msg + "\n"}},
		{refusal(codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_ADMIN_REQUIRED, "client admin-1 is not an admin"),
			[]string{"status"}, 1, []string{"refused (ADMIN_REQUIRED): client admin-1 is not an admin"}},
		{refusal(codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_CA, "the key does not match the certificate"),
			[]string{"retire", "--signer", testSigner, "--serial", "1"}, 1, []string{"refused (INVALID_CA): the key does not match"}},
		{status.Error(codes.Internal, "boom"), []string{"status"}, 2, []string{"Internal: boom"}},
		{status.Error(codes.Unimplemented, "unknown service signet.v1.AuthorityService"), []string{"status"}, 2, []string{"Unimplemented"}},
	} {
		conn := authorityServer(t, &fakeAuthority{err: tc.err})
		code, out, errOut := caCmd(conn, tc.args...)
		if code != tc.code || out != "" {
			t.Errorf("%v answered %v: exit %d, stdout %q; want exit %d and nothing on stdout", tc.args, tc.err, code, out, tc.code)
		}
		for _, want := range tc.contains {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, want)
			}
		}
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	conn := authorityServer(t, &fakeAuthority{})
	conn[1] = dead
	if code, _, errOut := caCmd(conn, "status"); code != 2 || !strings.Contains(errOut, "Unavailable") {
		t.Errorf("status on a dead address: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestCAUsage(t *testing.T) {
	code, out, _ := runCmd("ca", "help")
	for _, name := range []string{"init", "csr", "stage", "activate", "retire", "status"} {
		if code != 0 || !strings.Contains(out, "  "+name+" ") {
			t.Errorf("ca help (exit %d) does not list %s:\n%s", code, name, out)
		}
	}
	for _, name := range []string{"stage", "activate", "retire", "status"} {
		code, out, _ := runCmd("ca", name, "-h")
		if code != 0 || !strings.Contains(out, "Usage:\n  signetctl ca "+name) || !strings.Contains(out, "--tls-ca") || !strings.Contains(out, "Exit codes") {
			t.Errorf("ca %s -h: exit %d, stdout:\n%s", name, code, out)
		}
	}
	for _, args := range [][]string{
		{"ca", "status"},
		{"ca", "status", "--dev-state-dir", "d", "-o", "xml"},
		{"ca", "status", "--dev-state-dir", "d", "extra"},
		{"ca", "status", "--dev-state-dir", "d", "--signer", ""},
	} {
		if code, out, errOut := runCmd(args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2", args, code, out, errOut)
		}
	}
}

// TestCARotationOnRealServer runs the commands against a real signet-server: status of a
// signer needs the admin role; a CA is staged, its activation refused by the propagation gate, then
// forced; the old CA, which signed no leaf, is retired by its certificate.
func TestCARotationOnRealServer(t *testing.T) {
	t.Setenv("COLUMNS", "")
	addr, dir := devServer(t)
	conn := []string{"--server", addr, "--dev-state-dir", dir}
	if code, out, errOut := caCmd(conn, "status"); code != 0 || out != "no signers: this client administers none\n" {
		t.Errorf("status of every signer without the admin role: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := caCmd(conn, "status", "--signer", devpki.DefaultSigner); code != 1 || !strings.Contains(errOut, "refused (ADMIN_REQUIRED): ") {
		t.Errorf("status of a signer without the admin role: exit %d, stderr:\n%s", code, errOut)
	}

	addr, dir = devServer(t, func(cfg *config.Config) { cfg.Clients[0].Admin = true })
	conn = []string{"--server", addr, "--dev-state-dir", dir}
	code, out, errOut := caCmd(conn, "status")
	if code != 0 || !strings.HasPrefix(out, devpki.DefaultSigner+"\n  CAs:\n") || !strings.Contains(out, "\n    active ") || !strings.Contains(out, "Activation: blocked") {
		t.Fatalf("status: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	next := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "next signer CA"} })
	keyFile := writeTemp(t, "next.key", testpki.KeyPEM(t, next.Key))
	certFile := writeTemp(t, "next.crt", next.CertPEM())
	if code, out, errOut = caCmd(conn, "stage", "--signer", devpki.DefaultSigner, "--key", keyFile, "--cert", certFile); code != 0 || !strings.Contains(out, "\n    staged ") {
		t.Fatalf("stage: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, out, errOut = caCmd(conn, "activate", "--signer", devpki.DefaultSigner); code != 1 || out != "" || !strings.Contains(errOut, "refused (ROTATION_REFUSED): ") {
		t.Errorf("activate before the delay: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	t.Logf("refusal: %s", errOut)
	if code, out, errOut = caCmd(conn, "activate", "--signer", devpki.DefaultSigner, "--force", "--reason", "test", "-o", "json"); code != 0 {
		t.Fatalf("forced activate: exit %d, stderr:\n%s", code, errOut)
	}
	var activated signetv1.ActivateCAResponse
	if err := protojson.Unmarshal([]byte(out), &activated); err != nil {
		t.Fatalf("activate -o json: %v\n%s", err, out)
	}
	sum := sha256.Sum256(next.Cert.Raw)
	for _, ca := range activated.GetAuthority().GetCas() {
		if a := ca.GetAnchor(); a.GetState() == signetv1.AnchorState_ANCHOR_STATE_ACTIVE && a.GetFingerprint() != hex.EncodeToString(sum[:]) {
			t.Errorf("active CA after activation is %s (%s), want the staged one", a.GetFingerprint(), a.GetSubject())
		}
	}
	old := filepath.Join(dir, devpki.SignerCACert)
	if code, out, errOut = caCmd(conn, "retire", "--signer", devpki.DefaultSigner, "--cert", old); code != 0 || !strings.Contains(out, "\n    removed ") {
		t.Errorf("retire the old CA: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("after retirement:\n%s", out)
}
