package adversarial

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/issuance"
)

// caCases: requests for a CA certificate, CA usages and extensions that must never be copied.
func caCases(c *corpus) {
	const f = "ca"
	exts := func(e ...pkix.Extension) func(*x509.CertificateRequest) {
		return func(r *x509.CertificateRequest) { r.ExtraExtensions = append(r.ExtraExtensions, e...) }
	}
	for _, b := range bases() {
		c.sign(f, b.label+"/CA:TRUE critical", clientWatcher, b.call(c, exts(basicConstraints(true, true))), policy("CA"))
	}
	legacy := baseFor(signerLegacy)
	c.sign(f, "legacy/CA:TRUE not critical", clientWatcher, legacy.call(c, exts(basicConstraints(false, true))), policy("CA"))
	c.sign(f, "legacy/CA:TRUE with a path length", clientWatcher, legacy.call(c, exts(pkix.Extension{Id: oidBasicConstr, Critical: true,
		Value: mustMarshal(struct {
			IsCA       bool
			MaxPathLen int
		}{true, 5})})), policy("CA"))
	c.sign(f, "legacy/CA:FALSE", clientWatcher, legacy.call(c, exts(basicConstraints(true, false))), issued())
	c.sign(f, "legacy/basic constraints garbage", clientWatcher,
		legacy.call(c, exts(pkix.Extension{Id: oidBasicConstr, Value: []byte{0x04, 0x01, 0x00}})), malformed("basic constraints"))
	c.sign(f, "legacy/key usage cert sign and crl sign in the CSR", clientWatcher, legacy.call(c, exts(keyUsageExtension(0, 5, 6))), issued())
	c.sign(f, "legacy/name constraints in the CSR", clientWatcher,
		legacy.call(c, exts(pkix.Extension{Id: oidNameConstr, Critical: true, Value: seq(tlv(classContextSpecific, 0, true, seq(tlv(classContextSpecific, 2, false, []byte("example.com")))))})), issued())
	c.sign(f, "legacy/private critical extension", clientWatcher,
		legacy.call(c, exts(pkix.Extension{Id: oidPrivate, Critical: true, Value: []byte{0x05, 0x00}})), issued())
	c.sign(f, "legacy/subject key identifier in the CSR", clientWatcher,
		legacy.call(c, exts(pkix.Extension{Id: []int{2, 5, 29, 14}, Value: mustMarshal([]byte("chosen-by-requester"))})), issued())
	c.sign(f, "client/authority key identifier in the CSR", clientWatcher,
		baseFor(signerClient).call(c, exts(pkix.Extension{Id: oidAuthKeyID, Value: seq(tlv(classContextSpecific, 0, false, []byte("forged-aki")))})), issued())
}

// usageCases: CA usages on every profile, unknown and oversized usages, usages outside a
// profile.
func usageCases(c *corpus) {
	const f = "usage"
	for _, b := range bases() {
		r := b.call(c, nil)
		r.Usages = append(r.Usages, "cert sign")
		c.sign(f, b.label+"/cert sign", clientWatcher, r, policy(""))
	}
	legacy, client, serving := baseFor(signerLegacy), baseFor(signerClient), baseFor(signerServing)
	with := func(b base, usages ...string) *corpusCase {
		r := b.call(c, nil)
		r.Usages = usages
		name := fmt.Sprintf("%s/%q", b.label, usages)
		if len(name) > 80 {
			name = fmt.Sprintf("%s/%d usages, longest %d bytes", b.label, len(usages), len(slices.MaxFunc(usages, func(a, b string) int { return len(a) - len(b) })))
		}
		return c.sign(f, name, clientWatcher, r, want{})
	}
	with(legacy, "digital signature", "crl sign").want = policy("crl sign")
	with(legacy, "digital signature", "root access").want = policy("root access")
	with(legacy).want = policy("usages")
	with(legacy, "digital signature", "server auth\x1b").want = policy("")
	with(legacy, "Digital Signature", "Server Auth").want = policy("")
	with(legacy, "digital signature", strings.Repeat("u", 65)).want = malformed("usages[1]")
	with(legacy, slices.Repeat([]string{"digital signature"}, 33)...).want = malformed("usages")
	with(legacy, append(slices.Repeat([]string{"digital signature"}, 31), "server auth")...).want = issued()
	with(client, "digital signature", "server auth").want = policy("client auth")
	with(client, "digital signature", "client auth", "code signing").want = policy("code signing")
	with(serving, "digital signature", "server auth", "client auth").want = policy("")
}

// lifetimeCases: expirationSeconds negative, zero, tiny, the apiserver's floor, huge and
// absent; the lifetime is NotAfter − NotBefore as kube-controller-manager computes it
// (clamped to [10m, maximum], NotBefore backdated 5 minutes, NotAfter brought in by the
// backdate from 8 hours on).
func lifetimeCases(c *corpus) {
	const f = "lifetime"
	span := func(requested time.Duration) time.Duration {
		d := min(max(requested, issuance.MinLifetime), maxLifetime)
		if d < issuance.ShortLifetime {
			d += issuance.Backdate
		}
		return d
	}
	for _, b := range []base{baseFor(signerClient), baseFor(signerLegacy)} {
		for _, secs := range []int64{-1, 0, 1, 599, 600, 3600, 28800, 86399, math.MaxInt32, math.MinInt32} {
			r := b.call(c, nil)
			v := int32(secs)
			r.ExpirationSeconds = &v
			c.sign(f, fmt.Sprintf("%s/expirationSeconds %d", b.label, secs), clientWatcher, r, issued()).lifetime = span(time.Duration(secs) * time.Second)
		}
		c.sign(f, b.label+"/expirationSeconds absent", clientWatcher, b.call(c, nil), issued()).lifetime = maxLifetime
	}
}
