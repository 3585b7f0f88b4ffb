package ledger

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/index"
	"github.com/signet-pki/signet/server/ledger/record"
)

// request is one pending Append; it is answered on done exactly once with its outcome, after a
// lead message if the Append is made the batch writer first.
type request struct {
	rec  Record
	body record.Body // rec's encoding but Seq, Time and PrevHash, made by the caller
	line []byte      // the sealed record's line, "\n" included, once in a batch
	done chan result
}

type result struct {
	rec  Record
	err  error
	lead bool // not an outcome: the receiver now writes the next batch
}

// Append stores r and returns it with Seq, Time, PrevHash and Hash filled, only after the
// record's bytes are fsynced. Caller-set values of those four fields are ignored. r must have
// a valid Decision and Signer; an Issued record needs Certificate and Serial, a Refused one a
// Reason (ErrInvalidRecord otherwise). Strings are made valid UTF-8 before hashing.
//
// Concurrent Appends are group-committed, led by the callers themselves: an Append that finds
// no batch being written writes one, with every record waiting (up to MaxBatch), one write
// and one fsync (one of each per MiB of records), and answers them all; records that arrive
// meanwhile wait, and the first of them writes the next batch. A lone caller therefore writes
// and syncs its own record, with no hand-off to another goroutine and back. A record whose
// line would exceed 1 MiB is refused (ErrInvalidRecord). If the write or the fsync (or the
// extension of the free space before it) fails, every record of the batch fails with an error
// wrapping ErrUnavailable, and so does every later Append until the ledger recovers (fail
// closed: nothing is written after a batch that may be partial; recover.go says how it
// recovers, by itself where it can). ctx bounds only the wait to
// join a batch (a record still queued behind a batch being written is withdrawn when ctx
// ends); once the record is in a batch, Append waits for the outcome, so a nil error always
// means "durably recorded" and an error after that means "not acknowledged".
func (l *Ledger) Append(ctx context.Context, r Record) (Record, error) {
	if err := r.Validate(); err != nil {
		return Record{}, fmt.Errorf("appending to ledger %s: %w", l.dir, err)
	}
	if err := ctx.Err(); err != nil {
		return Record{}, fmt.Errorf("appending to ledger %s: %w", l.dir, err)
	}
	r.Normalize()
	req := &request{rec: r, body: r.EncodeBody(), done: make(chan result, 1)}
	l.qmu.Lock()
	if l.closed {
		l.qmu.Unlock()
		return Record{}, fmt.Errorf("appending to ledger %s: %w: %w", l.dir, ErrUnavailable, ErrClosed)
	}
	l.pending = append(l.pending, req)
	lead := !l.writing
	l.writing = true
	l.qmu.Unlock()
	if !lead {
		var res result
		select {
		case res = <-req.done:
		case <-ctx.Done():
			if l.withdraw(req) {
				return Record{}, fmt.Errorf("appending to ledger %s: %w", l.dir, ctx.Err())
			}
			res = <-req.done // already in a batch, or made the leader: see it through
		}
		if !res.lead {
			return res.rec, res.err
		}
	}
	l.writeBatch(!lead)
	res := <-req.done
	return res.rec, res.err
}

// withdraw takes req out of the queue if no batch has taken it and it has not been made the
// leader, and reports whether it did.
func (l *Ledger) withdraw(req *request) bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if len(req.done) > 0 {
		return false
	}
	for i, p := range l.pending {
		if p == req {
			l.pending = slices.Delete(l.pending, i, i+1)
			return true
		}
	}
	return false
}

// writeBatch is run by the Append that leads: it commits the records waiting, then passes the
// lead to the first record that arrived meanwhile, or, with none (or the ledger closing),
// ends the writing.
//
// A leader that was passed the lead (promoted: batches are following one another, so there
// is load) first yields once, so that callers already runnable (about to Append) join its
// batch. Without that, under load each batch carried a few records and batches were fsynced
// back to back; a goroutine in fsync keeps its P until sysmon retakes it, which on 2 cores
// idled up to half the CPU while dozens of issuances were runnable. An Append that found the
// ledger idle writes at once: runtime.Gosched wakes another thread to look for work, which
// for a lone caller was pure cost (about 5 % of the CPU of a serial issuance, perf).
func (l *Ledger) writeBatch(promoted bool) {
	if promoted {
		runtime.Gosched()
	}
	l.qmu.Lock()
	n := min(len(l.pending), l.opts.MaxBatch)
	batch := append(l.batch[:0], l.pending[:n]...)
	l.pending = slices.Delete(l.pending, 0, n) // clears the tail: no answered request stays reachable
	l.qmu.Unlock()
	committed := false
	defer func() {
		if !committed {
			l.writerPanicked(batch)
		}
	}()
	l.buf = l.commit(batch, l.buf[:0])
	committed = true
	clear(batch)
	l.batch = batch

	l.release()
}

// writerPanicked is run, as the writer, while a panic in commit (a bug, or a File that panics)
// unwinds the Append that led the batch: the panic goes on up to that caller, and the ledger
// does not stay stuck. It closes the ledger for appends as a failed write does (what the write
// may have left after the last acknowledged record is zeroed by the recovery, which reopens the
// ledger), answers every request of the batch not answered yet with ErrUnavailable, and ends
// the writer's turn, so that waiting and later Appends are answered.
func (l *Ledger) writerPanicked(batch []*request) {
	l.dirty = max(l.dirty, min(l.off+maxWrite, l.end))
	err := fmt.Errorf("appending to ledger %s: %w: the writer failed (a panic) while writing a batch", l.dir, ErrUnavailable)
	l.setFailed(err)
	for _, req := range batch {
		select {
		case req.done <- result{err: err}:
		default: // answered already
		}
	}
	l.release()
}

// release ends the writer's turn: it passes the lead to the first record waiting, or, with
// none (or the ledger closing), ends the writing.
func (l *Ledger) release() {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	switch {
	case len(l.pending) == 0:
		l.writing = false
	case l.closed:
		for _, req := range l.pending {
			req.done <- result{err: fmt.Errorf("appending to ledger %s: %w: %w", l.dir, ErrUnavailable, ErrClosed)}
		}
		clear(l.pending)
		l.pending = l.pending[:0]
		l.writing = false
	default:
		l.pending[0].done <- result{lead: true}
		return
	}
	l.idle.Broadcast()
}

// commit seals the batch's records onto the chain, writes them with one write (several for a
// batch of more than maxWrite bytes), syncs once per write and answers every request. It
// returns buf for reuse.
func (l *Ledger) commit(batch []*request, buf []byte) []byte {
	if err := l.Err(); err != nil {
		l.answerAll(batch, fmt.Errorf("appending to ledger %s: closed for appends after a storage fault: %w", l.dir, err))
		return buf
	}
	seq, prev := l.seq, l.prevHash
	group := make([]*request, 0, len(batch))
	for i, req := range batch {
		r := req.rec
		r.Seq, r.Time, r.PrevHash = seq+1, l.opts.Clock.Now().UTC().Round(0), prev
		line, err := r.SealBody(req.body)
		if err == nil && len(line) > maxWrite {
			err = fmt.Errorf("record %d is %d bytes long, more than the %d a ledger line may have", r.Seq, len(line), maxWrite)
		}
		if err != nil {
			req.done <- result{err: fmt.Errorf("appending to ledger %s: %w: %w", l.dir, ErrInvalidRecord, err)}
			continue
		}
		if len(buf)+len(line) > maxWrite {
			if !l.flush(group, buf) {
				l.answerAll(batch[i:], fmt.Errorf("appending to ledger %s: %w", l.dir, l.Err()))
				return buf
			}
			group, buf = group[:0], buf[:0]
		}
		buf = append(buf, line...)
		seq, prev = r.Seq, r.Hash
		req.rec, req.line = r, line
		group = append(group, req)
	}
	if len(group) > 0 {
		l.flush(group, buf)
	}
	return buf
}

// flush writes and syncs the lines in buf of the sealed records of group, moves the chain
// past them and answers them. On failure it closes the ledger for appends, answers group with
// the error and returns false.
func (l *Ledger) flush(group []*request, buf []byte) bool {
	if err := l.writeAndSync(buf); err != nil {
		l.dirty, l.retry = max(l.dirty, l.off+int64(len(buf))), int64(len(buf))
		l.setFailed(err)
		l.answerAll(group, fmt.Errorf("appending to ledger %s: %w", l.dir, err))
		return false
	}
	last := group[len(group)-1].rec
	start := l.off - int64(len(buf))
	entries := make([]index.Entry, 0, len(group))
	for _, req := range group {
		line := req.line[:len(req.line)-1]
		if _, err := l.tree.AppendHash(ledgerproof.LeafHash(line)); err != nil {
			// Lines are sealed records: never empty, never holding a newline, at most maxWrite.
			panic(fmt.Sprintf("ledger: a sealed record is not a tree leaf: %v", err))
		}
		entries = append(entries, entryOf(l.seg, start, req.rec, line))
		start += int64(len(req.line))
	}
	l.indexer.add(entries...)
	l.mu.Lock()
	l.seq, l.prevHash = last.Seq, last.Hash
	l.mu.Unlock()
	l.records.Add(uint64(len(group)))
	if l.opts.Appended != nil {
		l.opts.Appended()
	}
	for _, req := range group {
		req.done <- result{rec: req.rec}
	}
	return true
}

// writeAndSync writes buf into the free space at the write offset, extending the segment first
// if it would not fit, and fsyncs it; any failure wraps ErrUnavailable and the cause.
func (l *Ledger) writeAndSync(buf []byte) error {
	if l.off > 0 && l.off+int64(len(buf)) > l.opts.SegmentSize {
		if err := l.rotate(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, writeError(l.dir, err))
		}
	}
	if err := l.reserve(int64(len(buf))); err != nil {
		return err
	}
	l.batches.Add(1)
	if _, err := l.w.WriteAt(buf, l.off); err != nil {
		return fmt.Errorf("%w: writing %s: %w", ErrUnavailable, l.path, writeError(l.dir, err))
	}
	l.syncs.Add(1)
	if err := l.w.Sync(); err != nil {
		return fmt.Errorf("%w: syncing %s: %w", ErrUnavailable, l.path, writeError(l.dir, err))
	}
	// The records go to the file at the segment's path (see recover.go).
	if err := l.checkAfterSync(l.off + int64(len(buf))); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	l.off += int64(len(buf))
	return nil
}

func (l *Ledger) answerAll(batch []*request, err error) {
	for _, req := range batch {
		req.done <- result{err: err}
	}
}
