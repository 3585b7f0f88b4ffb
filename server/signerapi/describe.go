package signerapi

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/lint"
)

// GetTrustAnchors returns the CA certificate of the named signer to a client allowed to use it.
func (s *Service) GetTrustAnchors(ctx context.Context, req *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	sg, err := s.allowedSigner(ctx, req.GetSignerName())
	if err != nil {
		return nil, err
	}
	return &signetv1.GetTrustAnchorsResponse{TrustAnchorsPem: string(sg.Issuer.TrustAnchors())}, nil
}

// ListSigners describes the signers the calling client may use, sorted by name.
func (s *Service) ListSigners(ctx context.Context, _ *signetv1.ListSignersRequest) (*signetv1.ListSignersResponse, error) {
	identity := ClientIdentity(ctx)
	signers := *s.signers.Load() // one generation for the whole answer
	var names []string
	for name := range signers {
		if s.allowed(identity, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	resp := &signetv1.ListSignersResponse{}
	for _, name := range names {
		sg := signers[name]
		d := sg.Profile.Describe()
		resp.Signers = append(resp.Signers, &signetv1.SignerDescription{
			SignerName:          name,
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
// including the lint gate, without signing or recording, and reports every rule. It costs
// what a signing call costs, so it spends rate-limit tokens as one does (see admit), and a
// refusal by a limit is ResourceExhausted RATE_LIMITED.
func (s *Service) ExplainCertificateSigningRequest(ctx context.Context, req *signetv1.ExplainCertificateSigningRequestRequest) (*signetv1.ExplainCertificateSigningRequestResponse, error) {
	r := req.GetRequest()
	sg, which, err := s.limitedSigner(ClientIdentity(ctx), r.GetSignerName(), func() error { return checkCSRRequest(r) })
	switch {
	case err != nil:
		return nil, toStatus(err)
	case sg == nil:
		return nil, toStatus(fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, which))
	}
	e := sg.Issuer.Explain(requestFromProto(r))
	resp := &signetv1.ExplainCertificateSigningRequestResponse{Allowed: e.Err == nil}
	for _, rule := range e.Rules {
		resp.Rules = append(resp.Rules, &signetv1.RuleResult{Rule: rule.Rule, Passed: rule.Passed, Detail: rule.Detail})
	}
	if e.Err != nil {
		_, reason, safe := classify(e.Err)
		resp.Reason, resp.Message = signetv1.ReasonName(reason), publicMessage(e.Err, safe)
	} else {
		resp.Lifetime = durationpb.New(e.Lifetime)
	}
	return resp, nil
}

// allowedSigner returns the named signer if the calling client may use it, else the gRPC
// status of the refusal.
func (s *Service) allowedSigner(ctx context.Context, name string) (*Signer, error) {
	sg, err := s.lookupSigner(ClientIdentity(ctx), name)
	if err != nil {
		return nil, toStatus(err)
	}
	return sg, nil
}

// lookupSigner returns the named signer if identity may use it, else an error wrapping
// errUnknownSigner or errSignerNotAllowed.
func (s *Service) lookupSigner(identity, name string) (*Signer, error) {
	sg, ok := s.signer(name)
	if !ok {
		return nil, fmt.Errorf("%w: this server does not serve signer %q", errUnknownSigner, name)
	}
	if !s.allowed(identity, name) {
		return nil, fmt.Errorf("%w: client %q may not use signer %q", errSignerNotAllowed, identity, name)
	}
	return sg, nil
}
