package tpm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/simulator"

	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/tpmconn"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/tpm"
)

// sim is the process's one in-process TPM simulator (go-tpm-tools allows one per process),
// opened by TestMain. Tests that use it do not run in parallel: it has three object slots.
var sim *sharedTPM

// sharedTPM serializes the commands of several keys' connections to one TPM.
type sharedTPM struct {
	mu  sync.Mutex
	tpm transport.TPMCloser
}

func (s *sharedTPM) Send(cmd []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tpm.Send(cmd)
}

// simConn is one key's connection to the simulator; closing it leaves the simulator running.
type simConn struct{ *sharedTPM }

func (simConn) Close() error { return nil }

func TestMain(m *testing.M) {
	t, err := simulator.OpenSimulator()
	if err != nil {
		fmt.Fprintf(os.Stderr, "opening the TPM simulator: %v\n", err)
		os.Exit(1)
	}
	sim = &sharedTPM{tpm: t}
	code := m.Run()
	_ = t.Close()
	os.Exit(code)
}

// testTPM is a TPM the tests run on, reached as a key URI reaches it.
type testTPM struct {
	name       string
	opts       tpm.Options
	uri        func(key string) string // the URI of key ("handle=…", "blob=…" or "") on this TPM
	raw        transport.TPM           // direct access, for the tests' own checks
	algorithms []string                // what it can generate
	swtpm      *swtpmtest.TPM          // nil for the simulator
}

// simTPM returns the in-process simulator. When the test ends it checks that no transient
// object was left loaded: a leak would soon fill the simulator's three slots.
func simTPM(t *testing.T) testTPM {
	t.Helper()
	t.Cleanup(func() { checkNoTransients(t, sim) })
	return testTPM{
		name: "simulator",
		opts: tpm.Options{Transport: func() (transport.TPMCloser, error) { return simConn{sim}, nil }},
		uri:  func(key string) string { return "tpm:" + key },
		raw:  sim,
		// The go-tpm-tools simulator is built without RSA-3072.
		algorithms: []string{keyerr.P256, keyerr.P384, keyerr.RSA2048},
	}
}

// swTPM starts a swtpm for the test, reached through its socket= URI; raw is tpmconn's socket
// transport, which waits for its turn at a busy swtpm (go-tpm's linuxudstpm fails with EAGAIN,
// and then refuses every command).
func swTPM(t *testing.T) testTPM {
	t.Helper()
	sw := swtpmtest.Start(t)
	raw, err := tpmconn.OpenSocket(sw.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkNoTransients(t, raw) })
	return testTPM{
		name:       "swtpm",
		uri:        sw.URI,
		raw:        raw,
		algorithms: []string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072},
		swtpm:      sw,
	}
}

// generate makes a key at uri and returns its canonical URI, closing the key and (for a
// handle) evicting it when the test ends.
func (e testTPM) generate(t *testing.T, key, algorithm string) string {
	t.Helper()
	k, uri, err := tpm.Generate(context.Background(), e.uri(key), algorithm, e.opts)
	if err != nil {
		t.Fatalf("Generate(%s, %s) on the %s: %v", key, algorithm, e.name, err)
	}
	if h := k.Handle(); h != 0 {
		t.Cleanup(func() { evict(t, e.raw, h) })
	}
	if err := k.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return uri
}

// open opens uri on the TPM and closes the key when the test ends.
func (e testTPM) open(t *testing.T, uri string) *tpm.Key {
	t.Helper()
	k, err := tpm.Open(context.Background(), uri, e.opts)
	if err != nil {
		t.Fatalf("Open(%s) on the %s: %v", uri, e.name, err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return k
}

// blobPath returns a path for a new blob file.
func blobPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "ca.tpmkey")
}

// checkNoTransients fails the test if the TPM holds transient objects.
func checkNoTransients(t *testing.T, tr transport.TPM) {
	t.Helper()
	rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapHandles, Property: 0x80000000, PropertyCount: 16}.Execute(tr)
	if err != nil {
		return // the test stopped the TPM
	}
	handles, err := rsp.CapabilityData.Data.Handles()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range handles.Handle {
		if h < 0x81000000 {
			t.Errorf("transient object 0x%08x left loaded", uint32(h))
		}
	}
}

// evict removes the persistent key at h, if any.
func evict(t *testing.T, tr transport.TPM, h uint32) {
	t.Helper()
	rsp, err := tpm2.ReadPublic{ObjectHandle: tpm2.TPMHandle(h)}.Execute(tr)
	if err != nil {
		return
	}
	_, err = tpm2.EvictControl{
		Auth:             tpm2.TPMRHOwner,
		ObjectHandle:     tpm2.NamedHandle{Handle: tpm2.TPMHandle(h), Name: rsp.Name},
		PersistentHandle: tpm2.TPMHandle(h),
	}.Execute(tr)
	if err != nil {
		t.Errorf("evicting 0x%08x: %v", h, err)
	}
}

// swTPMAlgorithms are the algorithms swtpm generates.
var swTPMAlgorithms = []string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072}

// transientCount returns the number of transient objects the TPM holds.
func transientCount(t *testing.T, tr transport.TPM) int {
	t.Helper()
	rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapHandles, Property: 0x80000000, PropertyCount: 16}.Execute(tr)
	if err != nil {
		t.Fatal(err)
	}
	handles, err := rsp.CapabilityData.Data.Handles()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range handles.Handle {
		if h < 0x81000000 {
			n++
		}
	}
	return n
}
