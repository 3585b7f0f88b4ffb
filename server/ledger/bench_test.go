package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// BenchmarkAppend measures durable appends on the real file system (b.TempDir) with 1 and 64
// concurrent callers, each record carrying a ~1.5 KiB chain like a real issuance and its own
// serial and object UID (each one is indexed). It reports ops/s and fsyncs per append.
func BenchmarkAppend(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			l, err := ledger.Open(filepath.Join(b.TempDir(), "ledger"), ledger.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := issued(1)
			r.Certificate = "-----BEGIN CERTIFICATE-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 20) + "-----END CERTIFICATE-----\n"
			var (
				wg   sync.WaitGroup
				next = make(chan int, callers)
			)
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Go(func() {
					for i := range next {
						r := r
						r.Serial, r.ObjectUID = fmt.Sprintf("%032x", i+1), fmt.Sprintf("9a2e%04x-0000-4000-8000-%012x", i>>16, i)
						if _, err := l.Append(context.Background(), r); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			b.ReportMetric(float64(st.Syncs)/float64(st.Records), "fsyncs/append")
		})
	}
}
