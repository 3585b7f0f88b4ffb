package main

// The counting proxy of -fleet: a loopback TCP proxy between the signing servers and
// PostgreSQL that counts, per connection, the round trips (each flight of bytes from the
// client that follows bytes from the server, or opens the connection: the client had to wait
// for an answer before it could go on) and the protocol messages the client sends, by type
// ('Q' simple query, 'P' parse, 'B' bind, 'E' execute, 'S' sync, 'd' copy data, …), and the
// transactions, as the server's ReadyForQuery messages that return to idle. It is
// only in the path of the runs that count; the throughput runs connect directly.

import (
	"encoding/binary"
	"maps"
	"net"
	"sync"
	"sync/atomic"
)

// pgProxy forwards connections from its listener to target and counts what clients send.
type pgProxy struct {
	lis    net.Listener
	target string

	trips atomic.Int64
	xacts atomic.Int64 // ReadyForQuery messages with status idle: transactions ended (and empty queries)
	mu    sync.Mutex
	msgs  map[byte]int64
	conns []net.Conn
}

// startPGProxy listens on a free loopback port and forwards to target.
func startPGProxy(target string) (*pgProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &pgProxy{lis: lis, target: target, msgs: map[byte]int64{}}
	go p.serve()
	return p, nil
}

func (p *pgProxy) addr() string { return p.lis.Addr().String() }

// close stops listening and closes every connection.
func (p *pgProxy) close() {
	_ = p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// pgCounts is what a proxy counted.
type pgCounts struct {
	trips, xacts int64
	msgs         map[byte]int64
}

// counts returns what the proxy counted so far.
func (p *pgProxy) counts() pgCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pgCounts{trips: p.trips.Load(), xacts: p.xacts.Load(), msgs: maps.Clone(p.msgs)}
}

// minus is c less an earlier count.
func (c pgCounts) minus(d pgCounts) pgCounts {
	out := pgCounts{trips: c.trips - d.trips, xacts: c.xacts - d.xacts, msgs: map[byte]int64{}}
	for t, n := range c.msgs {
		out.msgs[t] = n - d.msgs[t]
	}
	return out
}

func (p *pgProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// forward copies one connection both ways. lastFromServer is whether the last bytes moved
// were the server's: the client's next bytes then start a round trip.
func (p *pgProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	var lastFromServer atomic.Bool
	lastFromServer.Store(true)
	go func() {
		backend := pgMessages{started: true}
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				lastFromServer.Store(true)
				for _, m := range backend.feed(buf[:n]) {
					if m.typ == 'Z' && m.first == 'I' {
						p.xacts.Add(1)
					}
				}
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = c.Close()
	}()
	var parser pgMessages
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if lastFromServer.Swap(false) {
				p.trips.Add(1)
			}
			if msgs := parser.feed(buf[:n]); len(msgs) > 0 {
				p.mu.Lock()
				for _, m := range msgs {
					p.msgs[m.typ]++
				}
				p.mu.Unlock()
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = up.Close()
}

// pgMessages splits one side of a PostgreSQL connection into messages: on the frontend's side
// first the untyped startup message (length, then body), then typed ones (type byte, length
// including itself, body); the backend's side is typed from the start. It keeps what it has
// not yet seen whole between feeds.
type pgMessages struct {
	started bool
	head    []byte // the header bytes of the message being read (up to 5)
	skip    int    // body bytes still to skip
	first   bool   // the next body byte is the first of the message's body
	typ     byte
}

// pgMessage is a message's type (0 for the startup message) and the first byte of its body
// (ReadyForQuery's transaction status: 'I' idle, 'T' in a transaction, 'E' failed).
type pgMessage struct{ typ, first byte }

// feed consumes b and returns the messages whose first body byte (or whole header, for an
// empty body) it completed.
func (m *pgMessages) feed(b []byte) []pgMessage {
	var out []pgMessage
	for len(b) > 0 {
		if m.skip > 0 {
			if m.first {
				out = append(out, pgMessage{m.typ, b[0]})
				m.first = false
			}
			k := min(m.skip, len(b))
			m.skip -= k
			b = b[k:]
			continue
		}
		hdr := 5
		if !m.started {
			hdr = 4
		}
		k := min(hdr-len(m.head), len(b))
		m.head = append(m.head, b[:k]...)
		b = b[k:]
		if len(m.head) < hdr {
			break
		}
		length := int(binary.BigEndian.Uint32(m.head[hdr-4:]))
		m.typ = 0
		if m.started {
			m.typ = m.head[0]
		}
		m.started = true
		m.head = m.head[:0]
		m.skip = max(length-4, 0)
		m.first = m.skip > 0
		if !m.first {
			out = append(out, pgMessage{m.typ, 0})
		}
	}
	return out
}
