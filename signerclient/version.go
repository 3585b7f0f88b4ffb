package signerclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// versionInterceptor sends v as the client's version (signetv1.ClientVersionHeader) with
// every call, for the server's skew check.
func versionInterceptor(v string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, signetv1.ClientVersionHeader, v), method, req, reply, cc, opts...)
	}
}

// ServerInfo is the build of a signing server, as GetServerInfo reports it.
type ServerInfo struct {
	// Version is the server's version (a release such as v0.3.1, or a development build's).
	Version string
	// Commit is the server's git commit; empty when unknown.
	Commit string
	// GoVersion is the Go toolchain that built the server.
	GoVersion string
}

// ServerInfo asks a server, picked as a signing call would be, for its build (GetServerInfo),
// within the client's RPC timeout. Like every call it carries the client's version: a server
// whose skew policy refuses it answers with an error for which UnsupportedVersion is true.
func (c *Client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.GetServerInfo(ctx, &signetv1.GetServerInfoRequest{})
	if err != nil {
		return ServerInfo{}, fmt.Errorf("asking the signing server for its version: %w", err)
	}
	return ServerInfo{Version: resp.GetVersion(), Commit: resp.GetCommit(), GoVersion: resp.GetGoVersion()}, nil
}

// VersionRefusal is what a server that refused the client's version said: the server's
// message (both versions, the versions it accepts, what to do) and the two versions from the
// ErrorInfo's metadata.
type VersionRefusal struct {
	Message                      string
	ServerVersion, ClientVersion string
}

// UnsupportedVersion reports whether err (wrapping a gRPC status) is a server's refusal of
// the client's version (ErrorInfo reason signetv1.ReasonUnsupportedClientVersion), and returns
// what the server said. Classify treats it as transient (reason UnsupportedClientVersion): the
// objects wait for the roll-out that cures it.
func UnsupportedVersion(err error) (VersionRefusal, bool) {
	var carrier interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &carrier) || carrier.GRPCStatus() == nil {
		return VersionRefusal{}, false
	}
	st := carrier.GRPCStatus()
	for _, detail := range st.Details() {
		info, ok := detail.(*errdetails.ErrorInfo)
		if ok && info.GetDomain() == signetv1.ErrorDomain && info.GetReason() == signetv1.ReasonUnsupportedClientVersion {
			md := info.GetMetadata()
			return VersionRefusal{Message: st.Message(), ServerVersion: md["server_version"], ClientVersion: md["client_version"]}, true
		}
	}
	return VersionRefusal{}, false
}
