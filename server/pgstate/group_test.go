package pgstate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type testCall struct {
	n int
	groupCall[int]
}

// TestGroupBatchesAnswersAndSurvivesAPanic: calls arriving while a batch is written form the
// next batch, each gets its own answer; a batch that panics answers its calls with an error
// and hands the lead on, so the calls after it are still written; a call whose context ends
// before a batch takes it withdraws.
func TestGroupBatchesAnswersAndSurvivesAPanic(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	g := group[*testCall, int]{max: 100}
	g.write = func(batch []*testCall) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // the others queue behind the first batch
		}
		for _, c := range batch {
			if c.n == 13 {
				panic("unlucky")
			}
			c.answer(c.n*2, nil)
		}
	}
	results := make([]error, 20)
	var wg sync.WaitGroup
	wg.Go(func() { _, results[0] = g.do(context.Background(), &testCall{n: 0}) })
	time.Sleep(50 * time.Millisecond)
	for i := 1; i < 20; i++ {
		wg.Go(func() {
			defer func() { // the leader of the batch holding 13 panics on
				if p := recover(); p != nil {
					results[i] = errors.New("panicked")
				}
			}()
			v, err := g.do(context.Background(), &testCall{n: i})
			if err == nil && v != i*2 {
				err = errors.New("another call's answer")
			}
			results[i] = err
		})
	}
	time.Sleep(50 * time.Millisecond)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.do(cancelled, &testCall{n: 99}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call cancelled before any batch took it: %v", err)
	}
	close(release)
	wg.Wait()
	if len(sizes) < 2 || sizes[0] != 1 {
		t.Fatalf("batch sizes %v: want the first call alone, then the rest together", sizes)
	}
	failed := 0
	for i, err := range results {
		if err != nil {
			failed++
			if i == 0 {
				t.Errorf("call 0: %v", err)
			}
		}
	}
	if failed == 0 || results[13] == nil {
		t.Fatalf("the panicking batch's calls were not answered with an error: %v", results)
	}
	if _, err := g.do(context.Background(), &testCall{n: 7}); err != nil {
		t.Fatalf("a call after the panic: %v", err)
	}
}
