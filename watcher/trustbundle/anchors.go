package trustbundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// MaxBundleSize is the largest spec.trustBundle the API server accepts (1 MiB).
const MaxBundleSize = 1 << 20

// errNoAnchors is Normalize's answer for input without a certificate.
var errNoAnchors = errors.New("no trust anchor")

// Normalize returns the trust anchors in pemData as spec.trustBundle wants them: every
// CERTIFICATE block once (duplicates by their DER bytes dropped), sorted by DER bytes, PEM
// without headers; and how many there are. Text between blocks is ignored. It fails, naming
// the block, on anything the API server would refuse: a block of another type or with
// headers, a certificate that does not parse, is not a CA or has no valid basic constraints;
// and on no certificate at all or a result over MaxBundleSize. Nothing is published from
// anchors that fail: the bundle keeps its previous content.
func Normalize(pemData []byte) (string, int, error) {
	var ders [][]byte
	rest := pemData
	for i := 0; ; i++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type != "CERTIFICATE":
			return "", 0, fmt.Errorf("anchor %d: a %q PEM block, want CERTIFICATE", i, block.Type)
		case len(block.Headers) != 0:
			return "", 0, fmt.Errorf("anchor %d: PEM headers are not allowed", i)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", 0, fmt.Errorf("anchor %d: parsing certificate: %w", i, err)
		}
		if !cert.BasicConstraintsValid || !cert.IsCA {
			return "", 0, fmt.Errorf("anchor %d (%s): not a CA certificate", i, cert.Subject)
		}
		ders = append(ders, block.Bytes)
	}
	if len(ders) == 0 {
		return "", 0, errNoAnchors
	}
	slices.SortFunc(ders, bytes.Compare)
	ders = slices.CompactFunc(ders, bytes.Equal)
	out := signetv1.CanonicalBundle(ders)
	if len(out) > MaxBundleSize {
		return "", 0, fmt.Errorf("%d anchors take %d bytes, more than a ClusterTrustBundle holds (%d)", len(ders), len(out), MaxBundleSize)
	}
	return out, len(ders), nil
}
