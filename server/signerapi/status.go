package signerapi

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/wire"
)

// toStatus converts an error of the decision core to a gRPC status with a
// google.rpc.ErrorInfo detail (server/wire's answer to its reason). Internal errors get a
// generic message; the core logs the detail. A caller that went away gets its context's
// status.
func toStatus(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	reason, _ := decision.Classify(err)
	a := wire.For(reason)
	st := status.New(a.Code, decision.PublicMessage(err))
	withInfo, detailErr := st.WithDetails(&errdetails.ErrorInfo{
		Reason: signetv1.ReasonName(a.Reason),
		Domain: signetv1.ErrorDomain,
	})
	if detailErr != nil {
		return st.Err()
	}
	return withInfo.Err()
}
