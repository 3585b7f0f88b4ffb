package signerapi

import (
	"context"
	"runtime"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/ledger"
)

// GetServerInfo returns the server's build.
func (s *Service) GetServerInfo(context.Context, *signetv1.GetServerInfoRequest) (*signetv1.GetServerInfoResponse, error) {
	return &signetv1.GetServerInfoResponse{Version: s.build.Version, Commit: s.build.Commit, GoVersion: runtime.Version()}, nil
}

// Build names the server's build for GetServerInfo.
type Build struct {
	Version, Commit string
}

// LedgerService serves signet.v1.LedgerService: read-only lookups in the decision ledger.
type LedgerService struct {
	signetv1.UnimplementedLedgerServiceServer
	core   *decision.Core
	proofs Proofs // nil: the proof RPCs are Unimplemented
}

var _ signetv1.LedgerServiceServer = (*LedgerService)(nil)

// NewLedger returns a LedgerService that reads through core.
func NewLedger(core *decision.Core) *LedgerService { return &LedgerService{core: core} }

// FindRecords returns the records of an object UID or a certificate serial number the caller
// may see.
func (l *LedgerService) FindRecords(ctx context.Context, req *signetv1.FindRecordsRequest) (*signetv1.FindRecordsResponse, error) {
	recs, err := l.core.FindRecords(ctx, ClientIdentity(ctx), req.GetObjectUid(), req.GetSerialNumber(), int(req.GetLimit()))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &signetv1.FindRecordsResponse{}
	for _, r := range recs {
		resp.Records = append(resp.Records, ledgerRecord(r))
	}
	return resp, nil
}

// ledgerRecord is r on the wire.
func ledgerRecord(r ledger.Record) *signetv1.LedgerRecord {
	return &signetv1.LedgerRecord{
		Seq: r.Seq, Time: stamp(r.Time), Decision: string(r.Decision), Signer: r.Signer, Client: r.Client,
		Requester: r.Requester, ObjectUid: r.ObjectUID, ObjectKind: r.ObjectKind, SerialNumber: r.Serial,
		NotBefore: stamp(r.NotBefore), NotAfter: stamp(r.NotAfter), Reason: r.Reason, Message: r.Message,
		Grounds: r.Grounds, CertificateChainPem: r.Certificate, Hash: r.Hash,
	}
}
