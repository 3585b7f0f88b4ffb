package attest_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/server/attest"
)

// FuzzEndpoint posts arbitrary bodies to both paths of the attestation endpoint: every answer
// is a JSON refusal with a status a client can act on (400, 403, 429) or a 200, never a 5xx,
// and nothing panics. A 200 to a body that no TPM made would be a hole.
func FuzzEndpoint(f *testing.F) {
	f.Add(true, []byte(`{"node":"node-a","ekPublic":"AAE=","akPublic":"AAE="}`))
	f.Add(false, []byte(`{"id":"00","secret":"AAE="}`))
	f.Add(true, []byte(`{"node":"x"}{"node":"y"}`))
	f.Add(false, []byte(`[]`))
	svc, err := attest.New(attest.Options{Trust: attestation.Trust{AllowedEKs: map[string]bool{}}})
	if err != nil {
		f.Fatal(err)
	}
	// High rates: the fuzzer must reach the handlers, not the limits.
	h := attest.NewEndpoint(svc, nil, attest.Limits{PerSource: 1e9, PerEK: 1e9}, nil, slog.New(slog.DiscardHandler)).Handler()
	f.Fuzz(func(t *testing.T, challenge bool, body []byte) {
		path := attest.PathActivate
		if challenge {
			path = attest.PathChallenge
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusTooManyRequests:
		default:
			data, _ := io.ReadAll(rec.Body)
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, data)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("content type %q", ct)
		}
	})
}
