package signerclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// The AuthorityService calls: an admin client (clients[].admin in the server's configuration)
// rotates a signer's CAs in stages. They go over the same connection, endpoints and
// fail-over as the signing calls; each is bounded by the client's RPC timeout. Errors wrap the
// gRPC status: the server's refusals carry an ErrorInfo reason (ADMIN_REQUIRED,
// ROTATION_REFUSED, INVALID_CA, UNKNOWN_SIGNER, ...) and a message written for people.

// errNoAuthority is returned when the server answers a rotation step without the signer's
// CA set.
var errNoAuthority = errors.New("server returned no CA set")

// authority returns the AuthorityService client on c's connection.
func (c *Client) authority() signetv1.AuthorityServiceClient {
	return signetv1.NewAuthorityServiceClient(c.conn)
}

// GetAuthority asks the server for the CA sets of signerNames (GetAuthority): each signer's
// CAs, what its clusters published, and the activation and retirement gates. No name means
// every signer the caller may administer.
func (c *Client) GetAuthority(ctx context.Context, signerNames ...string) (*signetv1.GetAuthorityResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.authority().GetAuthority(ctx, &signetv1.GetAuthorityRequest{SignerNames: signerNames})
	if err != nil {
		what := "every signer"
		if len(signerNames) > 0 {
			what = strings.Join(signerNames, ", ")
		}
		return nil, fmt.Errorf("getting the CAs of %s: %w", what, err)
	}
	return resp, nil
}

// StageCA adds req's CA to the signer as its next CA (StageCA): published in the trust
// bundle, not issuing yet. It returns the signer's CA set after staging; an answer without
// one is an error.
func (c *Client) StageCA(ctx context.Context, req *signetv1.StageCARequest) (*signetv1.StageCAResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.authority().StageCA(ctx, req)
	if err == nil && resp.GetAuthority() == nil {
		err = errNoAuthority
	}
	if err != nil {
		return nil, fmt.Errorf("staging a CA for %s: %w", req.GetSignerName(), err)
	}
	return resp, nil
}

// ActivateCA makes the signer's staged CA the one that issues (ActivateCA). req.Force skips
// the propagation gate and needs req.Reason (the server refuses it otherwise). It returns
// the signer's CA set after activation; an answer without one is an error.
func (c *Client) ActivateCA(ctx context.Context, req *signetv1.ActivateCARequest) (*signetv1.ActivateCAResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.authority().ActivateCA(ctx, req)
	if err == nil && resp.GetAuthority() == nil {
		err = errNoAuthority
	}
	if err != nil {
		return nil, fmt.Errorf("activating the staged CA of %s: %w", req.GetSignerName(), err)
	}
	return resp, nil
}

// RetireCA takes a retired (or staged) CA, named by fingerprint or serial number, out of the
// signer's trust bundle (RetireCA). req.Force skips the check that none of its leaves can
// still be valid and needs req.Reason. It returns the signer's CA set after retirement; an
// answer without one is an error.
func (c *Client) RetireCA(ctx context.Context, req *signetv1.RetireCARequest) (*signetv1.RetireCAResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.authority().RetireCA(ctx, req)
	if err == nil && resp.GetAuthority() == nil {
		err = errNoAuthority
	}
	if err != nil {
		ca := "fingerprint " + req.GetFingerprint()
		if req.GetFingerprint() == "" {
			ca = "serial " + req.GetSerialNumber()
		}
		return nil, fmt.Errorf("retiring CA %s of %s: %w", ca, req.GetSignerName(), err)
	}
	return resp, nil
}
