package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/controlplane"
)

// showEvents prints the CSR's Events, as `kubectl describe csr` would.
func showEvents(ctx context.Context, cluster *controlplane.Cluster, name string) {
	_, admin := cluster.Admin()
	events, err := admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil || len(events.Items) == 0 {
		return
	}
	fmt.Printf("\nEvents on %s (kubectl describe csr %s):\n", name, name)
	for _, e := range events.Items {
		fmt.Printf("  %-8s %-10s %s\n", e.Type, e.Reason, e.Message)
	}
}

// showMetrics prints the watcher's own metric lines that have a value.
func showMetrics(addr string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	fmt.Printf("\nsignet-watcher metrics (http://%s/metrics):\n", addr)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "signet_watcher_") && !strings.HasSuffix(line, " 0") && !strings.Contains(line, "_bucket{") {
			fmt.Println("  " + line)
		}
	}
}

// showKeyMetrics prints the server's count of CA key signatures, by backend: which key
// signed, seen from the server.
func showKeyMetrics(addr string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	fmt.Printf("\nsignet-server CA key signatures (http://%s/metrics):\n", addr)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "signet_server_key_operations_total{") {
			fmt.Println("  " + line)
		}
	}
}
