// Package signerapi is the gRPC front door of the decision core: it serves the signet.v1
// SignerService by naming the caller from its verified mTLS certificate, converting each
// request to the core's types, and the core's answer or refusal (server/wire) to the wire.
package signerapi

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
)

// Service serves SignerService with a decision core.
type Service struct {
	signetv1.UnimplementedSignerServiceServer
	core  *decision.Core
	build Build
}

var _ signetv1.SignerServiceServer = (*Service)(nil)

// New returns a Service that decides with core.
func New(core *decision.Core) *Service { return &Service{core: core} }

// WithBuild sets the build GetServerInfo reports and returns s.
func (s *Service) WithBuild(b Build) *Service {
	s.build = b
	return s
}

// ClientIdentity names the mTLS client of ctx (access.Identity of its verified certificate),
// or "" when there is none.
func ClientIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return access.Identity(tlsInfo.State.VerifiedChains[0][0])
}
