package pgstate

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/signet-pki/signet/internal/pgtest"
)

// BenchmarkJournalAppend appends issued records from 64 callers on each of servers journals
// (one pool each) sharing one database: the fleet's journal alone, without signing.
func BenchmarkJournalAppend(b *testing.B) {
	for _, servers := range []int{1, 2} {
		b.Run(map[int]string{1: "servers=1", 2: "servers=2"}[servers], func(b *testing.B) {
			s := pgtest.Start(b)
			db := "bench" + map[int]string{1: "one", 2: "two"}[servers]
			js := []*Journal{NewJournal(migrated(b, s, db), JournalOptions{})}
			for len(js) < servers {
				js = append(js, NewJournal(secondPool(b, s, db), JournalOptions{}))
			}
			var n atomic.Int64
			b.SetParallelism(32) // 64 callers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := js[int(i)%servers].Append(context.Background(), issued(int(i)%servers, int(i))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
