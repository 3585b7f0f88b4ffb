package pgstate

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// group is leader-based group commit, which the journal's appends and the answers' claims
// share: a call that finds no batch being written writes one with every call waiting (up to
// max), answers each, and hands the lead to the first call that arrived meanwhile. A call
// whose context ends before a batch takes it withdraws; once taken, it is answered by the
// batch. A batch that panics answers its unanswered calls with an error before the panic goes
// on, so that no call waits for ever.
type group[M member[Res], Res any] struct {
	max   int
	write func(batch []M) // answers every call of batch

	mu      sync.Mutex
	pending []M
	writing bool
}

// member is a call of a group: a request that embeds its groupCall.
type member[Res any] interface {
	comparable
	slot() *groupCall[Res]
}

// groupCall is what a group keeps of each call: where its answer goes.
type groupCall[Res any] struct {
	done     chan groupRes[Res]
	answered bool // set by the batch's writer, which alone answers
}

type groupRes[Res any] struct {
	val  Res
	err  error
	lead bool
}

func (c *groupCall[Res]) slot() *groupCall[Res] { return c }

// answer gives the call its result; a call is answered once.
func (c *groupCall[Res]) answer(v Res, err error) {
	if !c.answered {
		c.answered = true
		c.done <- groupRes[Res]{val: v, err: err}
	}
}

// do queues m and returns its answer.
func (g *group[M, Res]) do(ctx context.Context, m M) (Res, error) {
	c := m.slot()
	c.done = make(chan groupRes[Res], 1)
	g.mu.Lock()
	g.pending = append(g.pending, m)
	lead := !g.writing
	g.writing = true
	g.mu.Unlock()
	if !lead {
		var res groupRes[Res]
		select {
		case res = <-c.done:
		case <-ctx.Done():
			if g.withdraw(m) {
				var zero Res
				return zero, ctx.Err()
			}
			res = <-c.done
		}
		if !res.lead {
			return res.val, res.err
		}
	}
	g.writeBatch()
	res := <-c.done
	return res.val, res.err
}

// withdraw takes m out of the queue if no batch has taken it.
func (g *group[M, Res]) withdraw(m M) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(m.slot().done) > 0 {
		return false
	}
	if i := slices.Index(g.pending, m); i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
		return true
	}
	return false
}

// writeBatch writes the calls waiting (up to max) and hands the lead on, or ends the writing.
func (g *group[M, Res]) writeBatch() {
	g.mu.Lock()
	n := min(len(g.pending), g.max)
	batch := slices.Clone(g.pending[:n])
	g.pending = slices.Delete(g.pending, 0, n)
	g.mu.Unlock()
	defer g.handOn()
	defer func() {
		if p := recover(); p != nil {
			var zero Res
			for _, m := range batch {
				m.slot().answer(zero, fmt.Errorf("the batch failed: %v", p))
			}
			panic(p)
		}
	}()
	g.write(batch)
}

func (g *group[M, Res]) handOn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.writing = false
		return
	}
	g.pending[0].slot().done <- groupRes[Res]{lead: true}
}
