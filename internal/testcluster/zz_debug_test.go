package testcluster

import (
	"os"
	"testing"
	"time"
)

func TestZZDebugOutput(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	f, _ := os.Create("/tmp/tc-out.log")
	defer f.Close()
	start := time.Now()
	c, err := Start(t.Context(), Options{Output: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start %v", time.Since(start))
	time.Sleep(5 * time.Second)
	c.Stop()
}
