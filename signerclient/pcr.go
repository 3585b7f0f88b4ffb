package signerclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// SignPCR asks the server to issue a certificate for pcr and returns the PEM chain for
// status.certificateChain, leaf first, with the leaf's serial number and the times for
// status.notBefore, notAfter and beginRefreshAt exactly as the server reports them. The call
// is bounded by the client's RPC timeout. An answer without a chain or without any of the
// three times is an error (transient: the API server would refuse such a status). Errors
// wrap the gRPC status; see Classify.
func (c *Client) SignPCR(ctx context.Context, pcr objectrequest.PCR) (Issued, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.SignPodCertificateRequest(ctx, objectrequest.PodRequest(pcr))
	if err != nil {
		return Issued{}, fmt.Errorf("signing PodCertificateRequest %s/%s: %w", pcr.Namespace, pcr.Name, err)
	}
	issued, err := pcrIssued(resp)
	if err != nil {
		return Issued{}, fmt.Errorf("signing PodCertificateRequest %s/%s: %w", pcr.Namespace, pcr.Name, err)
	}
	return issued, nil
}

// errIncompleteAnswer is returned when the server's answer to a PodCertificateRequest lacks
// a time the status needs; it is transient.
var errIncompleteAnswer = errors.New("server answer lacks notBefore, notAfter or beginRefreshAt")

// pcrIssued checks resp and converts it to an Issued.
func pcrIssued(resp *signetv1.SignPodCertificateRequestResponse) (Issued, error) {
	if resp.GetCertificateChainPem() == "" {
		return Issued{}, errEmptyChain
	}
	if resp.GetNotBefore() == nil || resp.GetNotAfter() == nil || resp.GetBeginRefreshAt() == nil {
		return Issued{}, errIncompleteAnswer
	}
	return Issued{
		Chain:          []byte(resp.GetCertificateChainPem()),
		Serial:         resp.GetSerialNumber(),
		NotBefore:      resp.GetNotBefore().AsTime(),
		NotAfter:       resp.GetNotAfter().AsTime(),
		BeginRefreshAt: resp.GetBeginRefreshAt().AsTime(),
	}, nil
}
