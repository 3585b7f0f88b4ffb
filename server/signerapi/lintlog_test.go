package signerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/lint"
)

// A certificate issued with lint warnings or notices (here: the default exclusions lifted) is
// logged at WARN with its serial and the findings; an issuance without findings is not.
func TestIssuanceLogsLintFindings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts lint.Options
		want bool
	}{
		{"default gate", lint.Options{}, false},
		{"no exclusions", lint.Options{ReplaceDefaultExclusions: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The service logs on the calling goroutine, before the call returns.
			logs := &bytes.Buffer{}
			spec := legacy(signerA)
			spec.lint = true
			h := newHarness(t, harnessOptions{signers: []signerSpec{spec}, lint: tc.opts, logs: logs})
			resp, err := h.svc.SignCertificateSigningRequest(context.Background(),
				signReq(signerA, "uid-lint", csr(t, "svc"), "digital signature", "server auth"))
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			var found map[string]any
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var entry map[string]any
				if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == "certificate issued with lint findings" {
					found = entry
				}
			}
			if !tc.want {
				if found != nil {
					t.Errorf("logged lint findings %v with the default gate", found["lint_findings"])
				}
				return
			}
			if found == nil {
				t.Fatalf("no lint findings logged; log:\n%s", logs.String())
			}
			if found["level"] != "WARN" || found["serial"] != resp.GetSerialNumber() || found["requester"] != "alice" {
				t.Errorf("log entry %v: want level WARN, serial %s and requester alice", found, resp.GetSerialNumber())
			}
			findings, _ := json.Marshal(found["lint_findings"])
			named := false
			for _, e := range lint.DefaultExclusions() {
				named = named || strings.Contains(string(findings), e.Lint)
			}
			if !named {
				t.Errorf("lint_findings %s name none of the default exclusions", findings)
			}
		})
	}
}
