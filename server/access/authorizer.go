// Package access decides who may talk to signet-server and how fast: an Authorizer maps mTLS
// client identities to the signers they may use and refuses unknown clients during the TLS
// handshake; a Limiter applies token-bucket rate limits per client and per signer.
//
// Both are immutable once built. To reload configuration, build new ones and swap them in
// with an atomic.Pointer; calls in flight keep the value they loaded.
package access

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// AllSigners in a Client's Signers list allows every signer the server serves.
const AllSigners = "*"

// ErrUnknownClient is returned by VerifyConnection for a client whose identity is not
// configured.
var ErrUnknownClient = errors.New("unknown client")

// Client is one configured client of the server.
type Client struct {
	// Identity is the client's exact identity as Identity extracts it from its certificate:
	// its first URI SAN (e.g. spiffe://cluster.example/ns/signet-system/sa/signet-watcher),
	// else its subject common name.
	Identity string `json:"identity"`
	// Signers are the signer names the client may use; "*" means every served signer. An
	// empty list lets the client connect but use no signer.
	Signers []string `json:"signers"`
	// RateLimit limits the client's signing requests across all signers. Nil means no limit.
	RateLimit *Rate `json:"rateLimit,omitempty"`
	// Admin gives the client the admin role for its signers: it may rotate their CAs
	// (signet.v1.AuthorityService). Off by default.
	Admin bool `json:"admin,omitempty"`
	// Role says whose requests the client sends: "forwarder" (the default: the watcher, the
	// webhook's clients) forwards requests that others made, and the server takes their
	// requester from the message; "principal" asks for itself, and the server takes the
	// requester from what it verified, the client's identity (and Groups), never from the
	// message.
	Role Role `json:"role,omitempty"`
	// Groups are a principal's groups, its requester's groups. Only with role principal.
	Groups []string `json:"groups,omitempty"`
}

// Role is whose requests a client sends.
type Role string

// The roles of a client.
const (
	// RoleForwarder forwards requests that others made (the default).
	RoleForwarder Role = "forwarder"
	// RolePrincipal asks for itself.
	RolePrincipal Role = "principal"
)

// Caller is a verified client as the decision core sees it: its identity and its role.
type Caller struct {
	Identity string
	Role     Role
	// Groups are a principal's groups.
	Groups []string
}

// Principal reports whether the caller asks for itself.
func (c Caller) Principal() bool { return c.Role == RolePrincipal }

// Identity names the client a certificate belongs to: its first URI SAN, else its subject
// common name, else "" (which is never a configured identity).
func Identity(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String()
	}
	return cert.Subject.CommonName
}

// Authorizer maps client identities to the signers they may use. It is immutable and safe
// for concurrent use; a nil *Authorizer knows no clients and allows nothing.
type Authorizer struct {
	// signers maps each configured identity to its sorted, expanded signer names.
	signers map[string][]string
	// admins are the identities with the admin role.
	admins map[string]bool
	// principals are the identities with role principal, with their groups.
	principals map[string][]string
}

// NewAuthorizer validates clients against the served signer names and returns an Authorizer.
// It reports every problem at once, each naming the entry (clients[i]): an empty or
// duplicate identity, a URI identity not written as certificates render it, a signer that is
// not served or listed twice, "*" mixed with names, and an invalid rate limit.
func NewAuthorizer(clients []Client, servedSigners []string) (*Authorizer, error) {
	served := make(map[string]bool, len(servedSigners))
	for _, s := range servedSigners {
		served[s] = true
	}
	all := slices.Sorted(maps.Keys(served))
	a := &Authorizer{signers: make(map[string][]string, len(clients)), admins: map[string]bool{}, principals: map[string][]string{}}
	var errs []error
	for i, c := range clients {
		at := fmt.Sprintf("clients[%d]", i)
		if c.Identity != "" {
			at = fmt.Sprintf("clients[%d] (%s)", i, c.Identity)
		}
		if err := validIdentity(c.Identity); err != nil {
			errs = append(errs, fmt.Errorf("%s.identity: %w", at, err))
		} else if _, dup := a.signers[c.Identity]; dup {
			errs = append(errs, fmt.Errorf("%s.identity is listed twice", at))
		}
		names, err := expandSigners(c.Signers, served, all)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.signers: %w", at, err))
		}
		if c.RateLimit != nil {
			if err := c.RateLimit.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s.rateLimit: %w", at, err))
			}
		}
		switch {
		case c.Role != "" && c.Role != RoleForwarder && c.Role != RolePrincipal:
			errs = append(errs, fmt.Errorf("%s.role: %q is not %s or %s", at, c.Role, RoleForwarder, RolePrincipal))
		case len(c.Groups) > 0 && c.Role != RolePrincipal:
			errs = append(errs, fmt.Errorf("%s.groups: only for role %s (a forwarder's requesters bring their own groups)", at, RolePrincipal))
		}
		if _, dup := a.signers[c.Identity]; !dup {
			a.signers[c.Identity] = names
			a.admins[c.Identity] = c.Admin
			if c.Role == RolePrincipal {
				a.principals[c.Identity] = slices.Clone(c.Groups)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("validating clients: %w", err)
	}
	return a, nil
}

// validIdentity refuses identities that can never match a certificate.
func validIdentity(id string) error {
	if id == "" {
		return errors.New("is empty")
	}
	if strings.TrimSpace(id) != id {
		return fmt.Errorf("%q has leading or trailing spaces", id)
	}
	if strings.Contains(id, "://") {
		u, err := url.Parse(id)
		if err != nil {
			return fmt.Errorf("parsing URI: %w", err)
		}
		if u.String() != id {
			return fmt.Errorf("%q never matches a certificate: write the URI as %q", id, u.String())
		}
	}
	return nil
}

// expandSigners checks a client's signer list and returns the signer names it allows, sorted.
func expandSigners(names []string, served map[string]bool, all []string) ([]string, error) {
	var errs []error
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		switch {
		case seen[n]:
			errs = append(errs, fmt.Errorf("%q is listed twice", n))
		case n == AllSigners && len(names) > 1:
			errs = append(errs, fmt.Errorf("%q already means every served signer; list nothing else", AllSigners))
		case n != AllSigners && !served[n]:
			errs = append(errs, fmt.Errorf("%q is not a signer this server serves", n))
		}
		seen[n] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if seen[AllSigners] {
		return all, nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return out, nil
}

// VerifyConnection is a tls.Config.VerifyConnection hook for the server. It runs after the
// client's chain was verified against the client CA (tls.RequireAndVerifyClientCert) and
// fails the handshake, wrapping ErrUnknownClient, unless the verified leaf's identity is
// configured. With no verified chain (a server not requiring client certificates) it fails
// too. Wrap it in a closure that loads the current Authorizer and logs refusals.
func (a *Authorizer) VerifyConnection(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return fmt.Errorf("verifying client: %w: no verified client certificate", ErrUnknownClient)
	}
	id := Identity(cs.VerifiedChains[0][0])
	if !a.Known(id) {
		return fmt.Errorf("verifying client: %w %q", ErrUnknownClient, id)
	}
	return nil
}

// Known reports whether identity is a configured client. It is false for "".
func (a *Authorizer) Known(identity string) bool {
	if a == nil || identity == "" {
		return false
	}
	_, ok := a.signers[identity]
	return ok
}

// Allowed reports whether the client identity may use signerName. It is false for unknown
// clients, so a per-request check also covers connections made before a reload removed the
// client.
func (a *Authorizer) Allowed(identity, signerName string) bool {
	if !a.Known(identity) {
		return false
	}
	_, found := slices.BinarySearch(a.signers[identity], signerName)
	return found
}

// Caller returns the caller of a verified identity: its role (forwarder unless configured
// principal) and a principal's groups.
func (a *Authorizer) Caller(identity string) Caller {
	if a == nil {
		return Caller{Identity: identity, Role: RoleForwarder}
	}
	if groups, ok := a.principals[identity]; ok {
		return Caller{Identity: identity, Role: RolePrincipal, Groups: slices.Clone(groups)}
	}
	return Caller{Identity: identity, Role: RoleForwarder}
}

// Admin reports whether the client identity has the admin role for signerName: it may use
// the signer and is configured with admin.
func (a *Authorizer) Admin(identity, signerName string) bool {
	return a.Allowed(identity, signerName) && a.admins[identity]
}

// SignersFor returns, sorted, the signer names identity may use ("*" expanded to every
// served signer). It returns nil for an unknown client and an empty, non-nil slice for a
// known client allowed no signer. The slice is a copy.
func (a *Authorizer) SignersFor(identity string) []string {
	if !a.Known(identity) {
		return nil
	}
	return append([]string{}, a.signers[identity]...)
}
