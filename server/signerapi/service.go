// Package signerapi implements the signet.v1 SignerService over the issuance pipeline.
package signerapi

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/timestamppb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/issuance"
)

// Log keys used by the service.
const (
	logKeySigner    = "signer"
	logKeyClient    = "client"
	logKeyObjectUID = "object_uid"
	logKeyObject    = "object"
	logKeyRequester = "requester"
	logKeyOutcome   = "outcome"
	logKeySerial    = "serial"
	logKeyNotAfter  = "not_after"
	logKeyReason    = "reason"
	logKeyError     = "error"
)

// Signer is one served signer.
type Signer struct {
	// Issuer runs the signer's pipeline.
	Issuer *issuance.Issuer
}

// Service serves SignerService. Its signers can be replaced at any time (hot reload): each
// call uses the set that was current when it started.
type Service struct {
	signetv1.UnimplementedSignerServiceServer
	signers atomic.Pointer[map[string]*Signer]
	log     *slog.Logger
}

var _ signetv1.SignerServiceServer = (*Service)(nil)

// New returns a Service for the given signers.
func New(signers []*Signer, log *slog.Logger) *Service {
	s := &Service{log: log}
	s.SetSigners(signers)
	return s
}

// SetSigners replaces the served signers, keyed by their signer names. Calls in flight finish
// with the set they started with.
func (s *Service) SetSigners(signers []*Signer) {
	m := make(map[string]*Signer, len(signers))
	for _, sg := range signers {
		m[sg.Issuer.SignerName()] = sg
	}
	s.signers.Store(&m)
}

// signer returns the named signer of the current set.
func (s *Service) signer(name string) (*Signer, bool) {
	sg, ok := (*s.signers.Load())[name]
	return sg, ok
}

// SignCertificateSigningRequest runs the request through the signer's issuance pipeline and
// returns the chain. Every decision is logged with the signer, the client identity, the
// object UID and the requester; request contents are never logged.
func (s *Service) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	log := s.log.With(
		logKeySigner, req.GetSignerName(),
		logKeyClient, ClientIdentity(ctx),
		logKeyObjectUID, req.GetObject().GetUid(),
		logKeyObject, req.GetObject().GetName(),
		logKeyRequester, req.GetRequester().GetUsername(),
	)
	sg, ok := s.signer(req.GetSignerName())
	if !ok {
		return nil, s.refuse(log, fmt.Errorf("%w: this server does not serve signer %q", errUnknownSigner, req.GetSignerName()))
	}
	cert, err := sg.Issuer.Issue(requestFromProto(req))
	if err != nil {
		return nil, s.refuse(log, fmt.Errorf("signing request: %w", err))
	}
	serial := hex.EncodeToString(cert.Leaf.SerialNumber.Bytes())
	log.InfoContext(ctx, "certificate issued", logKeyOutcome, "issued", logKeySerial, serial, logKeyNotAfter, cert.Leaf.NotAfter)
	return &signetv1.SignCertificateSigningRequestResponse{
		CertificateChainPem: string(cert.ChainPEM),
		SerialNumber:        serial,
		NotBefore:           timestamppb.New(cert.Leaf.NotBefore),
		NotAfter:            timestamppb.New(cert.Leaf.NotAfter),
	}, nil
}

// GetTrustAnchors returns the CA certificate of the named signer.
func (s *Service) GetTrustAnchors(_ context.Context, req *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	sg, ok := s.signer(req.GetSignerName())
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: this server does not serve signer %q", errUnknownSigner, req.GetSignerName()))
	}
	return &signetv1.GetTrustAnchorsResponse{TrustAnchorsPem: string(sg.Issuer.TrustAnchors())}, nil
}

// refuse logs a refusal (with the full error for internal failures) and returns its status.
func (s *Service) refuse(log *slog.Logger, err error) error {
	code, reason, safe := classify(err)
	if safe {
		log.Info("request refused", logKeyOutcome, "refused", logKeyReason, ReasonName(reason), logKeyError, err.Error())
	} else {
		log.Error("request failed", logKeyOutcome, "error", logKeyReason, ReasonName(reason), "code", code.String(), logKeyError, err.Error())
	}
	return toStatus(err)
}

func requestFromProto(req *signetv1.SignCertificateSigningRequestRequest) issuance.Request {
	r := issuance.Request{
		SignerName: req.GetSignerName(),
		PEM:        req.GetRequest(),
		Usages:     req.GetUsages(),
		Requester: issuance.Requester{
			Username: req.GetRequester().GetUsername(),
			UID:      req.GetRequester().GetUid(),
			Groups:   req.GetRequester().GetGroups(),
		},
	}
	if req.ExpirationSeconds != nil {
		v := req.GetExpirationSeconds()
		r.ExpirationSeconds = &v
	}
	if extra := req.GetRequester().GetExtra(); len(extra) > 0 {
		r.Requester.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			r.Requester.Extra[k] = v.GetValues()
		}
	}
	return r
}

// ClientIdentity names the mTLS client of ctx: its first URI SAN, else its subject common
// name, else "unknown".
func ClientIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.VerifiedChains[0]) == 0 {
		return "unknown"
	}
	return identityOf(tlsInfo.State.VerifiedChains[0][0])
}

func identityOf(cert *x509.Certificate) string {
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String()
	}
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName
	}
	return "unknown"
}
