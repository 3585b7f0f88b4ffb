package signerapi_test

import (
	"testing"
)

// TestIdempotencyIsPerClient: a tool that uses an object UID first, with another request, does
// not block the watcher's real object with that UID (no IDEMPOTENCY_CONFLICT), and a tool that
// replays the watcher's UID and request gets a certificate of its own (recorded as its own),
// never the watcher's.
func TestIdempotencyIsPerClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	watcher, tool := h.asClient(t, "watcher"), h.asClient(t, "tool")
	const uid = "uid-shared"
	if _, err := h.svc.SignCertificateSigningRequest(tool, signReq(signerA, uid, csr(t, "squatter"), "digital signature")); err != nil {
		t.Fatalf("tool's call: %v", err)
	}
	real := signReq(signerA, uid, csr(t, "svc"), "digital signature")
	first, err := h.svc.SignCertificateSigningRequest(watcher, real)
	if err != nil {
		t.Fatalf("watcher's call after the tool used its UID: %v", err)
	}
	replayed, err := h.svc.SignCertificateSigningRequest(watcher, real)
	if err != nil || replayed.GetSerialNumber() != first.GetSerialNumber() {
		t.Fatalf("watcher's replay: %v, serial %s; want its own certificate again (%s)", err, replayed.GetSerialNumber(), first.GetSerialNumber())
	}
	stolen, err := h.svc.SignCertificateSigningRequest(tool, real)
	if err == nil && stolen.GetSerialNumber() == first.GetSerialNumber() {
		t.Fatalf("the tool replaying the watcher's UID and request got the watcher's certificate %s", first.GetSerialNumber())
	}
	issued, _ := h.decisions(t, uid)
	clients := map[string]int{}
	for _, r := range issued {
		clients[r.Client]++
	}
	if clients["watcher"] != 1 || clients["tool"] < 1 {
		t.Errorf("issued records by client %v: want one for the watcher and the tool's own", clients)
	}
}
