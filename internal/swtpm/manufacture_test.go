package swtpm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxudstpm"
)

// TestManufacture: swtpm_setup with a LocalCA makes the CA (a self-signed root and an
// intermediate it signed) in the CA's own directory, an RSA 2048 and an ECC P-384 EK
// certificate signed by the intermediate, and a TPM whose NV holds those certificates at the
// TCG indices; a second TPM of the same CA has certificates of the same intermediate; a
// manufactured state is not manufactured again.
func TestManufacture(t *testing.T) {
	t.Parallel()
	ca, err := NewLocalCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.Certificates(); err == nil {
		t.Errorf("Certificates before the first Manufacture: no error, want one (the CA is not made yet)")
	}
	state := t.TempDir()
	made, err := ca.Manufacture(state)
	if err != nil {
		t.Fatal(err)
	}
	root, intermediate, err := ca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ca.RootCertFile(), ca.IntermediateCertFile()} {
		if filepath.Dir(f) != ca.Dir {
			t.Errorf("CA file %s is outside the CA's directory %s", f, ca.Dir)
		}
	}
	if err := root.CheckSignatureFrom(root); err != nil || !root.IsCA {
		t.Errorf("root %q: not a self-signed CA (IsCA %v): %v", root.Subject, root.IsCA, err)
	}
	if err := intermediate.CheckSignatureFrom(root); err != nil || !intermediate.IsCA {
		t.Errorf("intermediate %q: not a CA signed by the root (IsCA %v): %v", intermediate.Subject, intermediate.IsCA, err)
	}

	want := map[string]struct {
		index tpm2.TPMHandle
		check func(any) bool
	}{
		"rsa2048": {0x01c00002, func(k any) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == 2048 }},
		"secp384r1": {0x01c00016, func(k any) bool {
			e, ok := k.(*ecdsa.PublicKey)
			return ok && e.Curve == elliptic.P384()
		}},
	}
	if len(made.EKCertificates) != len(want) {
		t.Errorf("EK certificates of key types %v, want %d: rsa2048 and secp384r1", slices.Sorted(maps.Keys(made.EKCertificates)), len(want))
	}

	tpm, err := Start(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tpm.Close)
	conn, err := linuxudstpm.Open(tpm.Socket)
	if err != nil {
		t.Fatal(err)
	}
	for keyType, w := range want {
		der, ok := made.EKCertificates[keyType]
		if !ok {
			t.Errorf("no %s EK certificate; swtpm_setup said: %s", keyType, made.Log)
			continue
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Errorf("%s EK certificate: %v", keyType, err)
			continue
		}
		if !w.check(cert.PublicKey) {
			t.Errorf("%s EK certificate: key %T is not of that type", keyType, cert.PublicKey)
		}
		if err := cert.CheckSignatureFrom(intermediate); err != nil {
			t.Errorf("%s EK certificate: not signed by the CA's intermediate: %v", keyType, err)
		}
		if nv := readNV(t, conn, w.index); !bytes.Equal(nv, der) {
			t.Errorf("NV index 0x%08x holds %d bytes, want the %s EK certificate (%d bytes)", uint32(w.index), len(nv), keyType, len(der))
		}
	}

	again, err := ca.Manufacture(t.TempDir())
	if err != nil {
		t.Fatalf("a second TPM of the same CA: %v", err)
	}
	root2, _, err := ca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	if !root2.Equal(root) {
		t.Errorf("the second Manufacture made a new root")
	}
	for keyType, der := range again.EKCertificates {
		cert, err := x509.ParseCertificate(der)
		if err != nil || cert.CheckSignatureFrom(intermediate) != nil {
			t.Errorf("the second TPM's %s EK certificate is not of the same intermediate (%v)", keyType, err)
		}
	}

	tpm.Stop()
	if _, err := ca.Manufacture(state); err == nil {
		t.Errorf("Manufacture on a manufactured state: no error, want swtpm_setup to refuse")
	}
}

// TestNewLocalCARefusesPaths: a path that swtpm's configuration files cannot carry is refused
// before anything is written.
func TestNewLocalCARefusesPaths(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a b")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := NewLocalCA(dir)
	if err == nil || !strings.Contains(err.Error(), "white space") {
		t.Errorf("NewLocalCA(%q) = %v, want an error naming white space", dir, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("NewLocalCA wrote %d files into a refused directory", len(entries))
	}
}

// TestManufactureWithoutTools: without swtpm's tools, NewLocalCA and Manufacture say how to
// install them.
func TestManufactureWithoutTools(t *testing.T) {
	ca, err := NewLocalCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := NewLocalCA(t.TempDir()); err == nil || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("NewLocalCA without swtpm_localca = %v, want an error naming %q", err, InstallHint)
	}
	if _, err := ca.Manufacture(t.TempDir()); err == nil || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("Manufacture without swtpm = %v, want an error naming %q", err, InstallHint)
	}
}

// readNV reads an NV index whole.
func readNV(t *testing.T, conn transport.TPM, index tpm2.TPMHandle) []byte {
	t.Helper()
	pub, err := tpm2.NVReadPublic{NVIndex: index}.Execute(conn)
	if err != nil {
		t.Errorf("NVReadPublic(0x%08x): %v", uint32(index), err)
		return nil
	}
	contents, err := pub.NVPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for off := 0; off < int(contents.DataSize); off += 512 {
		rsp, err := tpm2.NVRead{
			AuthHandle: tpm2.AuthHandle{Handle: index, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: index, Name: pub.NVName},
			Size:       uint16(min(512, int(contents.DataSize)-off)), Offset: uint16(off),
		}.Execute(conn)
		if err != nil {
			t.Errorf("NVRead(0x%08x): %v", uint32(index), err)
			return nil
		}
		out = append(out, rsp.Data.Buffer...)
	}
	return out
}
