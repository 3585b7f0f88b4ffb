package signerclient

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// Summary describes the issued leaf for Events, conditions and logs: "certificate issued by
// <signerName>, serial <hex>, valid until <RFC 3339>". It uses the serial number and NotAfter
// the server reported and parses the chain only if either is missing; the serial is the hex
// of its big-endian bytes, as the server logs and records it. If the leaf is needed and does
// not parse, the error is logged (with ctx's logger) and the summary is "certificate issued
// by <signerName>".
func (i Issued) Summary(ctx context.Context, signerName string) string {
	serial, notAfter := i.Serial, i.NotAfter
	if serial == "" || notAfter.IsZero() {
		leaf, err := parseLeaf(i.Chain)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Describing the issued certificate")
			return "certificate issued by " + signerName
		}
		serial, notAfter = hex.EncodeToString(leaf.SerialNumber.Bytes()), leaf.NotAfter
	}
	return fmt.Sprintf("certificate issued by %s, serial %s, valid until %s",
		signerName, serial, notAfter.UTC().Format(time.RFC3339))
}

// parseLeaf parses the first CERTIFICATE block of a PEM chain.
func parseLeaf(chain []byte) (*x509.Certificate, error) {
	for rest := chain; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("parsing the issued chain: no CERTIFICATE block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the issued leaf certificate: %w", err)
		}
		return leaf, nil
	}
}
