package filereload_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/internal/testpki"
)

// TestValue: a value is loaded again when its files' contents change, at most once per
// interval through Get and at once through Check; a rewrite with the same contents is no
// change; a failed load keeps the previous value and is reported once per version.
func TestValue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "value")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	loads, reloads, failures := 0, 0, 0
	load := func() (string, error) {
		loads++
		data, err := os.ReadFile(path)
		if strings.HasPrefix(string(data), "bad") {
			return "", errors.New("bad contents")
		}
		return string(data), err
	}
	v, err := filereload.New([]string{path}, load, filereload.Options{
		Clock: clk, Interval: time.Second,
		OnReload: func() { reloads++ },
		OnError:  func(error) { failures++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	write("two")
	if got := v.Get(); got != "one" {
		t.Errorf("Get before the interval = %q, want the first value", got)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if got := v.Get(); got != "two" || reloads != 1 {
		t.Errorf("Get after the interval = %q (%d reloads), want the new value", got, reloads)
	}
	write("two") // same contents, a new modification time
	if changed, err := v.Check(); changed || err != nil || loads != 2 {
		t.Errorf("Check after an identical rewrite = %v, %v (%d loads); want no load", changed, err, loads)
	}
	write("bad one")
	for range 3 {
		if _, err := v.Check(); err == nil {
			t.Error("Check of a bad version returned no error")
		}
	}
	if got := v.Current(); got != "two" || failures != 1 {
		t.Errorf("after a bad version: %q, %d reports; want the previous value and one report", got, failures)
	}
	write("bad two")
	_, _ = v.Check()
	if failures != 2 {
		t.Errorf("another bad version: %d reports, want 2", failures)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(); err == nil || v.Current() != "two" {
		t.Errorf("a removed file: %v, value %q; want an error and the previous value", err, v.Current())
	}
}

func TestReadCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := testpki.CA(t), testpki.CA(t)
	bundle := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bundle, append(append(a.CertPEM(), []byte("junk between\n")...), b.CertPEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	certs, err := filereload.ReadCertificates(bundle)
	if err != nil || len(certs) != 2 || !certs[0].Equal(a.Cert) || !certs[1].Equal(b.Cert) {
		t.Fatalf("ReadCertificates = %d certificates, %v; want both, in order", len(certs), err)
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no PEM here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := filereload.ReadCertificates(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("ReadCertificates of a file without certificates = %v, want an error naming it", err)
	}
}
