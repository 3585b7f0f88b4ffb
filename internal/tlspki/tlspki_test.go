package tlspki_test

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/server/access"
)

const identity = "spiffe://prod.example.com/ns/signet-system/sa/signet-watcher"

// TestParseIdentity: identities the server's clients[].identity takes as they are and a
// custom profile's URI rule accepts; everything else refused with the reason.
func TestParseIdentity(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		identity,
		"spiffe://cluster.local/ns/a/sa/b",
		"spiffe://prod.example.com/cluster/prod-eu-1/signet_watcher.v2",
		"https://signet.example.com/clients/watcher",
	} {
		u, err := tlspki.ParseIdentity(ok)
		if err != nil || u.String() != ok {
			t.Errorf("ParseIdentity(%q) = %v, %v", ok, u, err)
		}
		// What the server does with clients[].identity and a certificate's URI.
		if _, err := access.NewAuthorizer([]access.Client{{Identity: ok}}, nil); err != nil {
			t.Errorf("the server refuses %q: %v", ok, err)
		}
	}
	for id, want := range map[string]string{
		"signet-watcher":                       "absolute URI with a host",
		"urn:signet:watcher":                   "absolute URI with a host",
		"spiffe:///ns/x":                       "absolute URI with a host",
		"spiffe://td/a%2fb":                    "SPIFFE ID path segment",
		"https://h/a b":                        "is not written as certificates render it",
		"https://h/a?b":                        "query",
		"https://h/a?":                         "query",
		"https://h/a#f":                        "fragment",
		"https://u:p@h/a":                      "user information",
		"https://h/a/./b":                      "dot segments",
		"spiffe://TD/a":                        "trust domain",
		"spiffe://td:8443/a":                   "trust domain",
		"spiffe://td":                          "needs a path",
		"spiffe://td/":                         "needs a path",
		"spiffe://td/a//b":                     "SPIFFE ID path segment \"\"",
		"spiffe://td/a/":                       "SPIFFE ID path segment \"\"",
		"spiffe://td/a:b":                      "SPIFFE ID path segment",
		"%":                                    "is not a URI",
		" spiffe://prod.example.com/ns/x/sa/y": "is not a URI",
	} {
		if _, err := tlspki.ParseIdentity(id); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIdentity(%q) = %v, want an error with %q", id, err, want)
		}
	}
}

func TestFormatLifetime(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		90 * 24 * time.Hour: "90d", 36 * time.Hour: "36h", 90 * time.Minute: "1h30m", time.Hour: "1h", 10 * time.Minute: "10m",
	} {
		if got := tlspki.FormatLifetime(d); got != want {
			t.Errorf("FormatLifetime(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestNewValidates: New refuses bad options with every problem at once, naming the flags.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := tlspki.New(tlspki.Options{ServerIPs: []string{"fe80::1%eth0"}, Algorithm: "Ed448", Validity: 30 * time.Minute})
	for _, want := range []string{"--server-name: required", "--watcher-identity: required", "--server-ip \"fe80::1%eth0\": has a zone", "--algorithm \"Ed448\"", "--validity 30m"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want %q", err, want)
		}
	}
}

// TestRenewNeverOutlivesTheCA: a renewal asking for more than the CA has left ends with the
// CA and says so; an expired CA issues nothing.
func TestRenewNeverOutlivesTheCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	pki, err := tlspki.New(tlspki.Options{ServerNames: []string{"localhost"}, WatcherIdentity: identity, Validity: 30 * 24 * time.Hour,
		CAValidity: 40 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Write(dir, false); err != nil {
		t.Fatal(err)
	}
	if err := pki.Write(dir, false); !errors.Is(err, tlspki.ErrExist) {
		t.Errorf("second Write = %v, want ErrExist", err)
	}
	r, err := tlspki.Renew(dir, tlspki.Watcher, tlspki.RenewOptions{Now: now.Add(20 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clamped || !r.New.Cert.NotAfter.Equal(pki.ClientCA.Cert.NotAfter) {
		t.Errorf("renewal ends %s (clamped %v), want the CA's end %s", r.New.Cert.NotAfter, r.Clamped, pki.ClientCA.Cert.NotAfter)
	}
	if access.Identity(r.New.Cert) != identity || r.Old.SerialNumber.Cmp(pki.Watcher.Cert.SerialNumber) != 0 {
		t.Errorf("renewal identity %q, old serial %x", access.Identity(r.New.Cert), r.Old.SerialNumber)
	}
	if _, err := tlspki.Renew(dir, tlspki.Server, tlspki.RenewOptions{Now: now.Add(41 * 24 * time.Hour)}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("renewal from an expired CA = %v", err)
	}
}

// TestRenewWithoutRecord: a folder without signet-pki.yaml renews with the default Secret
// name; a broken record is an error naming the file.
func TestRenewWithoutRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki, err := tlspki.New(tlspki.Options{ServerNames: []string{"localhost"}, WatcherIdentity: identity, Namespace: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Write(dir, false); err != nil {
		t.Fatal(err)
	}
	manifest, err := tlspki.ReadWatcherSecret(dir)
	if err != nil || !strings.Contains(string(manifest), "namespace: elsewhere") {
		t.Errorf("with the record: %v\n%s", err, manifest)
	}
	if err := os.Remove(filepath.Join(dir, tlspki.RecordFile)); err != nil {
		t.Fatal(err)
	}
	manifest, err = tlspki.ReadWatcherSecret(dir)
	if err != nil || !strings.Contains(string(manifest), "namespace: "+tlspki.DefaultNamespace) || !strings.Contains(string(manifest), "name: "+tlspki.DefaultSecretName) {
		t.Errorf("without the record: %v\n%s", err, manifest)
	}
	if err := os.WriteFile(filepath.Join(dir, tlspki.RecordFile), []byte("apiVersion: signet.dev/v1alpha1\nkind: TLSPKIRecord\nclustr: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tlspki.ReadWatcherSecret(dir); err == nil || !strings.Contains(err.Error(), tlspki.RecordFile) {
		t.Errorf("a broken record: %v", err)
	}
}

// TestCAsSignOneKindEach: the server CA signed only the server certificate and the client CA
// only the watcher's.
func TestCAsSignOneKindEach(t *testing.T) {
	t.Parallel()
	pki, err := tlspki.New(tlspki.Options{ServerNames: []string{"localhost"}, WatcherIdentity: identity})
	if err != nil {
		t.Fatal(err)
	}
	check := func(leaf, ca *x509.Certificate, want bool) {
		if got := leaf.CheckSignatureFrom(ca) == nil; got != want {
			t.Errorf("%s signed by %s: %v, want %v", leaf.Subject.CommonName, ca.Subject.CommonName, got, want)
		}
	}
	check(pki.Server.Cert, pki.ServerCA.Cert, true)
	check(pki.Server.Cert, pki.ClientCA.Cert, false)
	check(pki.Watcher.Cert, pki.ClientCA.Cert, true)
	check(pki.Watcher.Cert, pki.ServerCA.Cert, false)
}
