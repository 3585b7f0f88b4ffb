package signerclient

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Summary describes the issued leaf for Events, conditions and logs: "certificate issued by
// <signerName>, serial <hex>, valid until <RFC 3339>". It uses the serial number and NotAfter
// the server reported and parses the chain only if either is missing; the serial is the hex
// of its big-endian bytes, as the server logs and records it. If the leaf is needed and does
// not parse, it returns "certificate issued by <signerName>" and the parse error.
func (i Issued) Summary(signerName string) (string, error) {
	serial, notAfter := i.Serial, i.NotAfter
	if serial == "" || notAfter.IsZero() {
		leaf, err := ParseLeaf(i.Chain)
		if err != nil {
			return "certificate issued by " + signerName, fmt.Errorf("describing the issued certificate: %w", err)
		}
		serial, notAfter = hex.EncodeToString(leaf.SerialNumber.Bytes()), leaf.NotAfter
	}
	return fmt.Sprintf("certificate issued by %s, serial %s, valid until %s",
		signerName, serial, notAfter.UTC().Format(time.RFC3339)), nil
}

// ParseLeaf parses the first CERTIFICATE block of a PEM chain.
func ParseLeaf(chain []byte) (*x509.Certificate, error) {
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
