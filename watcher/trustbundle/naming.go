// Package trustbundle publishes each served signer's trust anchors as a signer-linked
// ClusterTrustBundle, so that pods can trust what the signer issues through a
// clusterTrustBundle projected volume (signerName plus a label selector).
//
// Every period the Publisher asks the signing server for each signer's anchors
// (GetTrustAnchors), normalizes them (each certificate once, sorted, PEM) and makes the
// bundle named Name(signer) hold exactly them: it creates a missing bundle, rewrites one whose
// trustBundle or labels drifted, and writes nothing when the bundle is already right. It never
// touches a bundle without its ManagedByLabel, and never any other name: another signer's
// bundle, an unlinked bundle, or a bundle of the same name created by someone else (that one is
// reported, not overwritten). After each successful pass for a signer it reports the bundle
// as it stands in the cluster to the signing server (ReportTrustBundle: the hash of its
// trustBundle and the fingerprint of each anchor, under the cluster's name; see Digest), the
// proof of propagation the server waits for before it activates a staged CA. Only the leader
// runs it.
package trustbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Suffix ends the name of every bundle the publisher writes: the API server requires a
// signer-linked bundle's name to be the signer name with "/" replaced by ":", then ":", then
// a DNS subdomain. A constant keeps the name stable across restarts, replicas and versions.
const Suffix = "signet"

// Labels on every bundle the publisher writes. ManagedByLabel with value ManagedBy marks a
// bundle as the publisher's (it changes no other); SignerLabel carries the signer name in a
// form a label value allows (SignerLabelValue), for selecting one signer's bundles across
// API versions and tools.
const (
	ManagedByLabel = "signet.dev/managed-by"
	ManagedBy      = "signet-watcher"
	SignerLabel    = "signet.dev/signer"
)

// Name returns the name of signerName's bundle: "example.com/serving" →
// "example.com:serving:signet". For a valid signer name (domain/path) the API server accepts
// it: the prefix is the one it requires and Suffix is a DNS subdomain.
func Name(signerName string) string {
	return strings.ReplaceAll(signerName, "/", ":") + ":" + Suffix
}

// labelValueMax is the longest label value the API server accepts.
const labelValueMax = 63

// SignerLabelValue returns signerName as a label value: "/" replaced by "_"
// ("example.com/serving" → "example.com_serving"). A valid signer name then holds only
// characters a label value allows and begins and ends with one a label value may begin and
// end with. One longer than 63 characters keeps its first 52 and ends with "_" and the first
// 10 hexadecimal digits of the SHA-256 of the whole signer name, so that it stays distinct.
func SignerLabelValue(signerName string) string {
	v := strings.ReplaceAll(signerName, "/", "_")
	if len(v) <= labelValueMax {
		return v
	}
	sum := sha256.Sum256([]byte(signerName))
	const hashLen = 10
	return v[:labelValueMax-hashLen-1] + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// Labels returns the labels of signerName's bundle.
func Labels(signerName string) map[string]string {
	return map[string]string{ManagedByLabel: ManagedBy, SignerLabel: SignerLabelValue(signerName)}
}
