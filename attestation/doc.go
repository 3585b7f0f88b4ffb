// Package attestation produces (node side) and verifies (server side) TPM 2.0 evidence that
// ties a kubelet's certificate request to a measured node.
//
// It is empty for now: the walking skeleton signs without attestation.
package attestation
