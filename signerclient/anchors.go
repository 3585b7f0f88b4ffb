package signerclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// errNoAnchors is returned when the server answers GetTrustAnchors without a certificate.
var errNoAnchors = errors.New("server returned no trust anchors")

// States of a trust anchor (Anchor.State), the lower-case form of signetv1.AnchorState.
const (
	// AnchorActive: the CA issues; published.
	AnchorActive = "active"
	// AnchorStaged: the next CA; published, not issuing yet.
	AnchorStaged = "staged"
	// AnchorRetired: no longer issuing; published while its leaves may be valid.
	AnchorRetired = "retired"
	// AnchorRemoved: retired and taken out of the bundle (GetAuthority only).
	AnchorRemoved = "removed"
	// AnchorUnknown: the server did not say (an older server) or sent a state this client
	// does not know.
	AnchorUnknown = "unknown"
)

// Anchor is one CA certificate of a signer's trust bundle and its state, as the server
// describes it.
type Anchor struct {
	// CertificatePEM is the PEM-encoded CA certificate.
	CertificatePEM []byte
	// State is AnchorActive, AnchorStaged, AnchorRetired, AnchorRemoved or AnchorUnknown.
	State string
	// Since is when the CA entered its state; zero when the server did not say (a state from
	// its configuration, unchanged since it loaded it).
	Since time.Time
	// Fingerprint is the lower-case hex SHA-256 of the certificate's DER.
	Fingerprint string
	// Subject is the certificate's subject, for people.
	Subject string
	// SerialNumber is the certificate's serial number in lower-case hexadecimal.
	SerialNumber string
	// NotAfter is the certificate's NotAfter; zero when the server did not say.
	NotAfter time.Time
}

// Anchors is a signer's trust bundle as GetTrustAnchors returns it.
type Anchors struct {
	// PEM is the trust bundle: the PEM-encoded certificates of the active, staged and retired
	// CAs, never empty.
	PEM []byte
	// Anchors describes each certificate of PEM, in the same order; empty from a server that
	// predates the field.
	Anchors []Anchor
	// BundleHash is the lower-case hex SHA-256 of PEM as the server computed it; empty from a
	// server that predates the field.
	BundleHash string
}

// TrustAnchors asks the server for signerName's trust anchors (GetTrustAnchors) and returns
// them as the server sent them: PEM CA certificates, one or more. The call is bounded by the
// client's RPC timeout. Errors wrap the gRPC status; an empty answer is an error too.
func (c *Client) TrustAnchors(ctx context.Context, signerName string) ([]byte, error) {
	set, err := c.TrustAnchorSet(ctx, signerName)
	if err != nil {
		return nil, err
	}
	return set.PEM, nil
}

// TrustAnchorSet asks the server for signerName's trust anchors (GetTrustAnchors) and returns
// the whole answer: the bundle's PEM, each anchor with its state, and the bundle's hash. The
// call is bounded by the client's RPC timeout. Errors wrap the gRPC status; an answer without
// a certificate is an error too.
func (c *Client) TrustAnchorSet(ctx context.Context, signerName string) (Anchors, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.GetTrustAnchors(ctx, &signetv1.GetTrustAnchorsRequest{SignerName: signerName})
	if err != nil {
		return Anchors{}, fmt.Errorf("getting trust anchors of %s: %w", signerName, err)
	}
	if resp.GetTrustAnchorsPem() == "" {
		return Anchors{}, fmt.Errorf("getting trust anchors of %s: %w", signerName, errNoAnchors)
	}
	set := Anchors{PEM: []byte(resp.GetTrustAnchorsPem()), BundleHash: resp.GetBundleHash()}
	for _, a := range resp.GetAnchors() {
		set.Anchors = append(set.Anchors, AnchorFromProto(a))
	}
	return set, nil
}

// AnchorFromProto converts a TrustAnchor of the wire into an Anchor; a nil one gives the
// zero Anchor with state AnchorUnknown.
func AnchorFromProto(a *signetv1.TrustAnchor) Anchor {
	out := Anchor{
		State:        AnchorState(a.GetState()),
		Fingerprint:  strings.ToLower(a.GetFingerprint()),
		Subject:      a.GetSubject(),
		SerialNumber: a.GetSerialNumber(),
	}
	if pem := a.GetCertificatePem(); pem != "" {
		out.CertificatePEM = []byte(pem)
	}
	if ts := a.GetSince(); ts != nil {
		out.Since = ts.AsTime()
	}
	if ts := a.GetNotAfter(); ts != nil {
		out.NotAfter = ts.AsTime()
	}
	return out
}

// AnchorState returns the Anchor.State of s: AnchorActive, AnchorStaged, AnchorRetired,
// AnchorRemoved, or AnchorUnknown for ANCHOR_STATE_UNSPECIFIED and values this client does
// not know.
func AnchorState(s signetv1.AnchorState) string {
	switch s {
	case signetv1.AnchorState_ANCHOR_STATE_ACTIVE:
		return AnchorActive
	case signetv1.AnchorState_ANCHOR_STATE_STAGED:
		return AnchorStaged
	case signetv1.AnchorState_ANCHOR_STATE_RETIRED:
		return AnchorRetired
	case signetv1.AnchorState_ANCHOR_STATE_REMOVED:
		return AnchorRemoved
	}
	return AnchorUnknown
}
