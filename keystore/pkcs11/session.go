package pkcs11

import (
	"errors"
	"sync"

	cryptoki "github.com/miekg/pkcs11"
)

// errClosed is returned by Sign after Close.
var errClosed = errors.New("key is closed")

// pool lends a key's sessions to concurrent Sign calls: an idle one when there is one, else a
// new one while fewer than limit are open, else it waits for one to come back. A session runs
// one operation at a time, so a pool of n sessions signs n digests in parallel.
type pool struct {
	// open opens and logs in a new session; alive reports whether an idle session still works
	// (logging it in again when the login went away); discard closes a session the pool drops;
	// done runs once, when the pool is closed and every session has come back.
	open    func() (cryptoki.SessionHandle, error)
	alive   func(cryptoki.SessionHandle) bool
	discard func(cryptoki.SessionHandle)
	done    func() error

	mu       sync.Mutex
	cond     sync.Cond
	idle     []cryptoki.SessionHandle
	busy     int // sessions lent out or being opened
	limit    int
	closed   bool
	finished bool
}

// disposition is what put does with a session that comes back.
type disposition int

const (
	keep    disposition = iota // it works: lend it again
	drop                       // it failed: close it
	forget                     // it is gone already (or its handle belongs to another initialization): do not touch it
)

func newPool(limit int, first cryptoki.SessionHandle) *pool {
	p := &pool{limit: max(limit, 1), idle: []cryptoki.SessionHandle{first}}
	p.cond.L = &p.mu
	return p
}

// get returns a session. When fresh, it checks idle sessions with alive and forgets the dead
// ones, so that a retry after a vanished session does not take another vanished one.
func (p *pool) get(fresh bool) (cryptoki.SessionHandle, error) {
	p.mu.Lock()
	for {
		switch {
		case p.closed:
			p.mu.Unlock()
			return 0, errClosed
		case len(p.idle) > 0:
			sh := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			p.busy++
			if !fresh {
				p.mu.Unlock()
				return sh, nil
			}
			p.mu.Unlock()
			if p.alive(sh) {
				return sh, nil
			}
			p.put(sh, forget)
			p.mu.Lock()
		case p.busy < p.limit:
			p.busy++
			p.mu.Unlock()
			sh, err := p.open()
			if err != nil {
				p.put(0, forget)
				return 0, err
			}
			return sh, nil
		default:
			p.cond.Wait()
		}
	}
}

// put takes a session back from get.
func (p *pool) put(sh cryptoki.SessionHandle, d disposition) {
	p.mu.Lock()
	p.busy--
	if d == keep && !p.closed {
		p.idle = append(p.idle, sh)
	} else if d == keep {
		d = drop
	}
	finish := p.closed && p.busy == 0 && !p.finished
	p.finished = p.finished || finish
	p.cond.Signal()
	p.mu.Unlock()
	if d == drop {
		p.discard(sh)
	}
	if finish {
		_ = p.done() // Close returned already; there is no one to tell.
	}
}

// close closes the idle sessions and refuses further gets. Sessions lent out are closed as
// they come back; done runs when the last one does (now, when none is out) and close returns
// its error then.
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	finish := p.busy == 0
	p.finished = finish
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, sh := range idle {
		p.discard(sh)
	}
	if finish {
		return p.done()
	}
	return nil
}
