package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// doorIdentityEdits put control characters in each requester and object field of a CSR
// object, by the field's name in the object.
var doorIdentityEdits = map[string]func(*certificatesv1.CertificateSigningRequest){
	"metadata.name":  func(c *certificatesv1.CertificateSigningRequest) { c.Name = doorControl },
	"metadata.uid":   func(c *certificatesv1.CertificateSigningRequest) { c.UID += doorControl },
	"spec.username":  func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = doorControl },
	"spec.uid":       func(c *certificatesv1.CertificateSigningRequest) { c.Spec.UID = doorControl },
	"spec.groups[1]": func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Groups[1] = doorControl },
	"spec.extra key": func(c *certificatesv1.CertificateSigningRequest) {
		c.Spec.Extra = map[string]certificatesv1.ExtraValue{doorControl: {"web-0"}}
	},
	"spec.extra value": func(c *certificatesv1.CertificateSigningRequest) {
		c.Spec.Extra = map[string]certificatesv1.ExtraValue{"authentication.kubernetes.io/pod-name": {doorControl}}
	},
}

// TestDoorsWebhookControlCharacters: through the webhook, control characters (C0, DEL, C1)
// in the object's name or UID or in the requester's username, UID, a group, an extra key or
// an extra value are refused as 400 INVALID_ARGUMENT MALFORMED_REQUEST, recorded in the ledger
// as refusals and never issued, while the same object without them is signed; the ledger
// verifies afterwards.
func TestDoorsWebhookControlCharacters(t *testing.T) {
	t.Parallel()
	e := startDoors(t)
	hc := e.hooks[doorAll]
	request := doorSignCSR(t, "unused").GetRequest()
	post := func(csr *certificatesv1.CertificateSigningRequest) (*http.Response, []byte) {
		return webhooktest.PostRaw(t, hc, http.MethodPost, e.hookURL, "application/json", bytes.NewReader(webhooktest.JSON(t, csr)))
	}
	if resp, data := post(csrObject("doors-webhook-valid", request)); resp.StatusCode != http.StatusOK {
		t.Fatalf("the valid object: answered %d %s", resp.StatusCode, data)
	}
	uids := map[string]string{}
	for i, field := range slices.Sorted(maps.Keys(doorIdentityEdits)) {
		csr := csrObject(fmt.Sprintf("doors-webhook-%d", i), request)
		doorIdentityEdits[field](csr)
		uids[field] = string(csr.UID)
		resp, data := post(csr)
		var g webhooktest.ErrorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(data, &g) != nil || g.Error.Status != "INVALID_ARGUMENT" ||
			g.Reason() != doorMalformedReason {
			t.Errorf("control characters in %s: answered %d %s, want 400 INVALID_ARGUMENT %s", field, resp.StatusCode, doorShort(string(data)), doorMalformedReason)
		}
	}
	e.stillServing(t, "doors-webhook-after")
	e.Stop()
	if _, err := ledger.Verify(e.cfg.Ledger.Dir); err != nil {
		t.Fatalf("the ledger does not verify: %v", err)
	}
	refused := map[string]int{}
	if err := ledger.Replay(e.cfg.Ledger.Dir, time.Time{}, func(r ledger.Record) error {
		for field, uid := range uids {
			if r.ObjectUID != uid {
				continue
			}
			if r.Decision != ledger.Refused {
				t.Errorf("control characters in %s: recorded %s, want a refusal", field, r.Decision)
			}
			refused[field]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for field, uid := range uids {
		// A UID with control characters may be recorded escaped: only the others are looked up.
		if !strings.ContainsAny(uid, doorControl) && refused[field] == 0 {
			t.Errorf("control characters in %s: no refusal recorded for %s", field, uid)
		}
	}
}
