package adversarial

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// sanCases: every kind of SAN, malformed, misplaced wildcards, over-long names and labels, and
// counts from the limit to tens of thousands.
func sanCases(c *corpus) {
	dnsControlCharacters(c)
	malformedDNS(c)
	ipSANs(c)
	uriSANs(c)
	emailSANs(c)
	sanCounts(c)
}

// dns replaces the request's DNS names.
func dns(names ...string) func(*x509.CertificateRequest) {
	return func(t *x509.CertificateRequest) { t.DNSNames = names }
}

// withRawSANs adds a SubjectAltName extension built by hand (and drops Go's SAN fields).
func withRawSANs(names ...generalName) func(*x509.CertificateRequest) {
	return func(t *x509.CertificateRequest) {
		t.DNSNames, t.IPAddresses, t.EmailAddresses, t.URIs = nil, nil, nil, nil
		t.ExtraExtensions = append(t.ExtraExtensions, sanExtension(names...))
	}
}

// dnsControlCharacters: a control character in a DNS SAN, on every profile that takes DNS
// names (issue 18, item 4: ESC, DEL and TAB were issued).
func dnsControlCharacters(c *corpus) {
	for _, b := range without(signerKubelet) {
		for _, r := range asciiControls {
			req := b.call(c, dns("x"+string(r)+"y.example.com"))
			c.sign("san-dns-control", fmt.Sprintf("%s/U+%04X", b.label, r), clientWatcher, req, policy(""))
		}
		c.sign("san-dns-control", b.label+"/ANSI red", clientWatcher, b.call(c, dns("\x1b[31mred.example.com")), policy(""))
	}
}

// malformedDNS: names that are not host names, on a profile that reproduces Kubernetes and on
// a custom one.
func malformedDNS(c *corpus) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 57) + ".com"
	name254 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 58) + ".com"
	for _, tt := range []struct {
		name         string
		dns          string
		legacy, cust want
	}{
		{"empty", "", policy(""), policy("")},
		{"empty label", "a..example.com", policy(""), policy("")},
		{"leading dot", ".a.example.com", policy(""), policy("")},
		{"trailing dot", "a.example.com.", policy(""), policy("")},
		{"leading hyphen", "-a.example.com", policy(""), policy("")},
		{"trailing hyphen", "a-.example.com", policy(""), policy("")},
		{"underscore", "a_b.example.com", policy(""), policy("")},
		{"space", "a b.example.com", policy(""), policy("")},
		{"label of 64", strings.Repeat("a", 64) + ".example.com", policy(""), policy("")},
		{"label of 63", label63 + ".example.com", issued(), issued()},
		{"name of 253", name253, issued(), policy("")},
		{"name of 254", name254, policy(""), policy("")},
		{"wildcard leftmost", "*.example.com", issued(), policy("")},
		{"wildcard inner", "a.*.example.com", policy(""), policy("")},
		{"wildcard alone", "*", policy(""), policy("")},
		{"double wildcard", "**.example.com", policy(""), policy("")},
		{"partial wildcard", "w*.example.com", policy(""), policy("")},
		{"upper case", "WEB.EXAMPLE.COM", issued(), issued()},
		{"percent", "a%41.example.com", policy(""), policy("")},
		{"slash", "a/b.example.com", policy(""), policy("")},
		{"at sign", "a@b.example.com", policy(""), policy("")},
	} {
		legacy, custom := baseFor(signerLegacy), baseFor(signerCustom)
		c.sign("san-dns-malformed", "legacy/"+tt.name, clientWatcher, legacy.call(c, dns(tt.dns)), tt.legacy)
		c.sign("san-dns-malformed", "custom/"+tt.name, clientWatcher, custom.call(c, dns(tt.dns)), tt.cust)
	}
	legacy := baseFor(signerLegacy)
	c.sign("san-dns-malformed", "legacy/invalid punycode", clientWatcher, legacy.call(c, dns("xn--zz.example.com")), policy("punycode"))
	c.sign("san-dns-malformed", "legacy/punycode of a C1 control", clientWatcher, legacy.call(c, dns("xn--a.example.com")), policy(""))
	c.sign("san-dns-malformed", "legacy/raw UTF-8", clientWatcher,
		legacy.call(c, withRawSANs(dnsGN("caf\xc3\xa9.example.com"))), malformed(""))
	c.sign("san-dns-malformed", "legacy/raw C1 control", clientWatcher,
		legacy.call(c, withRawSANs(dnsGN("a\xc2\x9bb.example.com"))), malformed(""))
	kubelet := baseFor(signerKubelet)
	c.sign("san-dns-malformed", "kubelet-client/any DNS name", clientWatcher, kubelet.call(c, dns("n1.example.com")), policy("sans"))
}

// ipSANs: addresses in and out of range, and encodings that are not addresses.
func ipSANs(c *corpus) {
	const f = "san-ip"
	legacy, custom, kubelet := baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerKubelet)
	ips := func(list ...string) func(*x509.CertificateRequest) {
		return func(t *x509.CertificateRequest) {
			for _, s := range list {
				t.IPAddresses = append(t.IPAddresses, net.ParseIP(s))
			}
		}
	}
	c.sign(f, "legacy/IPv4", clientWatcher, legacy.call(c, ips("10.1.2.3")), issued())
	c.sign(f, "legacy/IPv6", clientWatcher, legacy.call(c, ips("fd00::1")), issued())
	c.sign(f, "custom/in range", clientWatcher, custom.call(c, ips("10.1.2.3")), issued())
	c.sign(f, "custom/out of range", clientWatcher, custom.call(c, ips("192.168.1.1")), policy("192.168.1.1"))
	c.sign(f, "custom/IPv4-mapped IPv6 in range", clientWatcher,
		custom.call(c, withRawSANs(dnsGN("web.example.com"), ipGN(net.ParseIP("::ffff:10.1.2.3")))), issued())
	c.sign(f, "custom/IPv6 out of range", clientWatcher, custom.call(c, ips("::1")), policy(""))
	c.sign(f, "legacy/5-byte address", clientWatcher, legacy.call(c, withRawSANs(ipGN([]byte{10, 0, 0, 1, 9}))), malformed(""))
	c.sign(f, "legacy/empty address", clientWatcher, legacy.call(c, withRawSANs(ipGN(nil))), malformed(""))
	c.sign(f, "kubelet-client/IP", clientWatcher, kubelet.call(c, ips("10.0.0.1")), policy("sans"))
}

// uriSANs: URIs without scheme or body, with control characters, and outside a pattern.
func uriSANs(c *corpus) {
	const f = "san-uri"
	legacy, custom, serving := baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerServing)
	uris := func(list ...string) func(*x509.CertificateRequest) {
		return func(t *x509.CertificateRequest) {
			for _, s := range list {
				u, err := url.Parse(s)
				if err != nil {
					panic(err)
				}
				t.URIs = append(t.URIs, u)
			}
		}
	}
	c.sign(f, "legacy/spiffe", clientWatcher, legacy.call(c, uris("spiffe://cluster.local/ns/a/sa/b")), issued())
	c.sign(f, "legacy/relative reference", clientWatcher, legacy.call(c, uris("foo/bar")), policy("scheme"))
	c.sign(f, "legacy/scheme only", clientWatcher, legacy.call(c, uris("mailto:")), policy(""))
	c.sign(f, "legacy/raw ESC", clientWatcher, legacy.call(c, withRawSANs(uriGN("spiffe://cluster.local/ns/a\x1b/sa/b"))), malformed(""))
	c.sign(f, "legacy/raw DEL", clientWatcher, legacy.call(c, withRawSANs(uriGN("https://a.example.com/\x7f"))), malformed(""))
	c.sign(f, "legacy/raw space in host", clientWatcher, legacy.call(c, withRawSANs(uriGN("https://a b.example.com/"))), malformed(""))
	c.sign(f, "custom/matching", clientWatcher, custom.call(c, uris("spiffe://cluster.local/ns/a/sa/b")), issued())
	c.sign(f, "custom/query", clientWatcher, custom.call(c, uris("spiffe://cluster.local/ns/a/sa/b?admin=1")), policy("query"))
	c.sign(f, "custom/dot segment", clientWatcher, custom.call(c, uris("spiffe://cluster.local/ns/../sa/b")), policy(""))
	c.sign(f, "custom/user information", clientWatcher, custom.call(c, uris("spiffe://root@cluster.local/ns/a/sa/b")), policy(""))
	c.sign(f, "custom/other trust domain", clientWatcher, custom.call(c, uris("spiffe://evil/ns/a/sa/b")), policy(""))
	c.sign(f, "kubelet-serving/URI", clientWatcher, serving.call(c, uris("spiffe://cluster.local/ns/a/sa/b")), policy(""))
}

// emailSANs: addresses with spaces, display names and control characters.
func emailSANs(c *corpus) {
	const f = "san-email"
	legacy, custom, dev, client, serving := baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerDev), baseFor(signerClient), baseFor(signerServing)
	email := func(list ...string) func(*x509.CertificateRequest) {
		return func(t *x509.CertificateRequest) { t.EmailAddresses = list }
	}
	c.sign(f, "legacy/plain", clientWatcher, legacy.call(c, email("ops@example.com")), issued())
	c.sign(f, "legacy/space", clientWatcher, legacy.call(c, email("a b@example.com")), policy(""))
	c.sign(f, "legacy/display name", clientWatcher, legacy.call(c, email("<ops@example.com>")), policy(""))
	c.sign(f, "legacy/ESC", clientWatcher, legacy.call(c, email("op\x1bs@example.com")), policy(""))
	c.sign(f, "client/NUL", clientWatcher, client.call(c, email("ops\x00@example.com")), policy(""))
	c.sign(f, "custom/other domain", clientWatcher, custom.call(c, email("ops@evil.net")), policy(""))
	c.sign(f, "custom/ESC", clientWatcher, custom.call(c, email("op\x1bs@example.com")), policy(""))
	c.sign(f, "dev/TAB", clientWatcher, dev.call(c, email("op\ts@example.com")), policy(""))
	c.sign(f, "kubelet-serving/email", clientWatcher, serving.call(c, email("ops@example.com")), policy(""))
}

// sanCounts: the SAN limit (256 of all kinds together), a CSR over Signet's size limit, one
// over the size a ledger line may hold if quoted whole, and tens of thousands of names.
func sanCounts(c *corpus) {
	const f = "san-count"
	legacy, custom, kubelet := baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerKubelet)
	names := func(n int, format string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(format, i)
		}
		return out
	}
	c.sign(f, "legacy/256 DNS names", clientWatcher, legacy.call(c, dns(names(256, "n%d.example.com")...)), issued())
	c.sign(f, "legacy/257 DNS names", clientWatcher, legacy.call(c, dns(names(257, "n%d.example.com")...)), malformed("256"))
	c.sign(f, "custom/257 SANs of four kinds", clientWatcher, custom.call(c, func(t *x509.CertificateRequest) {
		t.DNSNames = names(100, "n%d.example.com")
		for i := range 100 {
			t.IPAddresses = append(t.IPAddresses, net.IPv4(10, 0, byte(i/250), byte(i%250+1)))
		}
		t.EmailAddresses = names(50, "u%d@example.com")
		for _, s := range names(7, "spiffe://cluster.local/ns/n%d/sa/s") {
			u, _ := url.Parse(s)
			t.URIs = append(t.URIs, u)
		}
	}), malformed("256"))
	c.sign(f, "legacy/20000 DNS names", clientWatcher, legacy.call(c, dns(names(20000, "n%d.example.com")...)), malformed("request"))
	c.sign(f, "legacy/~300 KiB request", clientWatcher, legacy.call(c, dns(names(9500, "name-%08d.example.com")...)), malformed("request"))
	long := strings.Repeat(strings.Repeat("a", 63)+".", 3) + "%03d.example.com"
	c.sign(f, "kubelet-client/200 names of 207 bytes (a refusal quoting 41 KB)", clientWatcher,
		kubelet.call(c, dns(names(200, long)...)), policy("sans"))
}
