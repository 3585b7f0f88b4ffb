package authority_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/authority"
)

// keyFile writes ca's key to a file and returns its path.
func keyFile(t *testing.T, ca *testpki.Authority) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.key")
	if err := os.WriteFile(path, testpki.KeyPEM(t, ca.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func spec(t *testing.T, st authority.State, ca *testpki.Authority, withKey bool) authority.CASpec {
	s := authority.CASpec{State: st, Certificate: ca.Cert, Source: "test"}
	if withKey {
		s.KeyURI = keyFile(t, ca)
	}
	return s
}

// TestOpen: a set with one active CA opens, issues with it and publishes every CA, active
// first; sets that cannot work are refused with a reason.
func TestOpen(t *testing.T) {
	t.Parallel()
	active, staged, retired, other := testpki.CA(t), testpki.CA(t), testpki.CA(t), testpki.CA(t)
	a, err := authority.Open(context.Background(), []authority.CASpec{
		spec(t, authority.Retired, retired, false),
		spec(t, authority.Staged, staged, true),
		spec(t, authority.Active, active, true),
	}, keystore.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if !a.Active().Certificate.Equal(active.Cert) || a.Active().Issuing().Key == nil {
		t.Errorf("the active CA is not the one configured active, with its key")
	}
	var got [][]byte
	for block, rest := pem.Decode(a.Bundle()); block != nil; block, rest = pem.Decode(rest) {
		got = append(got, block.Bytes)
	}
	want := [][]byte{active.Cert.Raw, staged.Cert.Raw, retired.Cert.Raw}
	if len(got) != len(want) {
		t.Fatalf("bundle holds %d certificates, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("bundle certificate %d is not the expected CA (order active, staged, retired)", i)
		}
	}

	notCA := authority.CASpec{State: authority.Retired, Certificate: testpki.CA(t, func(c *x509.Certificate) { c.IsCA, c.BasicConstraintsValid = false, false }).Cert, Source: "leaf.crt"}
	activeSpec := spec(t, authority.Active, active, true)
	activeSpec.Field = "cas[0]"
	sameKey := spec(t, authority.Staged, staged, false)
	sameKey.KeyURI, sameKey.Field = activeSpec.KeyURI, "cas[1]"
	mismatched := spec(t, authority.Active, active, false)
	mismatched.KeyURI = keyFile(t, other)
	for _, tc := range []struct {
		name  string
		specs []authority.CASpec
		want  string
	}{
		{"no active CA", []authority.CASpec{spec(t, authority.Staged, staged, true)}, "no active CA"},
		{"two active CAs", []authority.CASpec{spec(t, authority.Active, active, true), spec(t, authority.Active, staged, true)}, "more than one active CA"},
		{"active CA without a key", []authority.CASpec{spec(t, authority.Active, active, false)}, "a key is required"},
		{"key of another CA", []authority.CASpec{mismatched}, "does not match"},
		{"retired anchor that is not a CA", []authority.CASpec{spec(t, authority.Active, active, true), notCA}, "CA 1 (retired, key , certificate leaf.crt): the certificate is not a CA certificate"},
		{"same certificate twice", []authority.CASpec{spec(t, authority.Active, active, true), spec(t, authority.Retired, active, false)}, "the same certificate is configured twice"},
		{"same key twice", []authority.CASpec{activeSpec, sameKey}, "cas[0] (active, key " + activeSpec.KeyURI + ", certificate test) and cas[1] (staged, key " + activeSpec.KeyURI + ", certificate test): the same key is configured twice"},
	} {
		if _, err := authority.Open(context.Background(), tc.specs, keystore.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseState(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]authority.State{"": authority.Active, "active": authority.Active, "staged": authority.Staged, "retired": authority.Retired} {
		if got, err := authority.ParseState(in); err != nil || got != want {
			t.Errorf("ParseState(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := authority.ParseState("next"); err == nil {
		t.Error("ParseState accepted an unknown state")
	}
}
