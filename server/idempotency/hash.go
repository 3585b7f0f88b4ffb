// Package idempotency makes issuance idempotent (DESIGN rule 3): a request is identified by
// its object's UID and a hash of everything that shapes the certificate, and the same key
// always gets the same certificate back, including after a restart (the Store is rebuilt from
// the ledger's issued records) and under concurrency (Do runs one issuance per UID at a time).
package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"

	"github.com/signet-pki/signet/server/issuance"
)

// requestHashDomain separates this encoding from any other hashed with SHA-256, and versions it.
const requestHashDomain = "signet.dev/request-hash/v1"

// podRequestHashDomain does the same for PodRequestHash, so a pod request never hashes like a
// CertificateSigningRequest.
const podRequestHashDomain = "signet.dev/pod-request-hash/v1"

// Key returns the idempotency key of a request: "<objectUID>/<hex request hash>".
func Key(objectUID string, requestHash []byte) string {
	return objectUID + "/" + hex.EncodeToString(requestHash)
}

// RequestHash returns the SHA-256 of the canonical encoding of the fields that shape a
// certificate: the signer name, the raw request (PKCS#10 DER or PEM as sent), the usages, the
// requested lifetime and the requester's identity (username, uid, groups, extra).
//
// The encoding is unambiguous: a domain string, then each field in the order of the parameters,
// where a string or byte field is its length (uint64, big endian) and its bytes, a list is its
// count and its elements, expirationSeconds is one byte 0 (absent) or 1 followed by the value
// (int32, big endian), and extra is its key count followed by, in sorted key order, each key
// and its list of values. Lists are hashed in the given order: Kubernetes stores spec.usages,
// spec.groups and extra values as sent and never reorders them, so the same object always
// hashes the same, and a reordered list is a different request.
func RequestHash(signerName string, request []byte, usages []string, expirationSeconds *int32,
	username, uid string, groups []string, extra map[string][]string) []byte {
	e := encoder{h: sha256.New()}
	e.str(requestHashDomain)
	e.str(signerName)
	e.bytes(request)
	e.list(usages)
	if expirationSeconds == nil {
		e.h.Write([]byte{0})
	} else {
		e.h.Write(binary.BigEndian.AppendUint32([]byte{1}, uint32(*expirationSeconds)))
	}
	e.str(username)
	e.str(uid)
	e.list(groups)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.count(len(keys))
	for _, k := range keys {
		e.str(k)
		e.list(extra[k])
	}
	return e.h.Sum(nil)
}

// PodRequestHash returns the SHA-256 of the canonical encoding of everything in a
// PodCertificateRequest that shapes or gates its certificate: the signer name; the pod
// identity (namespace, pod name and UID, service account name and UID, node name and UID);
// the stub request, the PKIX public key and the proof of possession, as sent;
// maxExpirationSeconds; and the unverified user annotations.
//
// The encoding is that of RequestHash under its own domain string: each string or byte field
// length-prefixed in the order above, maxExpirationSeconds as an int32 (big endian), then the
// annotations as their key count and, in sorted key order, each key and its value.
func PodRequestHash(req issuance.PodRequest) []byte {
	e := encoder{h: sha256.New()}
	e.str(podRequestHashDomain)
	e.str(req.SignerName)
	p := req.Pod
	for _, f := range []string{p.Namespace, p.PodName, p.PodUID, p.ServiceAccountName, p.ServiceAccountUID, p.NodeName, p.NodeUID} {
		e.str(f)
	}
	e.bytes(req.StubPKCS10Request)
	e.bytes(req.PKIXPublicKey)
	e.bytes(req.ProofOfPossession)
	e.h.Write(binary.BigEndian.AppendUint32(nil, uint32(req.MaxExpirationSeconds)))
	keys := slices.Sorted(maps.Keys(req.UnverifiedUserAnnotations))
	e.count(len(keys))
	for _, k := range keys {
		e.str(k)
		e.str(req.UnverifiedUserAnnotations[k])
	}
	return e.h.Sum(nil)
}

// encoder writes length-prefixed fields into a hash.
type encoder struct {
	h   hash.Hash
	buf [8]byte
}

func (e *encoder) count(n int) {
	binary.BigEndian.PutUint64(e.buf[:], uint64(n))
	e.h.Write(e.buf[:])
}

func (e *encoder) bytes(b []byte) {
	e.count(len(b))
	e.h.Write(b)
}

func (e *encoder) str(s string) {
	e.count(len(s))
	e.h.Write([]byte(s))
}

func (e *encoder) list(l []string) {
	e.count(len(l))
	for _, s := range l {
		e.str(s)
	}
}
