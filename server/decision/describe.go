package decision

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/issuance"
)

// TrustAnchors returns the CA certificates (PEM) of the named signer, its trust bundle, and
// the CAs they are, in the same order, to a client allowed to use it; the error
// (UNKNOWN_SIGNER, SIGNER_NOT_ALLOWED) otherwise.
func (c *Core) TrustAnchors(identity, signerName string) ([]byte, []authority.Entry, error) {
	sg, err := c.lookupSigner(identity, signerName)
	if err != nil {
		return nil, nil, err
	}
	if sg.TrustBundle != nil {
		return sg.TrustBundle, sg.Anchors, nil
	}
	ca := sg.Issuer.CACertificate()
	return sg.Issuer.TrustAnchors(), []authority.Entry{{
		CASpec: authority.CASpec{State: authority.Active, Certificate: ca}, Fingerprint: authority.Fingerprint(ca),
	}}, nil
}

// NamedSigner is a served signer and its name.
type NamedSigner struct {
	Name string
	*Signer
}

// Signers returns the signers identity may use, sorted by name, all of one generation.
func (c *Core) Signers(identity string) []NamedSigner {
	signers := *c.signers.Load()
	var out []NamedSigner
	for name, sg := range signers {
		if c.allowed(identity, name) {
			out = append(out, NamedSigner{Name: name, Signer: sg})
		}
	}
	slices.SortFunc(out, func(a, b NamedSigner) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Explain runs the request through the signer's pipeline up to and including the lint gate,
// without signing or recording, and reports every rule (the Explanation's Err is the refusal a
// sign call would return, for Classify and PublicMessage). It costs what a signing call
// costs, so it spends rate-limit tokens as one does (see admit) and checks the same limits;
// the error is a refusal by those, or by authorization.
func (c *Core) Explain(identity string, req CSR) (issuance.Explanation, error) {
	req, callerErr := asCaller(c.Caller(identity), req)
	sg, which, err := c.limitedSigner(identity, req.Request.SignerName, func() error { return cmp.Or(callerErr, checkCSR(req)) })
	switch {
	case err != nil:
		return issuance.Explanation{}, err
	case sg == nil:
		return issuance.Explanation{}, fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, which)
	}
	r := req.Request
	if sg.Profile.RequiresAttestation() {
		// Explain verifies no evidence (it spends nothing and binds nothing): the rules see the
		// bare request, and the attestation rule says that nothing was verified.
		if att, err := attestation.Split(r.PEM); err == nil {
			r.PEM = att.Request
		}
	}
	exp := sg.Issuer.Explain(r)
	if exp.Err != nil {
		if reason, safe := Classify(exp.Err); !safe {
			// What a sign call would log: the detail stays in the log, the caller gets the
			// generic message (PublicMessage).
			c.opts.Log.Error("explaining a request failed", logKeySigner, req.Request.SignerName, logKeyClient, identity,
				logKeyObjectUID, req.Object.UID, logKeyReason, string(reason), logKeyError, exp.Err.Error())
		}
	}
	return exp, nil
}

// lookupSigner returns the named signer if identity may use it, else an error wrapping
// errUnknownSigner or errSignerNotAllowed.
func (c *Core) lookupSigner(identity, name string) (*Signer, error) {
	sg, ok := c.signer(name)
	if !ok {
		return nil, fmt.Errorf("%w: this server does not serve signer %q", errUnknownSigner, name)
	}
	if !c.allowed(identity, name) {
		return nil, fmt.Errorf("%w: client %q may not use signer %q", errSignerNotAllowed, identity, name)
	}
	return sg, nil
}
