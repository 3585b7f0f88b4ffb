package main

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// refusingSigners is a SignerService answering every call with err.
type refusingSigners struct {
	signetv1.UnimplementedSignerServiceServer
	err error
}

func (f refusingSigners) ListSigners(context.Context, *signetv1.ListSignersRequest) (*signetv1.ListSignersResponse, error) {
	return nil, f.err
}

func (f refusingSigners) ExplainCertificateSigningRequest(context.Context, *signetv1.ExplainCertificateSigningRequestRequest) (*signetv1.ExplainCertificateSigningRequestResponse, error) {
	return nil, f.err
}

func (f refusingSigners) GetTrustAnchors(context.Context, *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	return nil, f.err
}

// TestExitCodes: the same answer of the server gives the same exit code in every command: a
// refusal (a status with a Signet reason) 1, a status without one 2, a usage error 2. No
// answer at all is TestConnectionErrorsExit2.
func TestExitCodes(t *testing.T) {
	refusal, err := status.New(codes.PermissionDenied, "client client-1 may not use example.com/a").
		WithDetails(&errdetails.ErrorInfo{Domain: signetv1.ErrorDomain, Reason: "SIGNER_NOT_ALLOWED"})
	if err != nil {
		t.Fatal(err)
	}
	csr := csrFile(t)
	commands := [][]string{
		{"signers"},
		{"explain", "--signer", "example.com/a", csr},
		{"trust", "example.com/a"},
		{"ca", "status"},
		{"ca", "activate", "--signer", "example.com/a"},
	}
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{refusal.Err(), 1, "refused (SIGNER_NOT_ALLOWED): client client-1 may not use example.com/a\n"},
		{status.Error(codes.Internal, "boom"), 2, "Internal: boom\n"},
	} {
		conn := testServer(t, func(g *grpc.Server) {
			signetv1.RegisterSignerServiceServer(g, refusingSigners{err: tc.err})
			signetv1.RegisterAuthorityServiceServer(g, &fakeAuthority{err: tc.err})
		})
		for _, args := range commands {
			code, out, errOut := runCmd(append(args, conn...)...)
			prefix := "signetctl " + strings.Join(args[:1], " ")
			if args[0] == "ca" {
				prefix = "signetctl ca " + args[1]
			}
			if code != tc.code || out != "" || errOut != prefix+": "+tc.want {
				t.Errorf("%v answered %v: exit %d, stdout %q, stderr %q; want exit %d and %q", args, tc.err, code, out, errOut, tc.code, prefix+": "+tc.want)
			}
		}
	}
	for _, args := range [][]string{
		{"signers", "--nope"}, {"explain", "--dev-state-dir", "d"}, {"ca", "status", "--dev-state-dir", "d", "-o", "toml"},
		{"trust", "--dev-state-dir", "d"}, {"health", "--timeout", "-1s", "--dev-state-dir", "d"},
	} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Run 'signetctl ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
}
