package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/config"
)

// TestDurationsWithPathAndLine: a duration that is not one names its field path and line,
// and does not hide the file's other problems.
func TestDurationsWithPathAndLine(t *testing.T) {
	t.Parallel()
	withLifetime := func(v string) string {
		return strings.Replace(minimal, "    certificate: /etc/signet/ca.crt\n", "    certificate: /etc/signet/ca.crt\n    maxLifetime: "+v+"\n", 1)
	}
	tests := []struct {
		name string
		body string
		want []string // each must be in the error
	}{
		{"unknown unit", withLifetime("24hours"), []string{
			`signers[0].maxLifetime (line 16): "24hours" is not a duration (write it as 24h, 90m or 1h30m: units h, m, s, ms): time: unknown unit "hours"`}},
		{"a number", minimal + "keys: {timeout: 10}\n", []string{"keys.timeout (line 17): want a duration such as 24h, 90m or 1h30m, found 10"}},
		{"nested and listed", minimal + "ledger2: x\nattestation: {challengeTTL: 1 minute}\n", []string{
			`attestation.challengeTTL (line 18): "1 minute" is not a duration`, `unknown field "ledger2" (line 17)`}},
		{"every problem at once", strings.Replace(withLifetime("1d"), "dir: /var/lib/signet/ledger", "dir: /var/lib/signet/ledger\n  checkpoint: {interval: fast}", 1) +
			"grpc: {address: nope}\n", []string{
			`signers[0].maxLifetime (line 17): "1d" is not a duration`,
			`ledger.checkpoint.interval (line 12): "fast" is not a duration`,
			"grpc.address: address nope: missing port in address",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(writeConfig(t, tt.body))
			if err == nil {
				t.Fatal("Load accepted the file")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
	// Durations that are ones load as before.
	cfg, err := config.Load(writeConfig(t, withLifetime("90m")+"keys: {timeout: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Signers[0].MaxLifetime.Duration != 90*time.Minute || cfg.Keys.Timeout.Duration != 5*time.Second {
		t.Errorf("maxLifetime %s, keys.timeout %s", cfg.Signers[0].MaxLifetime.Duration, cfg.Keys.Timeout.Duration)
	}
}
