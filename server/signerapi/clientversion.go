package signerapi

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/version"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// apiPrefix is the prefix of the full method names of the signet.v1 services, the calls the
// version check applies to (not grpc.health.v1 nor reflection, which any client may use).
const apiPrefix = "/signet.v1."

// maxVersionLength bounds a client version as the server logs and repeats it: longer values
// are clipped. A version is a few dozen bytes.
const maxVersionLength = 64

// maxRemembered bounds how many (client, version) pairs the check remembers having logged; it
// forgets them all when full, so a client sending ever new versions costs bounded memory and a
// log line per version.
const maxRemembered = 256

// ClientVersionCheck returns the unary interceptor that applies the skew policy
// (version.CheckSkew, docs/compatibility.md) to every signet.v1 call: the client's version is
// the metadata signetv1.ClientVersionHeader (signerclient sends it on every call, signetctl on
// every call but GetServerInfo) and the server's is serverVersion (its build).
//
//   - A call without the header is not checked (grpcurl, clients in other languages).
//   - A supported client's call goes on.
//   - A development build on either side goes on; the first such call of each client
//     identity and version is logged at WARN ("accepting a client without a version check").
//   - Any other call is refused before it reaches the service: FailedPrecondition with an
//     ErrorInfo of reason signetv1.ReasonUnsupportedClientVersion (metadata server_version,
//     client_version) and a message naming both versions, the versions the server accepts and
//     what to do. The first refusal of each client identity and version is logged at WARN
//     ("refused a client's version"). Nothing is recorded in the ledger: no decision was asked.
//
// Every refusal, not only the first, is passed to refused (when not nil) with the client's
// version: the server counts them in signet_server_client_version_refused_total
// (metrics.ObserveClientVersionRefused), which the alert SignetServerClientVersionRefused
// watches.
//
// The version a client sends is clipped and reduced to the characters a version holds before
// it is logged, repeated or passed to refused.
func ClientVersionCheck(serverVersion string, log *slog.Logger, refused func(clientVersion string)) grpc.UnaryServerInterceptor {
	seen := &rememberedPairs{pairs: map[string]bool{}}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, apiPrefix) {
			return handler(ctx, req)
		}
		sent := metadata.ValueFromIncomingContext(ctx, signetv1.ClientVersionHeader)
		if len(sent) == 0 {
			return handler(ctx, req)
		}
		skew := version.CheckSkew(serverVersion, cleanVersion(sent[0]))
		if skew.Verdict == version.Supported {
			return handler(ctx, req)
		}
		client := ClientIdentity(ctx)
		first := seen.first(client + "\x00" + skew.Client)
		if skew.Accepted() {
			if first {
				log.Warn("accepting a client without a version check", "client", client, "client_version", skew.Client,
					"server_version", skew.Server, "method", info.FullMethod, "message", skew.Message())
			}
			return handler(ctx, req)
		}
		if first {
			log.Warn("refused a client's version", "client", client, "client_version", skew.Client, "server_version", skew.Server,
				"verdict", skew.Verdict.String(), "method", info.FullMethod, "message", skew.Message())
		}
		if refused != nil {
			refused(skew.Client)
		}
		return nil, versionRefusal(skew)
	}
}

// versionRefusal is the status of a call refused by the skew policy.
func versionRefusal(skew version.Skew) error {
	st := status.New(codes.FailedPrecondition, skew.Message())
	detailed, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: signetv1.ReasonUnsupportedClientVersion,
		Domain: signetv1.ErrorDomain,
		Metadata: map[string]string{
			"server_version": skew.Server,
			"client_version": skew.Client,
		},
	})
	if err != nil { // an ErrorInfo always marshals
		return st.Err()
	}
	return detailed.Err()
}

// cleanVersion is v clipped to maxVersionLength and with every character that no version
// holds (a semantic version, a commit hash, "(devel)") replaced by "_", so that what a caller
// sends is safe to log and repeat.
func cleanVersion(v string) string {
	if len(v) > maxVersionLength {
		v = v[:maxVersionLength]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune(".-+()", r):
			return r
		}
		return '_'
	}, v)
}

// rememberedPairs is the set of (client, version) pairs already logged.
type rememberedPairs struct {
	mu    sync.Mutex
	pairs map[string]bool
}

// first reports whether key is new, and remembers it (forgetting everything when full).
func (r *rememberedPairs) first(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pairs[key] {
		return false
	}
	if len(r.pairs) >= maxRemembered {
		clear(r.pairs)
	}
	r.pairs[key] = true
	return true
}
