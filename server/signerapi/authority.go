package signerapi

import (
	"context"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
)

// ReportTrustBundle takes a watcher's report of the bundle it published.
func (s *Service) ReportTrustBundle(ctx context.Context, req *signetv1.ReportTrustBundleRequest) (*signetv1.ReportTrustBundleResponse, error) {
	r := authority.Report{Cluster: req.GetCluster(), BundleHash: req.GetBundleHash(), Anchors: req.GetAnchorFingerprints(), Source: req.GetSource()}
	if err := s.core.ReportTrustBundle(ctx, ClientIdentity(ctx), req.GetSignerName(), r); err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.ReportTrustBundleResponse{}, nil
}

// AuthorityService serves signet.v1.AuthorityService: the CA rotation steps, for clients with
// the admin role.
type AuthorityService struct {
	signetv1.UnimplementedAuthorityServiceServer
	core *decision.Core
}

var _ signetv1.AuthorityServiceServer = (*AuthorityService)(nil)

// NewAuthority returns an AuthorityService that decides with core.
func NewAuthority(core *decision.Core) *AuthorityService { return &AuthorityService{core: core} }

// GetAuthority describes the named signers, or every signer the caller administers.
func (a *AuthorityService) GetAuthority(ctx context.Context, req *signetv1.GetAuthorityRequest) (*signetv1.GetAuthorityResponse, error) {
	id := ClientIdentity(ctx)
	names := req.GetSignerNames()
	if len(names) == 0 {
		names = a.core.AdministeredSigners(id)
	}
	resp := &signetv1.GetAuthorityResponse{}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		st, err := a.core.AuthorityStatus(id, name)
		if err != nil {
			return nil, toStatus(err)
		}
		resp.Signers = append(resp.Signers, signerAuthority(st))
	}
	return resp, nil
}

// StageCA stages the next CA of a signer.
func (a *AuthorityService) StageCA(ctx context.Context, req *signetv1.StageCARequest) (*signetv1.StageCAResponse, error) {
	id := ClientIdentity(ctx)
	if err := a.core.StageCA(ctx, id, req.GetSignerName(), func() (authority.CASpec, error) { return stagedSpec(req) }); err != nil {
		return nil, toStatus(err)
	}
	st, err := a.core.AuthorityStatus(id, req.GetSignerName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.StageCAResponse{Authority: signerAuthority(st)}, nil
}

// stagedSpec parses the CA of a StageCARequest.
func stagedSpec(req *signetv1.StageCARequest) (authority.CASpec, error) {
	switch {
	case req.GetKeyUri() == "":
		return authority.CASpec{}, decisionErr(authority.ErrInvalidCA, "key_uri is required")
	case len(req.GetCertificatePem()) > maxCAPEM || len(req.GetIntermediatesPem()) > maxCAPEM:
		return authority.CASpec{}, decisionErr(issuance.ErrMalformedRequest, "certificate_pem or intermediates_pem is over 64 KiB")
	}
	certs, err := authority.ParseCertificates(req.GetCertificatePem())
	if err != nil || len(certs) != 1 {
		return authority.CASpec{}, decisionErr(authority.ErrInvalidCA, "certificate_pem must hold exactly one PEM certificate, the CA's (put the chain in intermediates_pem)")
	}
	inter, err := authority.ParseCertificates(req.GetIntermediatesPem())
	if err != nil {
		return authority.CASpec{}, decisionErr(authority.ErrInvalidCA, "intermediates_pem: "+err.Error())
	}
	return authority.CASpec{State: authority.Staged, KeyURI: req.GetKeyUri(), Certificate: certs[0], Intermediates: inter,
		Source: "StageCA", Field: "staged CA"}, nil
}

// decisionErr is a refusal of kind with msg.
func decisionErr(kind error, msg string) error { return fmt.Errorf("%w: %s", kind, msg) }

// maxCAPEM bounds the PEM of a staged CA's certificate and of its intermediates.
const maxCAPEM = 64 << 10

// ActivateCA activates a signer's staged CA.
func (a *AuthorityService) ActivateCA(ctx context.Context, req *signetv1.ActivateCARequest) (*signetv1.ActivateCAResponse, error) {
	id := ClientIdentity(ctx)
	if err := a.core.ActivateCA(ctx, id, req.GetSignerName(), req.GetForce(), req.GetReason()); err != nil {
		return nil, toStatus(err)
	}
	st, err := a.core.AuthorityStatus(id, req.GetSignerName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.ActivateCAResponse{Authority: signerAuthority(st)}, nil
}

// RetireCA removes a retired or staged CA from a signer's bundle.
func (a *AuthorityService) RetireCA(ctx context.Context, req *signetv1.RetireCARequest) (*signetv1.RetireCAResponse, error) {
	id := ClientIdentity(ctx)
	if err := a.core.RetireCA(ctx, id, req.GetSignerName(), req.GetFingerprint(), req.GetSerialNumber(), req.GetForce(), req.GetReason()); err != nil {
		return nil, toStatus(err)
	}
	st, err := a.core.AuthorityStatus(id, req.GetSignerName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.RetireCAResponse{Authority: signerAuthority(st)}, nil
}

// signerAuthority is st on the wire.
func signerAuthority(st authority.Status) *signetv1.SignerAuthority {
	var published []authority.Entry
	for _, ca := range st.CAs {
		if ca.State != authority.Removed {
			published = append(published, ca.Entry)
		}
	}
	out := &signetv1.SignerAuthority{SignerName: st.Signer, MinPropagationDelay: durationpb.New(st.Delay), Activation: gate(st.Activation),
		BundleHash: bundleHash(published)}
	for _, ca := range st.CAs {
		c := &signetv1.AuthorityCA{Anchor: trustAnchor(ca.Entry), KeyUri: keystore.Redact(ca.KeyURI),
			Intermediates: int32(len(ca.Intermediates)), LastLeafNotAfter: stamp(ca.LastLeaf), By: ca.By}
		if ca.State == authority.Retired || ca.State == authority.Staged {
			c.Retirement = gate(ca.Retirement)
		}
		out.Cas = append(out.Cas, c)
	}
	for _, cl := range st.Clusters {
		out.Clusters = append(out.Clusters, &signetv1.ClusterReport{
			Cluster: cl.Cluster, Registered: cl.Registered, BundleHash: cl.BundleHash, AnchorFingerprints: cl.Anchors,
			ReportedAt: stamp(cl.ReportedAt), LastSeen: stamp(cl.LastSeen), StagedPublishedAt: stamp(cl.StagedAt), Source: cl.Source,
		})
	}
	return out
}

// bundleHash is the hash of the bundle of anchors as a ClusterTrustBundle holds it.
func bundleHash(anchors []authority.Entry) string {
	ders := make([][]byte, len(anchors))
	for i, a := range anchors {
		ders[i] = a.Certificate.Raw
	}
	return signetv1.BundleHash(signetv1.CanonicalBundle(ders))
}

// trustAnchor is one CA on the wire.
func trustAnchor(e authority.Entry) *signetv1.TrustAnchor {
	c := e.Certificate
	return &signetv1.TrustAnchor{
		CertificatePem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})),
		State:          anchorState(e.State),
		Since:          stamp(e.Since),
		Fingerprint:    e.Fingerprint,
		Subject:        c.Subject.String(),
		SerialNumber:   hex.EncodeToString(c.SerialNumber.Bytes()),
		NotAfter:       stamp(c.NotAfter),
	}
}

func anchorState(st authority.State) signetv1.AnchorState {
	switch st {
	case authority.Active:
		return signetv1.AnchorState_ANCHOR_STATE_ACTIVE
	case authority.Staged:
		return signetv1.AnchorState_ANCHOR_STATE_STAGED
	case authority.Retired:
		return signetv1.AnchorState_ANCHOR_STATE_RETIRED
	case authority.Removed:
		return signetv1.AnchorState_ANCHOR_STATE_REMOVED
	}
	return signetv1.AnchorState_ANCHOR_STATE_UNSPECIFIED
}

func gate(g authority.Gate) *signetv1.Gate {
	return &signetv1.Gate{Ready: g.Ready, Blocking: g.Blocking, NotBefore: stamp(g.NotBefore)}
}

// stamp is t on the wire, nil when zero.
func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// ConfirmTrust records an admin's confirmation that a cluster trusts a signer's staged CA
// where nothing publishes it (decision.Core.ConfirmTrust).
func (a *AuthorityService) ConfirmTrust(ctx context.Context, req *signetv1.ConfirmTrustRequest) (*signetv1.ConfirmTrustResponse, error) {
	id := ClientIdentity(ctx)
	if err := a.core.ConfirmTrust(ctx, id, req.GetSignerName(), req.GetCluster(), req.GetAnchor(), req.GetReason()); err != nil {
		return nil, toStatus(err)
	}
	st, err := a.core.AuthorityStatus(id, req.GetSignerName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.ConfirmTrustResponse{Authority: signerAuthority(st)}, nil
}
