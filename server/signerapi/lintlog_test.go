package signerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/signet-pki/signet/server/lint"
)

// lockedBuffer is a bytes.Buffer safe for the service's logger and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

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
		{"no exclusions", lint.Options{Exclude: []string{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &lockedBuffer{}
			spec := legacy(signerA)
			spec.lint = true
			h := newHarness(t, harnessOptions{signers: []signerSpec{spec}, lint: tc.opts, logs: logs})
			resp, err := h.svc.SignCertificateSigningRequest(context.Background(),
				signReq(signerA, "uid-lint", csr(t, "svc"), "digital signature", "server auth"))
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			var found map[string]any
			for _, line := range logs.lines() {
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
				t.Fatalf("no lint findings logged; log:\n%s", strings.Join(logs.lines(), "\n"))
			}
			if found["level"] != "WARN" || found["serial"] != resp.GetSerialNumber() {
				t.Errorf("log entry %v: want level WARN and serial %s", found, resp.GetSerialNumber())
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
