package watcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/looptest"
)

// versionRefusal is the status signet-server's version check answers (server/signerapi's
// ClientVersionCheck; the refusal itself is tested against a real server in signerclient).
func versionRefusal(t *testing.T, server, client string) error {
	t.Helper()
	st, err := status.New(codes.FailedPrecondition, fmt.Sprintf("signet-server %s does not accept clients of version %s: upgrade", server, client)).
		WithDetails(&errdetails.ErrorInfo{Reason: signetv1.ReasonUnsupportedClientVersion, Domain: signetv1.ErrorDomain,
			Metadata: map[string]string{"server_version": server, "client_version": client}})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// versionRefusingServer refuses every call as a server refuses a client outside its skew
// policy.
type versionRefusingServer struct {
	refusingServer
	refusal error
}

func (s versionRefusingServer) GetServerInfo(context.Context, *signetv1.GetServerInfoRequest) (*signetv1.GetServerInfoResponse, error) {
	return nil, s.refusal
}

// TestRunRefusedByTheServersVersionCheck: a signing server that refuses the watcher's version
// stops its start with the server's message, before any object is touched.
func TestRunRefusedByTheServersVersionCheck(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg := &Config{SignerNames: []string{"example.com/serving"},
		Server: startServerWith(t, versionRefusingServer{refusal: versionRefusal(t, "v0.5.0", "v0.3.2")})}
	kube := looptest.NewClientset(approvedCSR("good", "ok"))
	err := Run(ctx, cfg, kube, logger)
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "signet-server v0.5.0 does not accept clients of version v0.3.2") {
		t.Fatalf("Run() = %v, want ErrUnsupportedVersion with the server's message", err)
	}
	csr, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "good", metav1.GetOptions{})
	if err != nil || len(csr.Status.Certificate) != 0 || len(csr.Status.Conditions) != 1 {
		t.Errorf("the CSR was touched by a watcher that did not start: %+v, %v", csr.Status, err)
	}
}

// fakeVersionServer answers ServerInfo.
type fakeVersionServer struct {
	info signerclient.ServerInfo
	err  error
}

func (f fakeVersionServer) ServerInfo(context.Context) (signerclient.ServerInfo, error) {
	return f.info, f.err
}

// TestCheckServerVersion: the server's version is logged; a development build on either side
// is logged as a warning; an unreachable server lets the start go on; a refusal stops it.
func TestCheckServerVersion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		server     fakeVersionServer
		own        string
		wantErr    bool
		wantLogs   []string
		absentLogs []string
	}{
		{name: "supported", server: fakeVersionServer{info: signerclient.ServerInfo{Version: "v0.3.1", Commit: "abc"}}, own: "v0.2.4",
			wantLogs:   []string{`Signing server version serverVersion="v0.3.1" serverCommit="abc" watcherVersion="v0.2.4" skew="supported"`},
			absentLogs: []string{"Development build"}},
		{name: "development watcher", server: fakeVersionServer{info: signerclient.ServerInfo{Version: "v0.3.1"}}, own: "81c084c-dirty",
			wantLogs: []string{`skew="development"`, "Development build: no version check between the watcher and the signing server",
				"client 81c084c-dirty: a development build"}},
		{name: "development server", server: fakeVersionServer{info: signerclient.ServerInfo{Version: "dev"}}, own: "v0.3.0",
			wantLogs: []string{"Development build", "signet-server dev: a development build"}},
		{name: "unreachable", server: fakeVersionServer{err: status.Error(codes.Unavailable, "connection refused")}, own: "v0.3.0",
			wantLogs: []string{"Could not ask the signing server for its version"}},
		{name: "refused", server: fakeVersionServer{err: versionRefusal(t, "v0.5.0", "v0.3.0")}, own: "v0.3.0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			err := checkServerVersion(context.Background(), tc.server, tc.own, logger)
			if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, ErrUnsupportedVersion)) {
				t.Fatalf("checkServerVersion = %v, want error %v", err, tc.wantErr)
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			for _, w := range tc.wantLogs {
				if !strings.Contains(logs, w) {
					t.Errorf("logs do not say %q:\n%s", w, logs)
				}
			}
			for _, w := range tc.absentLogs {
				if strings.Contains(logs, w) {
					t.Errorf("logs say %q:\n%s", w, logs)
				}
			}
		})
	}
}
