package main

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/testpki"
)

// testChain is a leaf (server auth, DNS and IP SANs), its intermediate and the root.
func testChain(t *testing.T) (leaf *x509.Certificate, sub, root *testpki.Authority) {
	t.Helper()
	root = testpki.CA(t)
	sub = root.SubCA(t)
	key := testpki.Key(t, testpki.RSA2048)
	leaf = sub.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "web.example.com", Organization: []string{"Example"}},
		DNSNames:    []string{"web.example.com"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(24 * time.Hour),
	}, key.Public())
	return leaf, sub, root
}

func TestInspectChain(t *testing.T) {
	leaf, sub, root := testChain(t)
	chain := append(append(testpki.CertPEM(leaf), sub.CertPEM()...), root.CertPEM()...)
	file := writeTemp(t, "chain.pem", chain)
	code, out, errOut := runCmd("inspect", file)
	t.Logf("output:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	sum := sha256.Sum256(leaf.Raw)
	for _, want := range []string{
		"certificate 1 (" + file + ")\n  Subject:       CN=web.example.com,O=Example\n",
		"  Issuer:        CN=testpki intermediate CA\n",
		"  SANs:          DNS:web.example.com, IP:10.0.0.1\n",
		"  Key:           RSA 2048\n",
		"  Key usage:     digital signature, key encipherment\n",
		"  Ext usage:     server auth\n",
		"  CA:            false\n",
		"; valid, ",
		"  Signed by:     certificate 2, the next in this file (signature verified)\n",
		"  SHA-256:       " + colonHex(hex.EncodeToString(sum[:])) + "\n",
		"certificate 3 (" + file + ")\n  Subject:       CN=testpki CA\n",
		"Signature:     ECDSA-SHA256, self-signed\n",
		"  CA:            true\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// Out of order: the root before the intermediate.
	file = writeTemp(t, "bad.pem", append(append(testpki.CertPEM(leaf), root.CertPEM()...), sub.CertPEM()...))
	if code, out, _ = runCmd("inspect", file); code != 0 || !strings.Contains(out, "NOT certificate 2, the next in this file") {
		t.Errorf("chain out of order: exit %d, output:\n%s", code, out)
	}
}

func TestInspectJSONAndYAML(t *testing.T) {
	leaf, sub, _ := testChain(t)
	file := writeTemp(t, "chain.pem", append(testpki.CertPEM(leaf), sub.CertPEM()...))
	for _, format := range []string{"json", "yaml"} {
		code, out, errOut := runCmd("inspect", file, "-o", format)
		if code != 0 {
			t.Fatalf("-o %s: exit %d, stderr %q", format, code, errOut)
		}
		data := []byte(out)
		if format == "yaml" {
			var err error
			if data, err = yaml.YAMLToJSON(data); err != nil {
				t.Fatal(err)
			}
		}
		var got []described
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		if len(got) != 2 {
			t.Fatalf("-o %s: %d objects", format, len(got))
		}
		d := got[0]
		sum := sha256.Sum256(leaf.Raw)
		if d.Kind != kindCertificate || d.Subject != "CN=web.example.com,O=Example" || d.Key.Type != "RSA" || d.Key.Bits != 2048 ||
			strings.Join(d.SANs, ",") != "DNS:web.example.com,IP:10.0.0.1" || strings.Join(d.ExtKeyUsages, ",") != "server auth" ||
			d.SerialNumber != hex.EncodeToString(leaf.SerialNumber.Bytes()) || d.Fingerprints.SHA256 != hex.EncodeToString(sum[:]) ||
			!d.NotAfter.Equal(leaf.NotAfter) || d.SignedByNext == nil || !*d.SignedByNext || d.IsCA {
			t.Errorf("-o %s: leaf = %+v", format, d)
		}
		if !got[1].IsCA || got[1].MaxPathLen != nil && *got[1].MaxPathLen < 0 || got[1].Key.Description != "ECDSA P-256" {
			t.Errorf("-o %s: intermediate = %+v", format, got[1])
		}
	}
}

func TestInspectRequestAndDER(t *testing.T) {
	key := testpki.Key(t, testpki.P384)
	csrPEM := testpki.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}, DNSNames: []string{"alice.example"}})
	// A CSR on stdin, with a private key block that is named and never printed.
	code, out, errOut := runIn(append(csrPEM, testpki.KeyPEM(t, key)...), "inspect", "-")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"certificate request 1 (stdin)\n", "  Subject:       CN=alice\n", "  SANs:          DNS:alice.example\n",
		"  Key:           ECDSA P-384\n", "valid (proof of possession)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "PEM block 2 is a PRIVATE KEY, not shown") || strings.Contains(out, "PRIVATE") {
		t.Errorf("the key block: stdout %q, stderr %q", out, errOut)
	}

	// A request whose signature does not match its key.
	code, out, _ = runIn(testpki.BreakSignature(t, csrPEM), "inspect", "-")
	if code != 0 || !strings.Contains(out, "INVALID: the request was not signed by its key") {
		t.Errorf("broken request: exit %d, output:\n%s", code, out)
	}

	// DER: a certificate and a request.
	leaf, _, _ := testChain(t)
	block, _ := pem.Decode(csrPEM)
	der := writeTemp(t, "leaf.der", leaf.Raw)
	derCSR := writeTemp(t, "req.der", block.Bytes)
	code, out, errOut = runCmd("inspect", der, derCSR)
	if code != 0 || !strings.Contains(out, "certificate 1 ("+der+")\n  Subject:       CN=web.example.com") ||
		!strings.Contains(out, "certificate request 1 ("+derCSR+")\n  Subject:       CN=alice") {
		t.Errorf("DER: exit %d, stderr %q, output:\n%s", code, errOut, out)
	}
}

func TestInspectErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		in   []byte
		want string
	}{
		{[]string{"inspect", filepath.Join(t.TempDir(), "none.pem")}, nil, "no such file"},
		{[]string{"inspect", "-"}, []byte("not a certificate"), "neither a DER certificate"},
		{[]string{"inspect", "-"}, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "holds no certificate or certificate request"},
		{[]string{"inspect", "-"}, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), "PEM block 1"},
	} {
		code, out, errOut := runIn(tc.in, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
