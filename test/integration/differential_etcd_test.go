package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// etcdStore writes CertificateSigningRequests to the control plane's etcd directly, through
// etcd's JSON gateway (/v3/kv/...).
//
// Why: the apiserver refuses to create kubernetes.io/legacy-unknown CSRs through
// certificates.k8s.io/v1 ("the legacy signerName is not allowed via this API version"), the
// only version that serves CSRs since 1.22; the corpus checks that refusal too. Yet
// kube-controller-manager still signs such CSRs when they exist, for example when created
// through v1beta1 before 1.22, and Signet's legacy-unknown profile signs them too. So the
// test stores them the way the apiserver stores CSRs (JSON is one of the encodings its storage
// reads), with the requester an impersonated create would record. From there every step is
// the real one: the apiserver serves them, the approval goes through the approval subresource
// (updates of a CSR that already has the legacy name are allowed), kube-controller-manager's
// informer sees them and writes its status, and Signet is asked with the object as served.
// The same way stores a kube-apiserver-client CSR with O=system:masters, which the
// apiserver's admission refuses to create, to compare the signers on it.
type etcdStore struct {
	url    string // etcd's client URL
	prefix string // the key prefix of CSRs, e.g. /registry/certificatesigningrequests/
}

// locate finds the key prefix of CSRs from the key of one of runs, created through the API.
func (e *etcdStore) locate(ctx context.Context, runs []*caseRun) error {
	known := map[string]bool{}
	for _, r := range runs {
		if r.created != nil {
			known[r.name] = true
		}
	}
	var resp struct {
		Kvs []struct {
			Key []byte `json:"key"`
		} `json:"kvs"`
	}
	// Every key from "/" up to "0", the next byte: all of the apiserver's keys.
	if err := e.call(ctx, "/v3/kv/range", map[string]any{"key": []byte("/"), "range_end": []byte("0"), "keys_only": true}, &resp); err != nil {
		return fmt.Errorf("listing etcd keys: %w", err)
	}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		dir, name := key[:strings.LastIndexByte(key, '/')+1], key[strings.LastIndexByte(key, '/')+1:]
		if known[name] && strings.HasSuffix(dir, "/certificatesigningrequests/") {
			e.prefix = dir
			return nil
		}
	}
	return errors.New("no CSR created through the API found in etcd")
}

// put stores obj under its name, as JSON.
func (e *etcdStore) put(ctx context.Context, obj *certificatesv1.CertificateSigningRequest) error {
	if e.prefix == "" {
		return errors.New("the CSR key prefix is unknown")
	}
	value, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var resp struct{}
	if err := e.call(ctx, "/v3/kv/put", map[string]any{"key": []byte(e.prefix + obj.Name), "value": value}, &resp); err != nil {
		return fmt.Errorf("storing CSR %s in etcd: %w", obj.Name, err)
	}
	return nil
}

// etcdHTTP keeps no connection open: an idle connection to etcd's client port can hold up
// etcd's shutdown past envtest's stop timeout.
var etcdHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// call posts req as JSON to etcd's gateway path and decodes the answer into resp. []byte
// fields encode as base64, as the gateway wants.
func (e *etcdStore) call(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := etcdHTTP.Do(hreq)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(hresp.Body)
	if err != nil {
		return err
	}
	if hresp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, hresp.Status, data)
	}
	return json.Unmarshal(data, resp)
}
