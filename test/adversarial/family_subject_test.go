package adversarial

import (
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
)

// asciiControls are the C0 controls and DEL the corpus puts into names; c1Controls are C1
// controls (NEL, CSI), which only UTF-8 attributes can carry.
var (
	asciiControls = []rune{0x00, 0x07, 0x08, 0x09, 0x0a, 0x0d, 0x1b, 0x7f}
	c1Controls    = []rune{0x85, 0x9b}
)

// insertInFirstLabel puts r just before the last character of s's first dot-separated label,
// so that the name keeps its shape (prefix, domain) and only the character is wrong.
func insertInFirstLabel(s string, r rune) string {
	end := strings.IndexByte(s, '.')
	if end < 0 {
		end = len(s)
	}
	return s[:end-1] + string(r) + s[end-1:]
}

// baselineCases: every signer issues its base request, so every refusal below is caused by
// what the case changes.
func baselineCases(c *corpus) {
	for _, b := range bases() {
		c.sign("baseline", b.label, clientWatcher, b.call(c, nil), issued())
	}
}

// subjectCases: privileged groups, node identities, control characters, duplicate and
// multi-valued attributes and odd string encodings.
func subjectCases(c *corpus) {
	controlCharacterSubjects(c)
	privilegedSubjects(c)
	duplicateSubjects(c)
	encodedSubjects(c)
}

// controlCharacterSubjects: a control character in the common name, on every CSR profile.
func controlCharacterSubjects(c *corpus) {
	for _, b := range bases() {
		for _, r := range append(append([]rune{}, asciiControls...), c1Controls...) {
			req := b.call(c, func(t *x509.CertificateRequest) { t.Subject.CommonName = insertInFirstLabel(b.cn, r) })
			req.Requester = b.requester(b.cn) // only the name is wrong
			c.sign("subject-control", fmt.Sprintf("%s/CN U+%04X", b.label, r), clientWatcher, req, policy(""))
		}
	}
	client, dev := baseFor(signerClient), baseFor(signerDev)
	c.sign("subject-control", "client/O with ESC", clientWatcher,
		client.call(c, func(t *x509.CertificateRequest) { t.Subject.Organization = []string{"dev\x1b[31m"} }), policy(""))
	c.sign("subject-control", "dev/OU with ESC", clientWatcher,
		dev.call(c, func(t *x509.CertificateRequest) { t.Subject.OrganizationalUnit = []string{"ops\x1b[2J"} }), policy(""))
	c.sign("subject-control", "dev/L with NUL", clientWatcher,
		dev.call(c, func(t *x509.CertificateRequest) { t.Subject.Locality = []string{"Paris\x00evil"} }), policy(""))
}

// privilegedSubjects: system:masters, node identities and forged requesters.
func privilegedSubjects(c *corpus) {
	const f = "subject-privileged"
	client, kubelet, serving := baseFor(signerClient), baseFor(signerKubelet), baseFor(signerServing)
	legacy, custom, dev := baseFor(signerLegacy), baseFor(signerCustom), baseFor(signerDev)
	orgs := func(o ...string) func(*x509.CertificateRequest) {
		return func(t *x509.CertificateRequest) { t.Subject.Organization = o }
	}
	c.sign(f, "client/O=system:masters", clientWatcher, client.call(c, orgs("system:masters")), policy("system:masters"))
	c.sign(f, "client/O=dev,system:masters", clientTool, client.call(c, orgs("dev", "system:masters")), policy("system:masters"))
	c.sign(f, "client/CN=system:node:n1", clientWatcher,
		client.call(c, func(t *x509.CertificateRequest) { t.Subject.CommonName = "system:node:n1" }), policy("system:node"))
	c.sign(f, "client/O=system:nodes", clientTool, client.call(c, orgs("system:nodes")), policy("system:nodes"))
	c.sign(f, "client/node CN and O", clientWatcher, client.call(c, func(t *x509.CertificateRequest) {
		t.Subject.CommonName, t.Subject.Organization = "system:node:n1", []string{"system:nodes"}
	}), policy("system:node"))
	c.sign(f, "client/OU=system:masters (not a group)", clientWatcher,
		client.call(c, func(t *x509.CertificateRequest) { t.Subject.OrganizationalUnit = []string{"system:masters"} }), issued())

	masters := func(b base, usages ...string) {
		r := b.call(c, orgs("system:masters"))
		r.Usages = usages
		want := policy("system:masters")
		if len(usages) == 2 && usages[1] == "server auth" {
			want = issued() // cannot authenticate a client
		}
		c.sign(f, fmt.Sprintf("%s/O=system:masters usages %q", b.label, usages), clientWatcher, r, want)
	}
	masters(legacy, "digital signature", "client auth")
	masters(legacy, "digital signature", "server auth")
	masters(legacy, "digital signature", "any")
	masters(legacy, "digital signature")
	masters(dev, "digital signature", "client auth")
	c.sign(f, "custom/O=system:masters", clientWatcher, custom.call(c, orgs("system:masters")), policy(""))
	c.sign(f, "kubelet-client/O=system:nodes,system:masters", clientWatcher,
		kubelet.call(c, orgs("system:nodes", "system:masters")), policy("system:nodes"))

	other := kubelet.call(c, func(t *x509.CertificateRequest) { t.Subject.CommonName = "system:node:n2" })
	other.Requester.Username = "system:node:n1"
	c.sign(f, "kubelet-client/another node's CN", clientWatcher, other, policy("requester"))
	boot := kubelet.call(c, nil)
	boot.Requester.Username, boot.Requester.Groups = "system:bootstrap:abcdef", []string{"system:bootstrappers", "system:authenticated"}
	c.sign(f, "kubelet-client/bootstrap token requester", clientWatcher, boot, issued())
	admin := kubelet.call(c, nil)
	admin.Requester.Username, admin.Requester.Groups = "admin", []string{"system:masters", "system:authenticated"}
	c.sign(f, "kubelet-client/admin requester for a node", clientWatcher, admin, policy("requester"))
	servingOther := serving.call(c, nil)
	servingOther.Requester.Username = "system:node:n2"
	c.sign(f, "kubelet-serving/another node's requester", clientWatcher, servingOther, policy("username"))
	servingNoGroup := serving.call(c, nil)
	servingNoGroup.Requester.Groups = []string{"system:authenticated"}
	c.sign(f, "kubelet-serving/requester not in system:nodes", clientWatcher, servingNoGroup, policy("system:nodes"))
}

// duplicateSubjects: repeated and multi-valued attributes.
func duplicateSubjects(c *corpus) {
	const f = "subject-duplicate"
	client, custom := baseFor(signerClient), baseFor(signerCustom)
	cn := cnAttr
	c.sign(f, "client/CN node then alice", clientWatcher,
		client.callRawSubject(c, rawName(rdn(cn("system:node:n1"), cn("alice"))...), "alice"), issued()).check = lastCN("alice")
	c.sign(f, "client/CN alice then node", clientWatcher,
		client.callRawSubject(c, rawName(rdn(cn("alice"), cn("system:node:n1"))...), "alice"), policy("system:node"))
	c.sign(f, "client/multi-valued CN+O", clientWatcher,
		client.callRawSubject(c, rawName([]attr{cn("alice"), orgAttr("dev")}), "alice"), issued())
	c.sign(f, "client/multi-valued CN+O=system:masters", clientWatcher,
		client.callRawSubject(c, rawName([]attr{cn("alice"), orgAttr("system:masters")}), "alice"), policy("system:masters"))
	c.sign(f, "client/multi-valued O=dev+O=system:nodes", clientTool,
		client.callRawSubject(c, rawName(rdn(cn("alice"))[0], []attr{orgAttr("dev"), orgAttr("system:nodes")}), "alice"), policy("system:nodes"))
	c.sign(f, "client/O repeated", clientWatcher,
		client.callRawSubject(c, rawName(rdn(cn("alice"), orgAttr("dev"), orgAttr("dev"))...), "alice"), issued())
	c.sign(f, "custom/CN outside the pattern hidden first", clientWatcher,
		custom.callRawSubject(c, rawName(rdn(cn("evil.attacker.net"), cn("web.example.com"), orgAttr("Example"))...), "mallory"),
		issued()).check = lastCN("web.example.com")
	long := strings.Repeat("a", 120) + ".example.com"
	c.sign(f, "custom/CN of 132 characters", clientWatcher,
		custom.call(c, func(t *x509.CertificateRequest) { t.Subject.CommonName = long }), refused(codes.FailedPrecondition, reasonLint, "common_name"))
	c.sign(f, "client/CN of 300 characters (accepted finding)", clientWatcher,
		client.call(c, func(t *x509.CertificateRequest) { t.Subject.CommonName = strings.Repeat("u", 300) }), issued())
}

// encodedSubjects: the common name in string types Go writes rarely or never, and in types
// that are not strings at all (which crypto/x509 leaves undecoded: such an attribute must be
// refused, not silently left out of the certificate).
func encodedSubjects(c *corpus) {
	const f = "subject-encoding"
	client, dev := baseFor(signerClient), baseFor(signerDev)
	typed := func(tag int, value []byte) []byte {
		return rawName(rdn(attr{oid: oidCommonName, tag: tag, value: value}, orgAttr("dev"))...)
	}
	for _, tt := range []struct {
		name  string
		tag   int
		value []byte
		want  want
		cn    string // the common name the certificate must carry, when issued
	}{
		{"BMPString", tagBMPString, bmp("alice"), issued(), "alice"},
		{"BMPString odd length", tagBMPString, append(bmp("alice"), 0), malformed(""), ""},
		{"BMPString with ESC", tagBMPString, bmp("ali\x1bce"), policy(""), ""},
		{"T61String", asn1.TagT61String, []byte("alice"), issued(), "alice"},
		{"T61String with ESC", asn1.TagT61String, []byte("ali\x1bce"), policy(""), ""},
		{"T61String Latin-1 byte", asn1.TagT61String, []byte("alic\xe9"), issued(), "alic\u00e9"},
		{"IA5String", asn1.TagIA5String, []byte("alice"), issued(), "alice"},
		{"NumericString", asn1.TagNumericString, []byte("12345"), issued(), "12345"},
		{"UniversalString", tagUniversalString, []byte{0, 0, 0, 'a'}, malformed(""), ""},
		{"UTF8String invalid UTF-8", asn1.TagUTF8String, []byte("ali\xffce"), malformed(""), ""},
		{"PrintableString with NUL", asn1.TagPrintableString, []byte("ali\x00ce"), malformed(""), ""},
		{"OCTET STRING", asn1.TagOctetString, []byte("system:node:n1"), malformed(""), ""},
		{"INTEGER", asn1.TagInteger, []byte{1}, malformed(""), ""},
	} {
		cc := c.sign(f, "client/"+tt.name, clientWatcher, client.callRawSubject(c, typed(tt.tag, tt.value), "alice"), tt.want)
		if tt.cn != "" {
			cc.check = lastCN(tt.cn)
		}
	}
	latin1 := rawName(rdn(attr{oid: oidCommonName, tag: asn1.TagT61String, value: []byte("d\xe9v")})...)
	c.sign(f, "dev/T61String Latin-1 byte", clientWatcher, dev.callRawSubject(c, latin1, "dev"), issued()).check = lastCN("d\u00e9v")
	ou := rawName(rdn(cnAttr("dev"), attr{oid: oidOrgUnit, tag: tagBMPString, value: bmp("ops\u009b2J")})...)
	c.sign(f, "dev/OU BMPString with CSI", clientWatcher, dev.callRawSubject(c, ou, "dev"), policy(""))
}

// lastCN checks that the certificate carries exactly one common name, want.
func lastCN(want string) func(*result, map[string]*result) error {
	return func(got *result, _ map[string]*result) error {
		leaf := leafOf(got)
		if leaf == nil {
			return nil
		}
		n := 0
		for _, atv := range leaf.Subject.Names {
			if atv.Type.Equal(oidCommonName) {
				n++
			}
		}
		if n != 1 || leaf.Subject.CommonName != want {
			return fmt.Errorf("issued subject %q, want exactly one common name %q", leaf.Subject, want)
		}
		return nil
	}
}
