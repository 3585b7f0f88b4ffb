package index

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// compaction is the work Compact does a step at a time: runs to delete, then the merge under
// way. It lives in memory only: a merge cut short (Close, a crash, a failed step) leaves its
// output run unlisted, and runs whose blocks remain but that the dir does not list are found
// at the next Open and deleted.
type compaction struct {
	garbage []garbageRun
	merging *merge
}

type garbageRun struct {
	t   table
	run uint64
}

// merge is the merging of inputs (runs of one level of t, oldest first) into out.
type merge struct {
	t      table
	level  uint8
	inputs []mergeInput
	out    runWriter
	stored bool // a step was committed: the output run's number and blocks are in the file
}

// mergeInput is one run being merged: its entries after `after` are still to take; head
// holds the decoded rest of the block being read (ids copied, so it outlives the step).
type mergeInput struct {
	run     uint64
	after   runEntry
	started bool
	done    bool
	head    []runEntry
}

// Compact does one step of the background work that keeps lookups to a few runs: it deletes
// up to budget/128 blocks of runs no longer listed, or merges up to budget entries of fanout runs
// of one level into a run of the next, or starts such a merge. Each step is one transaction;
// runs being merged stay listed, and so answer lookups, until the step that lists the merged
// run, so lookups see every entry throughout. more says whether there is work left. Compact
// is meant for one goroutine (the ledger's indexer); calls are serialized.
func (x *Index) Compact(budget int) (more bool, err error) {
	if x.readOnly {
		return false, fmt.Errorf("compacting index: %w", ErrReadOnly)
	}
	budget = max(budget, 1)
	x.cmu.Lock()
	defer x.cmu.Unlock()
	c := &x.compaction
	if len(c.garbage) == 0 && c.merging == nil {
		var m *merge
		if err := x.db.View(func(tx *bolt.Tx) error {
			var err error
			m, err = pickMerge(tx)
			return err
		}); err != nil {
			return false, fmt.Errorf("compacting index: %w", err)
		}
		if m == nil {
			return false, nil
		}
		c.merging = m
	}
	var finished []garbageRun
	err = x.db.Update(func(tx *bolt.Tx) error {
		if len(c.garbage) > 0 {
			return c.collect(tx, max(budget/128, 1))
		}
		var err error
		finished, err = c.merging.step(tx, budget)
		return err
	})
	if err != nil {
		if m := c.merging; m != nil {
			// The merge starts again from the beginning; what its earlier steps stored goes.
			// (A number taken in a step that failed was not stored: a later run may take it.)
			if m.stored {
				c.garbage = append(c.garbage, garbageRun{m.t, m.out.run})
			}
			c.merging = nil
		}
		return true, fmt.Errorf("compacting index: %w", err)
	}
	if c.merging != nil {
		c.merging.stored = true
	}
	if finished != nil {
		c.merging = nil
		c.garbage = append(c.garbage, finished...)
	}
	return true, nil
}

// pickMerge returns a merge of the fanout oldest runs of the lowest level of any table that
// has fanout of them, or nil. The output run's number is taken when the merge's first step
// stores it.
func pickMerge(tx *bolt.Tx) (*merge, error) {
	for _, t := range tables {
		runs, infos, err := listRuns(tx, t)
		if err != nil {
			return nil, fmt.Errorf("listing the runs of %s: %w", t.name, err)
		}
		byLevel := map[uint8][]uint64{}
		best := -1
		for i, info := range infos {
			byLevel[info.level] = append(byLevel[info.level], runs[i])
			if len(byLevel[info.level]) == fanout && (best < 0 || int(info.level) < best) {
				best = int(info.level)
			}
		}
		if best >= 0 {
			m := &merge{t: t, level: uint8(best)}
			for _, run := range byLevel[uint8(best)][:fanout] {
				m.inputs = append(m.inputs, mergeInput{run: run})
			}
			return m, nil
		}
	}
	return nil, nil
}

// step merges up to budget entries into the output run. When the inputs are used up it
// lists the output and unlists the inputs, and returns them as garbage.
func (m *merge) step(tx *bolt.Tx, budget int) ([]garbageRun, error) {
	blocks := tx.Bucket(m.t.blocks)
	if m.out.run == 0 {
		run, err := nextRun(tx)
		if err != nil {
			return nil, err
		}
		m.out = runWriter{run: run}
	}
	for n := 0; n < budget; n++ {
		best := -1
		for i := range m.inputs {
			in := &m.inputs[i]
			if len(in.head) == 0 && !in.done {
				if err := in.load(blocks); err != nil {
					return nil, fmt.Errorf("merging run %d of %s: %w", in.run, m.t.name, err)
				}
			}
			if len(in.head) > 0 && (best < 0 || in.head[0].compare(m.inputs[best].head[0]) < 0) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		in := &m.inputs[best]
		e := in.head[0]
		in.head, in.after, in.started = in.head[1:], e, true
		if err := m.out.add(blocks, e); err != nil {
			return nil, err
		}
	}
	if err := m.out.flush(blocks); err != nil {
		return nil, err
	}
	for i := range m.inputs {
		if len(m.inputs[i].head) > 0 || !m.inputs[i].done {
			return nil, nil
		}
	}
	dir := tx.Bucket(m.t.dir)
	if err := putRun(dir, m.out.run, runInfo{level: m.level + 1, count: m.out.count}); err != nil {
		return nil, err
	}
	garbage := make([]garbageRun, 0, len(m.inputs))
	for _, in := range m.inputs {
		if err := dir.Delete(putUint64(in.run)); err != nil {
			return nil, fmt.Errorf("unlisting run %d: %w", in.run, err)
		}
		garbage = append(garbage, garbageRun{m.t, in.run})
	}
	return garbage, nil
}

// load decodes the next block of the input's run. head is loaded only once the block before
// is used up, so `after` is that block's last entry and the block after it holds only later
// ones. The cursor is made anew for each block: the merge writes into the same bucket, which
// moves cursors.
func (in *mergeInput) load(blocks *bolt.Bucket) error {
	from := runKey(in.run, 0, 0)
	if in.started {
		from = runKey(in.run, in.after.h, in.after.seq+1)
	}
	k, v := blocks.Cursor().Seek(from)
	if r, ok := keyRun(k); k == nil || !ok || r != in.run {
		in.done = true
		return nil
	}
	var head []runEntry
	blk := bytes.Clone(v) // the ids alias this copy: one allocation a block, not one an id
	err := walkRunBlock(blk, func(e runEntry) bool {
		head = append(head, e)
		return true
	})
	if err != nil {
		return err
	}
	if len(head) == 0 || in.started && head[0].compare(in.after) <= 0 {
		return fmt.Errorf("%w: block %x of run %d does not follow the block before it", ErrCorrupt, k, in.run)
	}
	in.head = head
	return nil
}

// collect deletes up to budget blocks of the first garbage run; a run whose blocks are all
// gone leaves the list.
func (c *compaction) collect(tx *bolt.Tx, budget int) error {
	g := c.garbage[0]
	blocks := tx.Bucket(g.t.blocks)
	var keys [][]byte
	cur := blocks.Cursor()
	for k, _ := cur.Seek(runKey(g.run, 0, 0)); k != nil && len(keys) < budget; k, _ = cur.Next() {
		if r, ok := keyRun(k); !ok || r != g.run {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := blocks.Delete(k); err != nil {
			return fmt.Errorf("deleting a block of run %d of %s: %w", g.run, g.t.name, err)
		}
	}
	if len(keys) < budget {
		c.garbage = c.garbage[1:] // set before the commit: a failed commit finds the rest at the next Open
	}
	return nil
}

// findGarbage lists the runs whose blocks remain but that no dir lists: the inputs of a
// merge whose deletion a Close or crash cut short, and the output of a merge cut short. It
// seeks once a run.
func findGarbage(tx *bolt.Tx) ([]garbageRun, error) {
	var out []garbageRun
	for _, t := range tables {
		dir := tx.Bucket(t.dir)
		c := tx.Bucket(t.blocks).Cursor()
		for k, _ := c.First(); k != nil; {
			run, ok := keyRun(k)
			if !ok {
				return nil, fmt.Errorf("%w: %s block key of %d bytes", ErrCorrupt, t.name, len(k))
			}
			if dir.Get(putUint64(run)) == nil {
				out = append(out, garbageRun{t, run})
			}
			k, _ = c.Seek(runKey(run+1, 0, 0))
		}
	}
	return out, nil
}

// Runs returns how many runs each lookup reads (serial and uid), and whether background work
// (a merge, or runs to delete) is left.
func (x *Index) Runs() (serial, uid int, pending bool, err error) {
	err = x.db.View(func(tx *bolt.Tx) error {
		s, _, err := listRuns(tx, tableSerial)
		if err != nil {
			return err
		}
		u, _, err := listRuns(tx, tableUID)
		serial, uid = len(s), len(u)
		return err
	})
	x.cmu.Lock()
	pending = len(x.compaction.garbage) > 0 || x.compaction.merging != nil
	x.cmu.Unlock()
	if err != nil {
		return 0, 0, false, fmt.Errorf("listing index runs: %w", err)
	}
	return serial, uid, pending, nil
}
