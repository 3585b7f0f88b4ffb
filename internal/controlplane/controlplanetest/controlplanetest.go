// Package controlplanetest starts a controlplane.Cluster for a test. It is the only part of
// the control-plane starter that imports testing, so that the demo and the bench, which use
// controlplane, do not link it.
package controlplanetest

import (
	"context"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/controlplane"
)

// Start starts a cluster for t and stops it in t.Cleanup. It fails the test with t.Fatalf
// (it never skips) when the cluster cannot start, for example when the binaries are not built.
func Start(t testing.TB, opts controlplane.Options) *controlplane.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("controlplane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("controlplane: stopping: %v", err)
		}
	})
	return c
}
