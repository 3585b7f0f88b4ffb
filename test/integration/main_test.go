// Package integration runs Signet end to end on a real kube-apiserver and etcd: the watcher
// and the server run in this process, requesters and admins are distinct authenticated users.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/controlplane"
)

// cluster is shared by every test of the package; tests use distinct signer names.
var cluster *controlplane.Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	cluster, err = controlplane.Start(ctx, controlplane.Options{APIServerFlags: controlplane.BootstrapTokenFlags()})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration tests need a real kube-apiserver and etcd:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}
