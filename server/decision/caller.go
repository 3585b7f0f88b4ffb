package decision

import (
	"fmt"
	"slices"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/issuance"
)

// Caller is the verified caller of identity: its role, and a principal's groups
// (access.Authorizer.Caller). A client the configuration does not name is a forwarder.
func (c *Core) Caller(identity string) access.Caller {
	return c.access.Load().Authorizer.Caller(identity)
}

// asCaller returns the request as call may send it. A forwarder's request is what it
// forwards, requester included. A principal asks for itself: the requester is what the server
// verified (the client's identity and configured groups), never the message's; a message
// that names another requester, or a uid or extra, is refused as malformed, with the error
// returned for the caller's admission to report.
func asCaller(call access.Caller, req CSR) (CSR, error) {
	if !call.Principal() {
		return req, nil
	}
	who := req.Request.Requester
	if (who.Username != "" && who.Username != call.Identity) || (len(who.Groups) > 0 && !slices.Equal(who.Groups, call.Groups)) ||
		who.UID != "" || len(who.Extra) > 0 {
		return req, fmt.Errorf("%w: client %q is a principal, which asks for itself: its requester is its own identity and configured groups, "+
			"so the request must name no other (it names %.80q)", issuance.ErrMalformedRequest, call.Identity, who.Username)
	}
	req.Request.Requester = issuance.Requester{Username: call.Identity, Groups: slices.Clone(call.Groups)}
	return req, nil
}
