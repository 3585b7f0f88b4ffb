//go:build cgo

package pkcs11

import (
	"errors"
	"sync"

	cryptoki "github.com/miekg/pkcs11"
)

// errClosed is returned by Sign after Close.
var errClosed = errors.New("key is closed")

// session is a pooled session and the handle of the key in it. The key is looked up in each
// session: handles of private objects do not outlive the login (SoftHSM drops them when the
// last session closes), so a handle found earlier may be invalid in a session opened later.
type session struct {
	h   cryptoki.SessionHandle
	key cryptoki.ObjectHandle
}

// pool lends a key's sessions to concurrent Sign calls: an idle one when there is one, else a
// new one while fewer than limit are open, else it waits for one to come back. A session runs
// one operation at a time, so a pool of n sessions signs n digests in parallel.
type pool struct {
	// open opens a new session, logged in, with the key found; refresh checks that an idle
	// session still works, logging in and finding the key again, and tells what to do with it
	// when it does not (drop or forget); discard closes a session the pool drops; done runs
	// once, when the pool is closed and every session has come back.
	open    func() (*session, error)
	refresh func(*session) disposition
	discard func(*session)
	done    func() error

	mu       sync.Mutex
	cond     sync.Cond
	idle     []*session
	busy     int // sessions lent out or being opened
	limit    int
	closed   bool
	finished bool
}

// disposition is what put does with a session that comes back.
type disposition int

const (
	keep   disposition = iota // it works: lend it again
	drop                      // it failed: close it
	forget                    // it is gone already (or its handle belongs to another initialization): do not touch it
)

func newPool(limit int, first *session) *pool {
	p := &pool{limit: max(limit, 1), idle: []*session{first}}
	p.cond.L = &p.mu
	return p
}

// get returns a session. When fresh, it refreshes idle sessions first and drops or forgets
// those that fail, so that a retry after a vanished session does not take another vanished one.
func (p *pool) get(fresh bool) (*session, error) {
	p.mu.Lock()
	for {
		switch {
		case p.closed:
			p.mu.Unlock()
			return nil, errClosed
		case len(p.idle) > 0:
			s := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			p.busy++
			p.mu.Unlock()
			if !fresh {
				return s, nil
			}
			d := p.refresh(s)
			if d == keep {
				return s, nil
			}
			p.put(s, d)
			p.mu.Lock()
		case p.busy < p.limit:
			p.busy++
			p.mu.Unlock()
			s, err := p.open()
			if err != nil {
				p.put(nil, forget)
				return nil, err
			}
			return s, nil
		default:
			p.cond.Wait()
		}
	}
}

// put takes a session back from get.
func (p *pool) put(s *session, d disposition) {
	p.mu.Lock()
	p.busy--
	if d == keep && !p.closed {
		p.idle = append(p.idle, s)
	} else if d == keep {
		d = drop
	}
	finish := p.closed && p.busy == 0 && !p.finished
	p.finished = p.finished || finish
	p.cond.Signal()
	p.mu.Unlock()
	if d == drop {
		p.discard(s)
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
	for _, s := range idle {
		p.discard(s)
	}
	if finish {
		return p.done()
	}
	return nil
}
