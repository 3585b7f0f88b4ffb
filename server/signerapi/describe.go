package signerapi

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/lint"
)

// GetTrustAnchors returns the trust bundle of the named signer, each anchor with its state,
// to a client allowed to use it.
func (s *Service) GetTrustAnchors(ctx context.Context, req *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	bundle, anchors, err := s.core.TrustAnchors(ClientIdentity(ctx), req.GetSignerName())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &signetv1.GetTrustAnchorsResponse{TrustAnchorsPem: string(bundle), BundleHash: bundleHash(anchors)}
	for _, a := range anchors {
		resp.Anchors = append(resp.Anchors, trustAnchor(a))
	}
	return resp, nil
}

// ListSigners describes the signers the calling client may use, sorted by name.
func (s *Service) ListSigners(ctx context.Context, _ *signetv1.ListSignersRequest) (*signetv1.ListSignersResponse, error) {
	resp := &signetv1.ListSignersResponse{}
	for _, sg := range s.core.Signers(ClientIdentity(ctx)) {
		d := sg.Profile.Describe()
		resp.Signers = append(resp.Signers, &signetv1.SignerDescription{
			SignerName:          sg.Name,
			Profile:             d.Profile,
			TrustDistribution:   d.TrustDistribution,
			PermittedSubjects:   d.PermittedSubjects,
			PermittedExtensions: d.PermittedExtensions,
			PermittedKeyUsages:  d.PermittedKeyUsages,
			Expiration:          d.Expiration,
			CaBit:               d.CABit,
			ExtraPemBlocks:      d.ExtraPEMBlocks,
			MaxLifetime:         durationpb.New(d.MaxLifetime),
			KeyTypes:            d.KeyTypes,
			Lint:                describeLint(sg.Lint),
		})
	}
	return resp, nil
}

// describeLint is the wire form of a lint gate; nil for none.
func describeLint(g *lint.Gate) *signetv1.LintGate {
	if g == nil {
		return nil
	}
	rules := func(list []lint.Exclusion) []*signetv1.LintRule {
		out := make([]*signetv1.LintRule, len(list))
		for i, e := range list {
			out[i] = &signetv1.LintRule{Name: e.Lint, Reason: e.Reason}
		}
		return out
	}
	return &signetv1.LintGate{Sources: g.Sources(), Lints: g.Lints(), Excluded: rules(g.Excluded()), Accepted: rules(g.Accepted())}
}

// ExplainCertificateSigningRequest runs the request through the signer's pipeline up to and
// including the lint gate, without signing or recording, and reports every rule
// (decision.Core.Explain: rate-limited and checked as a signing call is). Its request and the
// request's requester are required (MALFORMED_REQUEST naming the field, not recorded: Explain
// records nothing); the object is not, it only names the CSR.
func (s *Service) ExplainCertificateSigningRequest(ctx context.Context, req *signetv1.ExplainCertificateSigningRequestRequest) (*signetv1.ExplainCertificateSigningRequestResponse, error) {
	if req.GetRequest() == nil {
		return nil, toStatus(missing("request", "the CertificateSigningRequest to explain"))
	}
	if err := requireCSRParts(req.GetRequest(), false, s.core.Caller(ClientIdentity(ctx)).Principal()); err != nil {
		return nil, toStatus(err)
	}
	e, err := s.core.Explain(ClientIdentity(ctx), CSRFromProto(req.GetRequest()))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &signetv1.ExplainCertificateSigningRequestResponse{Allowed: e.Err == nil}
	for _, rule := range e.Rules {
		resp.Rules = append(resp.Rules, &signetv1.RuleResult{Rule: rule.Rule, Passed: rule.Passed, Detail: rule.Detail})
	}
	if e.Err != nil {
		reason, _ := decision.Classify(e.Err)
		resp.Reason, resp.Message = string(reason), decision.PublicMessage(e.Err)
	} else {
		resp.Lifetime = durationpb.New(e.Lifetime)
	}
	return resp, nil
}
