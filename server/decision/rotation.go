package decision

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// Rotation is the CA rotation of the served signers (server/rotation's Manager): the core
// authorizes each call and records refused admin calls; Rotation records what it does.
type Rotation interface {
	// Report takes a cluster's report of the trust bundle it published.
	Report(ctx context.Context, client string, r authority.Report, signer string) error
	// Confirm takes an admin's confirmation that a cluster trusts the staged CA where nothing
	// publishes it.
	Confirm(ctx context.Context, client, signer, cluster, source, reason string) error
	// Status describes signer's CA set.
	Status(signer string) (authority.Status, error)
	// Stage, Activate and Retire are the rotation steps; force skips a gate, with reason.
	Stage(ctx context.Context, client, signer string, spec authority.CASpec) error
	Activate(ctx context.Context, client, signer string, force bool, reason string) error
	Retire(ctx context.Context, client, signer, fingerprint, serial string, force bool, reason string) error
}

// errAdminRequired: the caller lacks the admin role for the signer.
var errAdminRequired = errors.New("admin role required")

// Limits of a trust bundle report.
const (
	maxReportAnchors = 64
	maxClusterName   = 63
	maxConfirmReason = 512
)

var (
	hexDigest   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// ReportTrustBundle takes a client's report that it published signer's trust bundle in a
// cluster: the client must be allowed to use the signer, within its rate limit, and the report
// well formed.
func (c *Core) ReportTrustBundle(ctx context.Context, identity, signer string, r authority.Report) error {
	// A report costs a token of the client's rate limit (not of the signer's issuance budget):
	// while a CA is staged a new bundle hash is a ledger record, and a client must not write
	// records faster than its limit allows.
	if err := c.clientLimited(identity, signer); err != nil {
		return err
	}
	if err := checkReport(r); err != nil {
		return err
	}
	if c.opts.Rotation == nil {
		return nil
	}
	return c.opts.Rotation.Report(ctx, identity, r, signer)
}

// clientLimited spends a token of identity's rate limit and checks that it may use signer:
// errRateLimited when the bucket is empty, the authorization error, or nil.
func (c *Core) clientLimited(identity, signer string) error {
	ok, err := c.access.Load().Limiter.AllowClient(identity, func() error {
		_, err := c.lookupSigner(identity, signer)
		return err
	})
	if !ok && err == nil {
		return fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, access.LimitClient)
	}
	return err
}

// checkReport refuses a report that cannot be what a watcher published.
func checkReport(r authority.Report) error {
	switch {
	case len(r.Cluster) > maxClusterName || !clusterName.MatchString(r.Cluster):
		return fmt.Errorf("%w: cluster %.80q is not a DNS-1123 label of at most %d characters", issuance.ErrMalformedRequest, r.Cluster, maxClusterName)
	case r.Source != "" && r.Source != "apiserver-client-ca":
		return fmt.Errorf("%w: source %.80q is not a trust source a watcher reports (empty or apiserver-client-ca)", issuance.ErrMalformedRequest, r.Source)
	case !hexDigest.MatchString(r.BundleHash):
		return fmt.Errorf("%w: bundle_hash %.80q is not a lower-case hex SHA-256", issuance.ErrMalformedRequest, r.BundleHash)
	case len(r.Anchors) == 0 || len(r.Anchors) > maxReportAnchors:
		return fmt.Errorf("%w: %d anchor fingerprints; want 1 to %d", issuance.ErrMalformedRequest, len(r.Anchors), maxReportAnchors)
	}
	for _, fp := range r.Anchors {
		if !hexDigest.MatchString(fp) {
			return fmt.Errorf("%w: anchor fingerprint %.80q is not a lower-case hex SHA-256", issuance.ErrMalformedRequest, fp)
		}
	}
	return nil
}

// AdministeredSigners returns the signers identity may administer, sorted.
func (c *Core) AdministeredSigners(identity string) []string {
	var out []string
	for _, s := range c.Signers(identity) {
		if c.admin(identity, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// admin reports whether identity has the admin role for signer.
func (c *Core) admin(identity, signer string) bool {
	a := c.access.Load().Authorizer
	return a != nil && a.Admin(identity, signer)
}

// lookupAdmin checks that signer is served and identity administers it.
func (c *Core) lookupAdmin(identity, signer string) error {
	if _, err := c.lookupSigner(identity, signer); err != nil {
		return err
	}
	if !c.admin(identity, signer) {
		return fmt.Errorf("%w: client %q does not have the admin role for signer %q (clients[].admin in the server configuration)", errAdminRequired, identity, signer)
	}
	if c.opts.Rotation == nil {
		return fmt.Errorf("%w: CA rotation is not configured", authority.ErrRotationRefused)
	}
	return nil
}

// AuthorityStatus describes signer's CA set to an admin of it.
func (c *Core) AuthorityStatus(identity, signer string) (authority.Status, error) {
	if err := c.lookupAdmin(identity, signer); err != nil {
		return authority.Status{}, err
	}
	return c.opts.Rotation.Status(signer)
}

// StageCA stages the next CA of signer, which spec parses from the request (after the
// caller's admin role is checked, so that only an admin learns what is wrong with it).
func (c *Core) StageCA(ctx context.Context, identity, signer string, spec func() (authority.CASpec, error)) error {
	return c.administer(ctx, identity, signer, "stage", func() error {
		s, err := spec()
		if err != nil {
			return err
		}
		return c.opts.Rotation.Stage(ctx, identity, signer, s)
	})
}

// ActivateCA activates the staged CA of signer.
func (c *Core) ActivateCA(ctx context.Context, identity, signer string, force bool, reason string) error {
	return c.administer(ctx, identity, signer, "activate", func() error {
		if err := forcedReason(reason); err != nil {
			return err
		}
		return c.opts.Rotation.Activate(ctx, identity, signer, force, reason)
	})
}

// ConfirmTrust records an admin's confirmation that cluster's relying party trusts signer's
// staged CA in source (kubelet-certificate-authority), which nothing publishes.
func (c *Core) ConfirmTrust(ctx context.Context, identity, signer, cluster, source, reason string) error {
	return c.administer(ctx, identity, signer, "confirm", func() error {
		switch {
		case len(cluster) > maxClusterName || !clusterName.MatchString(cluster):
			return fmt.Errorf("%w: cluster %.80q is not a DNS-1123 label of at most %d characters", issuance.ErrMalformedRequest, cluster, maxClusterName)
		case reason == "" || len(reason) > maxConfirmReason:
			return fmt.Errorf("%w: reason is required: up to %d characters saying how the anchor was checked", issuance.ErrMalformedRequest, maxConfirmReason)
		}
		if err := printable("reason", reason); err != nil {
			return err
		}
		return c.opts.Rotation.Confirm(ctx, identity, signer, cluster, source, reason)
	})
}

// RetireCA removes a retired or staged CA of signer from its bundle.
func (c *Core) RetireCA(ctx context.Context, identity, signer, fingerprint, serial string, force bool, reason string) error {
	return c.administer(ctx, identity, signer, "retire", func() error {
		if err := forcedReason(reason); err != nil {
			return err
		}
		return c.opts.Rotation.Retire(ctx, identity, signer, fingerprint, serial, force, reason)
	})
}

// forcedReason checks the reason of a forced step, which its Rotated record keeps as its
// grounds: bounded, and without control characters (as a confirmation's).
func forcedReason(reason string) error {
	if len(reason) > maxConfirmReason {
		return fmt.Errorf("%w: reason is %d bytes; up to %d", issuance.ErrMalformedRequest, len(reason), maxConfirmReason)
	}
	return printable("reason", reason)
}

// administer runs one rotation step for an admin of signer, within the client's rate limit; a
// refusal is logged and recorded in the ledger (the step itself records what it does).
func (c *Core) administer(ctx context.Context, identity, signer, step string, run func() error) error {
	// A step costs a token of the client's rate limit, as a signing call does, so that refused
	// calls cannot fill the ledger faster than the limit allows.
	err := c.clientLimited(identity, signer)
	if errors.Is(err, errRateLimited) {
		return err
	}
	if err == nil {
		err = c.lookupAdmin(identity, signer)
	}
	if err == nil {
		err = run()
	}
	if err == nil {
		return nil
	}
	reason, safe := Classify(err)
	log := c.opts.Log.With(logKeySigner, signer, logKeyClient, identity, "step", step)
	if safe {
		log.Warn("CA rotation step refused", logKeyReason, string(reason), logKeyError, err.Error())
	} else {
		log.Error("CA rotation step failed", logKeyReason, string(reason), logKeyError, err.Error())
	}
	rec := ledger.Record{Decision: ledger.Refused, Signer: clip(signer, recordMessageBytes), Client: clip(identity, recordMessageBytes),
		Reason: string(reason), Message: clip("ca "+step+": "+PublicMessage(err), recordMessageBytes)}
	if _, lerr := c.appendRecord(ctx, rec); lerr != nil {
		log.Error("recording a refused CA rotation step", logKeyError, lerr.Error())
	}
	return err
}
