// Package attestation produces (node side) and verifies (server side) TPM 2.0 evidence that
// ties a kubelet's certificate request to a measured node.
//
// It starts empty: the walking skeleton signs without attestation. TODO(#2) is closed when the
// attestation issue lands the Verify(evidence, opts) entry point here.
package attestation
