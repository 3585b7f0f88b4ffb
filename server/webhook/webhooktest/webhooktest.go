// Package webhooktest is a client of the signing webhook written to its contract
// (docs/webhook.md), not to the server's code, for the webhook's tests: it posts bodies and
// parses the Google API error body.
package webhooktest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// ErrorBody is the error body of docs/webhook.md.
type ErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"details"`
	} `json:"error"`
}

// Reason is the body's ErrorInfo reason in the signet.dev domain, "" if it has none.
func (g ErrorBody) Reason() string {
	for _, d := range g.Error.Details {
		if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Domain == "signet.dev" {
			return d.Reason
		}
	}
	return ""
}

// PostRaw sends body with method and contentType (none if "") to url and returns the answer
// and its body, failing t when the request cannot be made.
func PostRaw(t testing.TB, c *http.Client, method, url, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// PostError sends body and parses the error body, failing t on a 2xx or a body that is not
// the contract's (code equal to the status, a status name and a message, JSON).
func PostError(t testing.TB, c *http.Client, method, url, contentType string, body io.Reader) (*http.Response, ErrorBody) {
	t.Helper()
	resp, data := PostRaw(t, c, method, url, contentType, body)
	var g ErrorBody
	if resp.StatusCode < 400 || json.Unmarshal(data, &g) != nil || g.Error.Code != resp.StatusCode || g.Error.Status == "" || g.Error.Message == "" {
		t.Fatalf("answer %d %q, want an error body with the status code", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	if want, ok := CanonicalHTTPStatus[g.Error.Status]; !ok || want != resp.StatusCode {
		t.Errorf("answer %d with status %s: not a canonical pair (%s is HTTP %d)", resp.StatusCode, g.Error.Status, g.Error.Status, want)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable:
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("answer %d without Retry-After: a retry may get past it", resp.StatusCode)
		}
	default:
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			t.Errorf("answer %d with Retry-After %q: a retry of the same request cannot get past it", resp.StatusCode, ra)
		}
	}
	return resp, g
}

// CanonicalHTTPStatus is the HTTP status of each google.rpc.Code name, as code.proto documents
// the mapping every Google API client uses.
var CanonicalHTTPStatus = map[string]int{
	"CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
	"NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
	"RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
	"UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500,
}

// JSON is v encoded as JSON, the body a client posts; it fails the test if v cannot be.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
