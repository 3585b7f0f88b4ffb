package adversarial

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// tlsRefusedClients fail the handshake: their calls never reach a handler.
var tlsRefusedClients = []string{clientStranger, clientForeign, clientExpired, clientWrongEKU, clientNoCert}

// identityCases: unauthorized clients, unknown and odd signer names, clients the TLS handshake
// refuses, and caller-supplied strings over their limits.
func identityCases(c *corpus) {
	authorization(c)
	signerNames(c)
	fieldLimits(c)
	requesterLimits(c)
}

// authorization: who may use which signer.
func authorization(c *corpus) {
	const f = "identity-authz"
	client, custom := baseFor(signerClient), baseFor(signerCustom)
	c.sign(f, "tool/allowed kube-apiserver-client", clientTool, client.call(c, nil), issued())
	c.sign(f, "tool/allowed custom", clientTool, custom.call(c, nil), issued())
	for _, b := range bases() {
		if !slices.Contains(toolSigners, b.signer) {
			c.sign(f, "tool/not allowed "+b.label, clientTool, b.call(c, nil), notAllowed())
		}
		c.sign(f, "nobody/"+b.label, clientNobody, b.call(c, nil), notAllowed())
	}
	for _, name := range tlsRefusedClients {
		c.sign(f, "TLS refuses "+name, name, client.call(c, nil), transport(codes.Unavailable, ""))
	}
	unknown := client.call(c, nil)
	unknown.SignerName = "example.com/not-served"
	c.sign(f, "nobody/unknown signer", clientNobody, unknown, unknownSigner())
}

// signerNames: names that are not served, empty or too long.
func signerNames(c *corpus) {
	const f = "identity-signer"
	client := baseFor(signerClient)
	named := func(name string) *signetv1.SignCertificateSigningRequestRequest {
		r := client.call(c, nil)
		r.SignerName = name
		return r
	}
	c.sign(f, "not served", clientWatcher, named("example.com/not-served"), unknownSigner())
	c.sign(f, "trailing space", clientWatcher, named(signerClient+" "), unknownSigner())
	c.sign(f, "upper case", clientWatcher, named(strings.ToUpper(signerClient)), unknownSigner())
	c.sign(f, "ESC sequence", clientWatcher, named(signerClient+"\x1b[2K"), malformed("signer_name holds the control character U+001B"))
	c.sign(f, "NUL", clientWatcher, named(signerClient+"\x00"), malformed("signer_name holds the control character U+0000"))
	c.sign(f, "wildcard", clientWatcher, named("kubernetes.io/*"), unknownSigner())
	c.sign(f, "empty", clientWatcher, named(""), malformed("signer_name"))
	c.sign(f, "571 bytes", clientWatcher, named("example.com/"+strings.Repeat("s", 571-12)), unknownSigner())
	c.sign(f, "572 bytes", clientWatcher, named("example.com/"+strings.Repeat("s", 572-12)), malformed("signer_name"))
	c.sign(f, "170 KiB", clientTool, named("example.com/"+strings.Repeat("\x1b", 170<<10)), malformed("signer_name"))
}

// fieldLimits: the object UID (the idempotency key) and name.
func fieldLimits(c *corpus) {
	const f = "identity-object"
	legacy := baseFor(signerLegacy)
	uid := func(u string) *signetv1.SignCertificateSigningRequestRequest {
		r := legacy.call(c, nil)
		r.Object.Uid = u
		return r
	}
	c.sign(f, "uid empty", clientWatcher, uid(""), malformed("object.uid"))
	c.sign(f, "uid of 128 bytes", clientWatcher, uid("adv-max-"+strings.Repeat("u", 120)), issued())
	c.sign(f, "uid of 129 bytes", clientWatcher, uid(strings.Repeat("u", 129)), malformed("object.uid"))
	c.sign(f, "uid with a space", clientWatcher, uid("adv space"), malformed("object.uid"))
	c.sign(f, "uid with ESC", clientWatcher, uid("adv\x1b[31m"), malformed("object.uid"))
	c.sign(f, "uid with NUL", clientWatcher, uid("adv\x00"), malformed("object.uid"))
	c.sign(f, "uid not ASCII", clientWatcher, uid("adv-é"), malformed("object.uid"))
	c.sign(f, "uid of 170 KiB", clientTool, uid(strings.Repeat("U", 170<<10)), malformed("object.uid"))
	name := func(n string) *signetv1.SignCertificateSigningRequestRequest {
		r := legacy.call(c, nil)
		r.Object.Name = n
		return r
	}
	c.sign(f, "name of 253 bytes", clientWatcher, name(strings.Repeat("n", 253)), issued())
	c.sign(f, "name of 254 bytes", clientWatcher, name(strings.Repeat("n", 254)), malformed("object.name"))
}

// requesterLimits: the requester's username, UID, groups and extra.
func requesterLimits(c *corpus) {
	const f = "identity-requester"
	legacy := baseFor(signerLegacy)
	who := func(edit func(*signetv1.Requester)) *signetv1.SignCertificateSigningRequestRequest {
		r := legacy.call(c, nil)
		edit(r.Requester)
		return r
	}
	c.sign(f, "username of 1024 bytes", clientWatcher, who(func(r *signetv1.Requester) { r.Username = strings.Repeat("u", 1024) }), issued())
	c.sign(f, "username of 1025 bytes", clientWatcher, who(func(r *signetv1.Requester) { r.Username = strings.Repeat("u", 1025) }), malformed("requester.username"))
	c.sign(f, "username of 170 KiB", clientTool, who(func(r *signetv1.Requester) { r.Username = strings.Repeat("\x1b", 170<<10) }), malformed("requester.username"))
	c.sign(f, "username with ESC", clientWatcher, who(func(r *signetv1.Requester) { r.Username = "mallory\x1b[2K\x1b[1Gadmin" }),
		malformed("requester.username holds the control character U+001B"))
	c.sign(f, "uid of 1025 bytes", clientWatcher, who(func(r *signetv1.Requester) { r.Uid = strings.Repeat("u", 1025) }), malformed("requester.uid"))
	c.sign(f, "1024 groups", clientWatcher, who(func(r *signetv1.Requester) { r.Groups = numbered("g%d", 1024) }), issued())
	c.sign(f, "1025 groups", clientWatcher, who(func(r *signetv1.Requester) { r.Groups = numbered("g%d", 1025) }), malformed("requester.groups"))
	c.sign(f, "group of 1025 bytes", clientWatcher, who(func(r *signetv1.Requester) { r.Groups = []string{strings.Repeat("g", 1025)} }), malformed("requester.groups[0]"))
	c.sign(f, "groups of 70 KB together", clientWatcher, who(func(r *signetv1.Requester) {
		r.Groups = numbered(strings.Repeat("g", 990)+"%04d", 70)
	}), malformed("requester.groups"))
	c.sign(f, "64 extra keys", clientWatcher, who(func(r *signetv1.Requester) { r.Extra = extra(64, 1, 8) }), issued())
	c.sign(f, "65 extra keys", clientWatcher, who(func(r *signetv1.Requester) { r.Extra = extra(65, 1, 8) }), malformed("requester.extra"))
	c.sign(f, "extra values of 100 KB", clientWatcher, who(func(r *signetv1.Requester) { r.Extra = extra(2, 50, 1000) }), malformed("requester.groups and requester.extra"))
}

// numbered returns n strings formatted from i = 0..n-1.
func numbered(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

// extra returns keys keys with values values each of size bytes.
func extra(keys, values, size int) map[string]*signetv1.ExtraValue {
	out := make(map[string]*signetv1.ExtraValue, keys)
	for k := range keys {
		out[fmt.Sprintf("example.com/k%d", k)] = &signetv1.ExtraValue{Values: numbered(strings.Repeat("v", size-5)+"%05d", values)}
	}
	return out
}
