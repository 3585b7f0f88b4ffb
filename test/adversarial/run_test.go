package adversarial

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// parallelism is how many groups of cases run at once.
const parallelism = 8

// callTimeout bounds one call.
const callTimeout = 30 * time.Second

// results are the answers so far, by case name; cases of a group read their predecessors'.
type results struct {
	mu sync.Mutex
	m  map[string]*result
}

func (r *results) set(name string, res *result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = res
}

// snapshot copies the answers so far.
func (r *results) snapshot() map[string]*result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*result, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

// units splits the cases into what runs in parallel: each case without a group alone, each
// group as one unit in table order.
func units(cases []*corpusCase) [][]*corpusCase {
	var out [][]*corpusCase
	index := map[string]int{}
	for _, cc := range cases {
		if cc.group == "" {
			out = append(out, []*corpusCase{cc})
			continue
		}
		i, ok := index[cc.group]
		if !ok {
			i = len(out)
			index[cc.group] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], cc)
	}
	return out
}

// runCorpus sends every case to the server and returns the answers by case name.
func runCorpus(t *testing.T, e *env, cases []*corpusCase) map[string]*result {
	t.Helper()
	res := &results{m: map[string]*result{}}
	work := make(chan []*corpusCase)
	var wg sync.WaitGroup
	for range parallelism {
		wg.Go(func() {
			for unit := range work {
				for _, cc := range unit {
					res.set(cc.name, e.call(cc))
				}
			}
		})
	}
	for _, u := range units(cases) {
		work <- u
	}
	close(work)
	wg.Wait()
	return res.snapshot()
}

// call sends one case's request on its client's connection.
func (e *env) call(cc *corpusCase) *result {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	conn := e.conns[cc.client]
	client := signetv1.NewSignerServiceClient(conn)
	r := cc.req
	switch {
	case r.csr != nil:
		resp, err := client.SignCertificateSigningRequest(ctx, r.csr)
		return csrResult(resp, err)
	case r.pod != nil:
		resp, err := client.SignPodCertificateRequest(ctx, r.pod)
		return podResult(resp, err)
	case r.explain != nil:
		resp, err := client.ExplainCertificateSigningRequest(ctx, &signetv1.ExplainCertificateSigningRequestRequest{Request: r.explain})
		return &result{err: err, explain: resp}
	}
	in, out := rawMessage(r.raw.body), rawMessage(nil)
	if err := conn.Invoke(ctx, r.raw.method, &in, &out, grpc.ForceCodec(rawCodec{})); err != nil {
		return &result{err: err}
	}
	if r.raw.method == methodSignPod {
		resp := &signetv1.SignPodCertificateRequestResponse{}
		return podResult(resp, proto.Unmarshal(out, resp))
	}
	resp := &signetv1.SignCertificateSigningRequestResponse{}
	return csrResult(resp, proto.Unmarshal(out, resp))
}

func csrResult(resp *signetv1.SignCertificateSigningRequestResponse, err error) *result {
	if err != nil {
		return &result{err: err}
	}
	return &result{chainPEM: resp.GetCertificateChainPem(), serial: resp.GetSerialNumber(),
		notBefore: resp.GetNotBefore().AsTime(), notAfter: resp.GetNotAfter().AsTime()}
}

func podResult(resp *signetv1.SignPodCertificateRequestResponse, err error) *result {
	if err != nil {
		return &result{err: err}
	}
	return &result{chainPEM: resp.GetCertificateChainPem(), serial: resp.GetSerialNumber(),
		notBefore: resp.GetNotBefore().AsTime(), notAfter: resp.GetNotAfter().AsTime()}
}
