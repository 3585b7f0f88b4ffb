package signerapi_test

import (
	"context"
	"crypto"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/server/ledger"
)

// lostKey is a CA key whose device the test takes away: while down, it fails as a lost HSM
// session does.
type lostKey struct {
	crypto.Signer
	down atomic.Bool
}

func (k *lostKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if k.down.Load() {
		return nil, fmt.Errorf("pkcs11: CKR_DEVICE_REMOVED: %w", keyerr.ErrUnavailable)
	}
	return k.Signer.Sign(r, digest, opts)
}

// TestKeyUnavailableIsTransient: when the CA key's device is lost, the call fails as
// Unavailable KEY_UNAVAILABLE (so the watcher retries), says nothing was issued and hides the
// device's detail; the refusal is recorded; once the device is back, a retry of the same
// object issues, and the ledger holds exactly one issuance for it.
func TestKeyUnavailableIsTransient(t *testing.T) {
	t.Parallel()
	key := &lostKey{}
	h := newHarness(t, harnessOptions{wrapKey: func(s crypto.Signer) crypto.Signer { key.Signer = s; return key }})
	ctx := context.Background()
	req := signReq(signerA, "uid-hsm", csr(t, "svc-hsm"), "digital signature")

	key.down.Store(true)
	resp, err := h.svc.SignCertificateSigningRequest(ctx, req)
	msg := wantStatus(t, err, codes.Unavailable, "KEY_UNAVAILABLE")
	if resp != nil {
		t.Errorf("the failed call returned a response %v", resp)
	}
	if !strings.Contains(msg, "nothing was issued") || !strings.Contains(msg, "retry") {
		t.Errorf("message %q does not say nothing was issued and to retry", msg)
	}
	if strings.Contains(msg, "CKR_") {
		t.Errorf("message %q leaks the device's detail", msg)
	}

	key.down.Store(false)
	if _, err := h.svc.SignCertificateSigningRequest(ctx, req); err != nil {
		t.Fatalf("retry once the key is back: %v", err)
	}
	var issued, refused int
	for _, r := range h.records(t) {
		if r.ObjectUID != "uid-hsm" {
			continue
		}
		switch {
		case r.Decision == ledger.Issued:
			issued++
		case r.Decision == ledger.Refused && r.Reason == "KEY_UNAVAILABLE":
			refused++
		}
	}
	if issued != 1 || refused != 1 {
		t.Errorf("ledger holds %d issuances and %d KEY_UNAVAILABLE refusals for the object, want 1 and 1", issued, refused)
	}
}
