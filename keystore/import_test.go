//go:build cgo

package keystore_test

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/internal/tpmsimtest"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// importTarget is a device Import tests move keys into.
type importTarget struct {
	opts keystore.Options
	// uri returns the URI of a new key named label on the device; list the keys it holds.
	uri  func(t *testing.T, label string) string
	list func(t *testing.T) []keystore.Entry
}

// softHSMTarget is a fresh SoftHSM2 token.
func softHSMTarget(t *testing.T) importTarget {
	tok := softhsmtest.New(t)
	return importTarget{
		uri: func(_ *testing.T, label string) string { return tok.URI(label) },
		list: func(t *testing.T) []keystore.Entry {
			entries, err := keystore.List(t.Context(), "pkcs11:token="+tok.Label+"?module-path="+tok.Module+"&pin-source="+tok.PINFile, keystore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return entries
		},
	}
}

// tpmTarget is a TPM reached through opts and the URI query query, whose keys are blob
// files in a directory of the test's.
func tpmTarget(t *testing.T, query string, opts keystore.Options) importTarget {
	dir := t.TempDir()
	return importTarget{
		opts: opts,
		uri: func(_ *testing.T, label string) string {
			return "tpm:blob=" + filepath.Join(dir, label+".tpmkey") + query
		},
		list: func(t *testing.T) []keystore.Entry {
			var entries []keystore.Entry
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				entries = append(entries, keystore.Entry{URI: f})
			}
			return entries
		},
	}
}

// simTarget is the process's TPM simulator (keystore.Options.TPM).
func simTarget(t *testing.T) importTarget {
	sim := tpmsimtest.Open(t)
	return tpmTarget(t, "", keystore.Options{TPM: func() (transport.TPMCloser, error) { return noClose{sim}, nil }})
}

// swtpmTarget is a fresh swtpm, reached by its socket= URI.
func swtpmTarget(t *testing.T) importTarget {
	sw := swtpmtest.Start(t)
	_, query, _ := strings.Cut(sw.URI("blob=x"), "?")
	return tpmTarget(t, "?"+query, keystore.Options{})
}

// importTargets are the devices the tests import into, by name.
var importTargets = []struct {
	name string
	make func(*testing.T) importTarget
}{{"softhsm", softHSMTarget}, {"simulator", simTarget}, {"swtpm", swtpmTarget}}

// noClose is a connection to the shared simulator, which a key's Close leaves running.
type noClose struct{ transport.TPM }

func (noClose) Close() error { return nil }

// TestImport: an existing CA's P-256 and RSA-2048 keys, imported into SoftHSM2, the simulator
// and swtpm, open by the URI Import returns, and sign a leaf certificate that verifies with
// the original CA certificate. The key may be given as Open returns a file key.
func TestImport(t *testing.T) {
	for _, target := range importTargets {
		for _, kt := range []testpki.KeyType{testpki.P256, testpki.RSA2048} {
			t.Run(target.name+"/"+string(kt), func(t *testing.T) {
				env := target.make(t)
				ca := testpki.CAOf(t, kt)
				var key crypto.Signer = ca.Key
				if kt == testpki.P256 {
					key = pemfile.Key{Signer: ca.Key} // a keystore.SoftwareKey
				}
				imported, uri, err := keystore.Import(t.Context(), env.uri(t, "kube-ca"), key, ca.Cert, env.opts)
				if err != nil {
					t.Fatalf("Import: %v", err)
				}
				if _, ok := imported.(keystore.SoftwareKey); ok {
					t.Error("the imported key is a keystore.SoftwareKey")
				}
				if err := imported.Close(); err != nil {
					t.Fatal(err)
				}
				opened, err := keystore.Open(t.Context(), uri, env.opts)
				if err != nil {
					t.Fatalf("Open(%s): %v", uri, err)
				}
				defer opened.Close()
				checkIssues(t, opened, ca.Cert)
			})
		}
	}
}

// checkIssues signs a leaf certificate with key as ca and verifies its chain to ca.
func checkIssues(t *testing.T, key crypto.Signer, ca *x509.Certificate) {
	t.Helper()
	leafKey := testpki.Key(t, testpki.P256)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: "system:node:node-a", Organization: []string{"system:nodes"}},
		NotBefore:    testpki.NotBefore,
		NotAfter:     testpki.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, leafKey.Public(), key)
	if err != nil {
		t.Fatalf("signing a leaf with the imported key: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testpki.NotBefore.AddDate(1, 0, 0), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the leaf does not verify with the original CA certificate: %v", err)
	}
}

// TestImportRefusals: a key that is not the certificate's, a certificate that is not a CA's,
// a file URI, and an existing object or blob are refused, and nothing new is left on the
// device.
func TestImportRefusals(t *testing.T) {
	for _, target := range importTargets {
		t.Run(target.name, func(t *testing.T) {
			env := target.make(t)
			ctx := t.Context()
			ca := testpki.CA(t)
			other := testpki.CA(t)
			leaf := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}}, ca.Key.Public()) // CA:FALSE, for the CA's own key
			noCertSign := testpki.CA(t, func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature })

			_, _, err := keystore.Import(ctx, env.uri(t, "a"), ca.Key, other.Cert, env.opts)
			if !errors.Is(err, keystore.ErrKeyMismatch) || !strings.Contains(err.Error(), "CN=testpki CA") {
				t.Errorf("Import with another CA's certificate = %v, want ErrKeyMismatch naming the certificate", err)
			}
			for _, cert := range []*x509.Certificate{leaf, noCertSign.Cert} {
				key := ca.Key
				if cert == noCertSign.Cert {
					key = noCertSign.Key
				}
				if _, _, err := keystore.Import(ctx, env.uri(t, "b"), key, cert, env.opts); !errors.Is(err, keystore.ErrNotCA) {
					t.Errorf("Import with the non-CA certificate %s = %v, want ErrNotCA", cert.Subject, err)
				}
			}
			if _, _, err := keystore.Import(ctx, env.uri(t, "c"), ca.Key, nil, env.opts); err == nil || !strings.Contains(err.Error(), "no CA certificate") {
				t.Errorf("Import without a certificate = %v", err)
			}
			if got := env.list(t); len(got) != 0 {
				t.Errorf("refused imports left %v on the device", got)
			}

			key, _, err := keystore.Import(ctx, env.uri(t, "taken"), ca.Key, ca.Cert, env.opts)
			if err != nil {
				t.Fatal(err)
			}
			_ = key.Close()
			second := testpki.CA(t)
			if _, _, err := keystore.Import(ctx, env.uri(t, "taken"), second.Key, second.Cert, env.opts); err == nil ||
				!(strings.Contains(err.Error(), "already has an object") || strings.Contains(err.Error(), "the file exists")) {
				t.Errorf("Import to an existing label or blob = %v, want a refusal", err)
			}
			if got := env.list(t); len(got) != 1 {
				t.Errorf("after importing one key the device holds %d", len(got))
			}
		})
	}
	path := filepath.Join(t.TempDir(), "ca.key")
	ca := testpki.CA(t)
	if _, _, err := keystore.Import(t.Context(), "file://"+path, ca.Key, ca.Cert, keystore.Options{}); !errors.Is(err, keystore.ErrUnsupportedURI) {
		t.Errorf("Import to a file URI = %v, want ErrUnsupportedURI", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("Import to a file URI wrote the file")
	}
}
