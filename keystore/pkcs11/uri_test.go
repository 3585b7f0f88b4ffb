package pkcs11

import (
	"bytes"
	"strings"
	"testing"
)

// TestParseURI: the attributes of RFC 7512 URIs, percent-decoded, and each refusal naming the
// attribute at fault without echoing a value that could be a PIN.
func TestParseURI(t *testing.T) {
	const q = "?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=/etc/signet/pin"
	for _, tc := range []struct {
		name, uri string
		want      keyURI // compared on the fields set; unset strings must be absent
		err       string
	}{
		{name: "typical", uri: "pkcs11:token=signet;object=kube-ca;type=private" + q, want: keyURI{
			token: "signet", hasToken: true, object: "kube-ca", hasObject: true, hasType: true,
			modulePath: "/usr/lib/softhsm/libsofthsm2.so", pinSource: "/etc/signet/pin"}},
		{name: "percent-encoding", uri: "pkcs11:token=my%20token;object=ca%3Bone%2Ftwo%25+x" + q, want: keyURI{
			token: "my token", hasToken: true, object: "ca;one/two%+x", hasObject: true,
			modulePath: "/usr/lib/softhsm/libsofthsm2.so", pinSource: "/etc/signet/pin"}},
		{name: "id bytes", uri: "pkcs11:token=t;id=%00%01%a2%FFz" + q, want: keyURI{
			token: "t", hasToken: true, id: []byte{0, 1, 0xa2, 0xff, 'z'}, hasID: true,
			modulePath: "/usr/lib/softhsm/libsofthsm2.so", pinSource: "/etc/signet/pin"}},
		{name: "token selection", uri: "PKCS11:manufacturer=SoftHSM%20project;model=SoftHSM%20v2;serial=a1b2;slot-id=42;object=ca" + q, want: keyURI{
			manufacturer: "SoftHSM project", hasManufacturer: true, model: "SoftHSM v2", hasModel: true,
			serial: "a1b2", hasSerial: true, slotID: 42, hasSlotID: true, object: "ca", hasObject: true,
			modulePath: "/usr/lib/softhsm/libsofthsm2.so", pinSource: "/etc/signet/pin"}},
		{name: "pin-source file:/", uri: "pkcs11:token=t?module-path=/m.so&pin-source=file:/run/pin", want: keyURI{
			token: "t", hasToken: true, modulePath: "/m.so", pinSource: "/run/pin"}},
		{name: "pin-source file:///", uri: "pkcs11:token=t?module-path=/m.so&pin-source=file:///run/pin", want: keyURI{
			token: "t", hasToken: true, modulePath: "/m.so", pinSource: "/run/pin"}},
		{name: "pin-source relative", uri: "pkcs11:token=t?module-path=/m.so&pin-source=pin.txt", want: keyURI{
			token: "t", hasToken: true, modulePath: "/m.so", pinSource: "pin.txt"}},
		{name: "pin-value", uri: "pkcs11:token=t?module-path=/m.so&pin-value=12%2634", want: keyURI{
			token: "t", hasToken: true, modulePath: "/m.so", pinValue: "12&34", hasPINValue: true}},

		{name: "other scheme", uri: "file:///etc/key.pem", err: "not a pkcs11: URI"},
		{name: "no module-path", uri: "pkcs11:token=t;object=ca?pin-source=/p", err: "module-path"},
		{name: "empty module-path", uri: "pkcs11:token=t?module-path=&pin-source=/p", err: `"module-path" is empty`},
		{name: "typo", uri: "pkcs11:token=t;objet=ca" + q, err: `unknown attribute "objet"`},
		{name: "unknown query attribute", uri: "pkcs11:token=t" + q + "&pin=1234", err: `unknown attribute "pin"`},
		{name: "duplicate object", uri: "pkcs11:token=t;object=a;object=b" + q, err: `duplicate attribute "object"`},
		{name: "duplicate pin-source", uri: "pkcs11:token=t" + q + "&pin-source=/other", err: `duplicate attribute "pin-source"`},
		{name: "query attribute in the path", uri: "pkcs11:token=t;module-path=/m.so", err: `"module-path" must be a query attribute`},
		{name: "path attribute in the query", uri: "pkcs11:object=ca" + q + "&token=t", err: `"token" must be a path attribute`},
		{name: "type public", uri: "pkcs11:token=t;type=public" + q, err: `type="public"`},
		{name: "slot-id not a number", uri: "pkcs11:slot-id=one" + q, err: `"slot-id" is not a decimal number`},
		{name: "truncated escape", uri: "pkcs11:token=t;id=%0" + q, err: `attribute "id": malformed percent-encoding`},
		{name: "bad escape", uri: "pkcs11:token=t;object=%zz" + q, err: `attribute "object": malformed percent-encoding`},
		{name: "empty attribute", uri: "pkcs11:token=t;;object=ca" + q, err: "empty attribute"},
		{name: "no value", uri: "pkcs11:token;object=ca" + q, err: `attribute "token" has no value`},
		{name: "pin-source and pin-value", uri: "pkcs11:token=t" + q + "&pin-value=1234", err: "both pin-source and pin-value"},
		{name: "module-name", uri: "pkcs11:token=t?module-name=softhsm2&pin-source=/p", err: `"module-name" is not supported (use module-path=)`},
		{name: "library-version", uri: "pkcs11:library-version=2;token=t" + q, err: `"library-version" is not supported`},
		{name: "pin-source not a file", uri: "pkcs11:token=t?module-path=/m.so&pin-source=https://vault/pin", err: "only file: sources"},
		{name: "pin-source with a host", uri: "pkcs11:token=t?module-path=/m.so&pin-source=file://host/pin", err: "must not name a host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseURI(tc.uri)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseURI(%q) = %v, want an error containing %q", tc.uri, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURI(%q): %v", tc.uri, err)
			}
			w := tc.want
			if got.token != w.token || got.hasToken != w.hasToken || got.manufacturer != w.manufacturer ||
				got.hasManufacturer != w.hasManufacturer || got.model != w.model || got.hasModel != w.hasModel ||
				got.serial != w.serial || got.hasSerial != w.hasSerial || got.slotID != w.slotID ||
				got.hasSlotID != w.hasSlotID || got.object != w.object || got.hasObject != w.hasObject ||
				!bytes.Equal(got.id, w.id) || got.hasID != w.hasID || got.hasType != w.hasType ||
				got.modulePath != w.modulePath || got.pinSource != w.pinSource || got.pinValue != w.pinValue ||
				got.hasPINValue != w.hasPINValue {
				t.Errorf("parseURI(%q) =\n%+v, want\n%+v", tc.uri, *got, w)
			}
		})
	}
}

// TestParseURIErrorsHideValues: a malformed pin-value (or any value) is not echoed in the error.
func TestParseURIErrorsHideValues(t *testing.T) {
	for _, uri := range []string{
		"pkcs11:token=t?module-path=/m.so&pin-value=s3cr3t%zz",
		"pkcs11:token=t?module-path=/m.so&pin-value=s3cr3t&pin-value=s3cr3t",
		"pkcs11:token=t?module-path=/m.so&pin-source=/p&pin-value=s3cr3t",
		"pkcs11:token=t?module-path=/m.so&pin-valeu=s3cr3t",
	} {
		_, err := parseURI(uri)
		if err == nil {
			t.Errorf("parseURI(%q) succeeded", uri)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("parseURI error %q contains the value", err)
		}
	}
}

// TestCanonicalRoundTrip: canonical percent-encodes what needs it, and parses back to the
// same token, label, id and query.
func TestCanonicalRoundTrip(t *testing.T) {
	u, err := parseURI("pkcs11:serial=a1;object=x?module-path=/opt/hsm%20lib/p11.so&pin-source=file:/run/pin")
	if err != nil {
		t.Fatal(err)
	}
	label := "ca; kube/2 ?&=%é"
	id := []byte{0, 0x3b, 0xff, 'a'}
	got := u.canonical("tok en", label, id)
	const want = "pkcs11:token=tok%20en;serial=a1;object=ca%3B%20kube%2F2%20%3F%26%3D%25%C3%A9;id=%00%3B%FF%61;type=private" +
		"?module-path=/opt/hsm%20lib/p11.so&pin-source=/run/pin"
	if got != want {
		t.Errorf("canonical =\n%s, want\n%s", got, want)
	}
	back, err := parseURI(got)
	if err != nil {
		t.Fatalf("parsing the canonical URI: %v", err)
	}
	if back.token != "tok en" || back.serial != "a1" || back.object != label || !bytes.Equal(back.id, id) ||
		!back.hasType || back.modulePath != "/opt/hsm lib/p11.so" || back.pinSource != "/run/pin" || back.hasPINValue {
		t.Errorf("the canonical URI parses back as %+v", *back)
	}
}
