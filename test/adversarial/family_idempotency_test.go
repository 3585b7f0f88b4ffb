package adversarial

import (
	"crypto/x509"
	"fmt"

	"google.golang.org/protobuf/proto"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// idempotencyCases: object UIDs shared between clients (issue 18, item 6), replays, and the
// same UID with a different request.
func idempotencyCases(c *corpus) {
	crossClient(c)
	toolFirst(c)
	conflicts(c)
	podIdempotency(c)
}

// differentFrom checks that a case issued a certificate other than the one of case other.
func differentFrom(other string) func(*result, map[string]*result) error {
	return func(got *result, prior map[string]*result) error {
		first := prior[other]
		if first == nil || got.err != nil || first.err != nil {
			return nil
		}
		if got.serial == first.serial || got.chainPEM == first.chainPEM {
			return fmt.Errorf("returned the certificate of %s (serial %s): another client's certificate", other, first.serial)
		}
		return nil
	}
}

// crossClient: the watcher and the tool send the same request with the same UID; each gets
// its own certificate and its own replays.
func crossClient(c *corpus) {
	const f, g = "idempotency", "idempotency-cross-client"
	r1 := baseFor(signerClient).call(c, nil)
	seq := func(name, client string, r *signetv1.SignCertificateSigningRequestRequest, w want) *corpusCase {
		cc := c.sign(f, name, client, r, w)
		cc.group = g
		return cc
	}
	a := seq("watcher first", clientWatcher, r1, issued())
	b := seq("tool, same UID and request", clientTool, r1, issued())
	b.check = differentFrom(a.name)
	seq("tool replays", clientTool, r1, replayOf(b.name))
	seq("watcher replays", clientWatcher, r1, replayOf(a.name))
	renamed := proto.CloneOf(r1)
	renamed.Object.Name = "another-name"
	seq("watcher replays under another object name", clientWatcher, renamed, replayOf(a.name))
	r2 := baseFor(signerClient).call(c, nil)
	r2.Object = proto.CloneOf(r1.Object)
	seq("tool, same UID, another CSR", clientTool, r2, conflict())
	seq("watcher, same UID, another CSR", clientWatcher, r2, conflict())
}

// toolFirst: a UID the tool used first does not block the watcher's real object.
func toolFirst(c *corpus) {
	const f, g = "idempotency", "idempotency-tool-first"
	custom := baseFor(signerCustom).call(c, nil)
	first := c.sign(f, "tool takes a UID first", clientTool, custom, issued())
	first.group = g
	watcher := baseFor(signerClient).call(c, nil)
	watcher.Object = proto.CloneOf(custom.Object)
	second := c.sign(f, "watcher's own object with that UID", clientWatcher, watcher, issued())
	second.group, second.check = g, differentFrom(first.name)
}

// conflicts: one UID, then each field of the request changed.
func conflicts(c *corpus) {
	const f, g = "idempotency", "idempotency-conflicts"
	legacy := baseFor(signerLegacy)
	r := legacy.call(c, nil)
	first := c.sign(f, "legacy first", clientWatcher, r, issued())
	first.group = g
	variant := func(name string, edit func(*signetv1.SignCertificateSigningRequestRequest), w want) {
		v := proto.CloneOf(r)
		edit(v)
		c.sign(f, name, clientWatcher, v, w).group = g
	}
	variant("usages changed", func(v *signetv1.SignCertificateSigningRequestRequest) { v.Usages = append(v.Usages, "client auth") }, conflict())
	variant("expirationSeconds added", func(v *signetv1.SignCertificateSigningRequestRequest) { v.ExpirationSeconds = proto.Int32(3600) }, conflict())
	variant("requester group added", func(v *signetv1.SignCertificateSigningRequestRequest) {
		v.Requester.Groups = append(v.Requester.Groups, "system:masters")
	}, conflict())
	variant("requester extra added", func(v *signetv1.SignCertificateSigningRequestRequest) { v.Requester.Extra = extra(1, 1, 8) }, conflict())
	dev := baseFor(signerDev).call(c, nil)
	dev.Object = proto.CloneOf(r.Object)
	c.sign(f, "signer changed", clientWatcher, dev, conflict()).group = g
	variant("same key, other names", func(v *signetv1.SignCertificateSigningRequestRequest) {
		v.Request = legacy.call(c, func(t *x509.CertificateRequest) { t.DNSNames = []string{"other.example.com"} }).Request
	}, conflict())
	variant("PEM with CRLF line ends", func(v *signetv1.SignCertificateSigningRequestRequest) { v.Request = crlf(v.Request) }, conflict())
	variant("replay after the conflicts", func(*signetv1.SignCertificateSigningRequestRequest) {}, replayOf(first.name))

	refusedFirst := legacy.call(c, func(t *x509.CertificateRequest) { t.DNSNames = []string{"bad_name.example.com"} })
	c.sign(f, "refused first", clientWatcher, refusedFirst, policy("")).group = g + "-refused"
	valid := legacy.call(c, nil)
	valid.Object = proto.CloneOf(refusedFirst.Object)
	c.sign(f, "then valid with the refused UID", clientWatcher, valid, issued()).group = g + "-refused"
}

// crlf rewrites the PEM's line ends: the same request, other bytes.
func crlf(pemBytes []byte) []byte {
	var out []byte
	for _, b := range pemBytes {
		if b == '\n' {
			out = append(out, '\r')
		}
		out = append(out, b)
	}
	return out
}

// podIdempotency: a PodCertificateRequest replayed within its window, and its UID reused.
func podIdempotency(c *corpus) {
	const f, g = "idempotency", "idempotency-pod"
	r := c.podCall(nil)
	first := c.add(f, "pod first", clientWatcher, request{pod: r}, issued())
	first.group = g
	c.add(f, "pod replay", clientWatcher, request{pod: r}, replayOf(first.name)).group = g
	other := c.podCall(nil)
	other.Object = proto.CloneOf(r.Object)
	c.add(f, "pod, same UID, another key", clientWatcher, request{pod: other}, conflict()).group = g
	c.add(f, "pod, tool with the UID", clientTool, request{pod: r}, notAllowed()).group = g
}
