// Command pause is the sandbox ("pause") container of the tests' node, in place of
// registry.k8s.io/pause, which cannot be pulled here: it holds the pod's namespaces by doing
// nothing, reaps the orphans it inherits as the pod's PID 1, and exits 0 on SIGINT or SIGTERM,
// as kubernetes/build/pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
