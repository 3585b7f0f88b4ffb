package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/signet-pki/signet/attestation"
)

// Paths of the signing server's attestation endpoint (server/attest).
const (
	pathChallenge = "/attest/v1/challenge"
	pathActivate  = "/attest/v1/activate"
)

// attestClient calls the signing server's attestation endpoint over HTTPS, verifying the
// server against its CA; it presents no client certificate.
type attestClient struct {
	url  string
	http *http.Client
}

func newAttestClient(url string, roots *x509.CertPool) *attestClient {
	return &attestClient{url: url, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}},
	}}
}

// RefusedError is the endpoint's refusal: the check that failed and its message.
type RefusedError struct {
	Status         int
	Check, Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the signing server refused the attestation (%d, %s): %s", e.Status, e.Check, e.Message)
}

// call posts in as JSON to path and decodes a 200 answer into out.
func (c *attestClient) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling the attestation endpoint: %w", err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(rsp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the attestation endpoint's answer: %w", err)
	}
	if rsp.StatusCode != http.StatusOK {
		var e struct{ Check, Message string }
		_ = json.Unmarshal(data, &e)
		return &RefusedError{Status: rsp.StatusCode, Check: e.Check, Message: e.Message}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the attestation endpoint's answer: %w", err)
	}
	return nil
}

func (c *attestClient) challenge(ctx context.Context, req attestation.ChallengeRequest) (attestation.Challenge, error) {
	var ch attestation.Challenge
	return ch, c.call(ctx, pathChallenge, req, &ch)
}

func (c *attestClient) activate(ctx context.Context, req attestation.ActivationRequest) (attestation.Activation, error) {
	var act attestation.Activation
	return act, c.call(ctx, pathActivate, req, &act)
}
