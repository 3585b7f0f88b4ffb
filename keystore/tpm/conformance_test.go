package tpm_test

import (
	"fmt"
	"testing"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keystoretest"
	"github.com/signet-pki/signet/keystore/tpm"
)

var _ keystore.Key = (*tpm.Key)(nil)

// runConformance generates a persistent and a blob key of each algorithm the TPM supports
// and runs the keystore conformance suite on each, opened by its canonical URI.
func runConformance(t *testing.T, env testTPM, firstHandle uint32) {
	for i, alg := range env.algorithms {
		handleURI := env.generate(t, fmt.Sprintf("handle=0x%08x", firstHandle+uint32(i)), alg)
		blobURI := env.generate(t, "blob="+blobPath(t), alg)
		for kind, uri := range map[string]string{"handle": handleURI, "blob": blobURI} {
			t.Run(alg+"/"+kind, func(t *testing.T) {
				keystoretest.Run(t, func(t *testing.T) keystore.Key {
					k, err := tpm.Open(t.Context(), uri, env.opts)
					if err != nil {
						t.Fatalf("Open(%s): %v", uri, err)
					}
					if _, ok := any(k).(keystore.SoftwareKey); ok {
						t.Errorf("a TPM key is a keystore.SoftwareKey: its signatures would go unchecked")
					}
					if k.Algorithm() != alg {
						t.Errorf("Algorithm() = %q, want %q", k.Algorithm(), alg)
					}
					return k
				})
			})
		}
	}
}

// TestConformanceSimulator runs the suite on the in-process simulator (Options.Transport).
func TestConformanceSimulator(t *testing.T) {
	runConformance(t, simTPM(t), 0x81000100)
}

// TestConformanceSwtpm runs the suite on swtpm through its socket= URI, one swtpm per
// algorithm.
func TestConformanceSwtpm(t *testing.T) {
	t.Parallel()
	for _, alg := range swTPMAlgorithms {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			env := swTPM(t)
			env.algorithms = []string{alg}
			runConformance(t, env, 0x81000100)
		})
	}
}
