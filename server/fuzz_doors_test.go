package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// The fuzz targets of the server's two front doors. Each starts one in-process server (with
// the webhook on) per process before fuzzing, so a fuzzing worker sends every input to the
// same server; the seed corpora in testdata/fuzz/FuzzGRPC and testdata/fuzz/FuzzWebhook run as
// ordinary tests in `go test` (TestDoorsSeeds -update-door-seeds writes them). A panic in a
// handler is contained by the server (answered INTERNAL), which both targets report as a
// failure with the input.

// FuzzGRPC sends the bytes, as they are (a raw codec), to the method named by the first input:
// a full method name ("/signet.v1.SignerService/SignCertificateSigningRequest"), or any other
// string, which picks a registered method by its hash, so that every mutation still reaches a
// method and seeds stay bound to their method when RPCs are added. When the bytes decode as the
// method's request (proto.Unmarshal), the decoded message is also sent through the typed path
// (re-marshalled by the client's codec), so the fuzzer drives both the server's decoder and the
// handlers behind it. It proves, per input, as the caller allowed every signer with the admin
// role: no answer is Unknown or Internal; every signet.v1 refusal carries a signet.dev
// ErrorInfo with a known reason; bytes that do not decode are INVALID_ARGUMENT
// MALFORMED_REQUEST; and the server still reports SERVING afterwards.
func FuzzGRPC(f *testing.F) {
	e := startDoors(f)
	byName := map[string]*doorMethod{}
	for _, m := range e.methods {
		byName[m.full] = m
	}
	f.Fuzz(func(t *testing.T, method string, body []byte) {
		m := byName[method]
		if m == nil {
			h := fnv.New32a()
			_, _ = h.Write([]byte(method))
			m = e.methods[int(h.Sum32()%uint32(len(e.methods)))]
		}
		raw := doorRaw(bytes.Clone(body))
		resp, err := e.call(doorAll, m, &raw)
		msg := m.newRequest()
		decodes := proto.Unmarshal(body, msg) == nil
		problem := doorContract(m, err)
		if problem == nil && !decodes && m.signet() {
			problem = doorMalformed(resp, err, false)
		}
		if problem != nil {
			t.Errorf("%s, %d bytes %q (raw): answered %s: %v", m.full, len(body), doorShort(string(body)), doorAnswer(resp, err), problem)
		}
		if decodes {
			doorUniqueUIDs(msg, body)
			resp, err := e.call(doorAll, m, msg)
			if problem := doorContract(m, err); problem != nil {
				t.Errorf("%s, %s (decoded, typed): answered %s: %v", m.full, doorShort(fmt.Sprint(msg)), doorAnswer(resp, err), problem)
			}
		}
		e.fuzzAlive(t)
	})
}

// doorUniqueUIDs appends a hash of body to each object UID in msg, so that decoded inputs
// differing elsewhere are not refused as reusing a UID (IDEMPOTENCY_CONFLICT) before the
// checks the fuzzer should reach.
func doorUniqueUIDs(msg proto.Message, body []byte) {
	h := fnv.New64a()
	_, _ = h.Write(body)
	for _, s := range doorSlots(msg.ProtoReflect(), "", 0) {
		if s.kind == doorField && s.isString() && s.fd.Name() == "uid" && s.parent.Descriptor().FullName() == "signet.v1.KubernetesObject" {
			s.setString(fmt.Sprintf("%s-%x", s.parent.Get(s.fd).String(), h.Sum64()))
		}
	}
}

// FuzzWebhook posts the bytes as a JSON body to the webhook over mTLS, as the caller allowed
// every signer. When they decode (encoding/json) as a CertificateSigningRequest, the object is
// also posted again with a valid PKCS#10 request in spec.request (and its UID made unique to
// the input), so that the fuzzer's
// identities, names, usages and conditions reach the checks behind the request's parsing. It
// proves, per input: the answer is never 500; an error answer is the contract's error body
// (docs/webhook.md) with an ErrorInfo reason of the wire contract and a canonical pair of HTTP
// status and status name; a 200 carries a
// certificate; and the server still reports SERVING afterwards.
func FuzzWebhook(f *testing.F) {
	e := startDoors(f)
	validPEM := doorSignCSR(f, "fuzz").GetRequest()
	hc := e.hooks[doorAll]
	f.Fuzz(func(t *testing.T, body []byte) {
		if problem, answer := e.webhookJudge(t, hc, body); problem != nil {
			t.Errorf("%d bytes %q: answered %s: %v", len(body), doorShort(string(body)), answer, problem)
		}
		var csr certificatesv1.CertificateSigningRequest
		if json.Unmarshal(body, &csr) == nil {
			h := fnv.New64a()
			_, _ = h.Write(body)
			csr.Spec.Request = validPEM
			csr.UID = types.UID(fmt.Sprintf("%s-%x", csr.UID, h.Sum64())) // see doorUniqueUIDs
			again, err := json.Marshal(&csr)
			if err != nil {
				t.Fatal(err)
			}
			if problem, answer := e.webhookJudge(t, hc, again); problem != nil {
				t.Errorf("decoded, with a valid request: %q: answered %s: %v", doorShort(string(again)), answer, problem)
			}
		}
		e.fuzzAlive(t)
	})
}

// webhookJudge posts body and checks the answer: not 500; an error body with a known reason
// for every error; a certificate with every 200.
func (e *doorEnv) webhookJudge(t *testing.T, hc *http.Client, body []byte) (problem error, answer string) {
	t.Helper()
	resp, data := webhooktest.PostRaw(t, hc, http.MethodPost, e.hookURL, "application/json", bytes.NewReader(body))
	answer = resp.Status + " " + doorShort(string(data))
	switch {
	case resp.StatusCode == http.StatusInternalServerError:
		return errors.New("500, which no body may get"), answer
	case resp.StatusCode == http.StatusOK:
		var out certificatesv1.CertificateSigningRequest
		if json.Unmarshal(data, &out) != nil || len(out.Status.Certificate) == 0 {
			return errors.New("200 without a CertificateSigningRequest holding a certificate"), answer
		}
		return nil, answer
	}
	var g webhooktest.ErrorBody
	if err := json.Unmarshal(data, &g); err != nil || g.Error.Code != resp.StatusCode || g.Error.Status == "" {
		return errors.New("not the contract's error body"), answer
	}
	if _, ok := signetv1.ParseReason(g.Reason()); !ok {
		return errors.New("the error body has no ErrorInfo reason of the wire contract"), answer
	}
	if webhooktest.CanonicalHTTPStatus[g.Error.Status] != resp.StatusCode {
		return fmt.Errorf("HTTP %d with status %s: not a canonical pair", resp.StatusCode, g.Error.Status), answer
	}
	return nil, answer
}

// fuzzAlive fails t unless the server still answers gRPC health with SERVING.
func (e *doorEnv) fuzzAlive(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doorCallTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(e.conns[doorAll]).Check(ctx, &healthpb.HealthCheckRequest{Service: signetv1.HealthService})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the server is no longer serving: health %v, %v (%s)", resp.GetStatus(), err, status.Code(err))
	}
}
