package raftstore

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// The FSM does not wait for the disk to apply history writes. It decides
// them (refusals, the chain's order and hashes) as it applies each command,
// keeps the rows it wrote in an overlay until they are committed, and at the
// end of each batch hands the batch's writes to the writer, a goroutine
// that commits (and syncs) whatever batches have queued in one bbolt
// transaction. So a write answers after Raft's log sync and the memory
// apply, as before history tables, while the history file takes one commit
// per group of batches, however many writers there are.
//
// Nothing is lost on a crash: the Raft log still holds every command after
// the last snapshot, whose restore undoes what the history file has beyond
// it and replays the rest, and a snapshot is complete only once history is
// committed through its index (Persist waits). Readers of a view that
// includes a history table's write wait until the writer committed it
// (histView); the FSM's own checks read the overlay first, then the file.

// writerQueue is how many batches may wait for the writer; applying waits
// when it is full, so a stalled disk holds back applying rather than filling
// memory.
const writerQueue = 256

// writerGroup bounds the batches one commit of the writer takes, and
// writerDelay how long it waits for more after the first: a history commit
// syncs the disk, as Raft's log does for every write, and the two contend
// for it, so the writer takes a few writes' worth at a time (a read of
// history a write made waits for the commit: a few milliseconds).
const (
	writerGroup = 256
	writerDelay = 5 * time.Millisecond
)

// histOp is one history write of an applied command, as decided by the FSM:
// a record to append, or a drop.
type histOp struct {
	table, id string
	keys      []indexKey
	// An insert's record and value.
	rec   histRecord
	value []byte
	// A drop: the record dropped, by the command at at.
	drop bool
	ref  histRef
	at   uint64
}

// histBatch is the history writes of one batch of commands, applied through
// index through, after which the chain's head is head.
type histBatch struct {
	through uint64
	ops     []histOp
	head    histHead
}

// pendingRow is a row as applied but not yet committed.
type pendingRow struct {
	ref     histRef
	value   []byte // nil when dropped
	dropped bool
	// through is the index of the last command that wrote it; the entry
	// leaves the overlay once the writer committed that far.
	through uint64
}

// lookup finds a row of a history table as applied.
func (h *history) lookup(table, id string) (histRef, bool) {
	h.mu.Lock()
	p, ok := h.overlay[[2]string{table, id}]
	h.mu.Unlock()
	if ok {
		return p.ref, !p.dropped
	}
	var (
		ref   histRef
		found bool
	)
	// The writer removes a row from the overlay only after committing it,
	// so a miss there finds it committed here.
	h.view(func(tx *bbolt.Tx) { ref, found = lookupRow(tx, table, id) })
	return ref, found
}

// valueOf returns the value of a row as applied.
func (h *history) valueOf(table, id string, ref histRef) []byte {
	h.mu.Lock()
	if p := h.overlay[[2]string{table, id}]; p != nil && p.ref == ref && p.value != nil {
		h.mu.Unlock()
		return p.value
	}
	h.mu.Unlock()
	var v []byte
	h.view(func(tx *bbolt.Tx) {
		if raw := tx.Bucket(bucketValues).Get(u64(ref.seq)); raw != nil {
			v = append([]byte(nil), raw...)
		}
	})
	if v == nil {
		panic(fmt.Sprintf("raftstore: history record %d of %s has no value", ref.seq, table))
	}
	return v
}

func (h *history) view(fn func(tx *bbolt.Tx)) {
	if err := h.db.View(func(tx *bbolt.Tx) error { fn(tx); return nil }); err != nil {
		panic(fmt.Sprintf("raftstore: read history: %v", err))
	}
}

// stage applies the history writes of a command accepted at index: inserts
// chained by table and ID (so the chain does not depend on the order in
// which the command lists them), then drops.
func (h *history) stage(index uint64, ws []histWrite) {
	var inserts, drops []histWrite
	for _, w := range ws {
		if w.value != nil {
			inserts = append(inserts, w)
		} else {
			drops = append(drops, w)
		}
	}
	sortWrites(inserts)
	for i, w := range drops {
		// The keys to remove come from the value, before the lock.
		v, err := h.tables[w.table].decode(h.valueOf(w.table, w.id, w.ref))
		if err != nil {
			panic(fmt.Sprintf("raftstore: history record %d of %s: %v", w.ref.seq, w.table, err))
		}
		drops[i].v = v
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range inserts {
		rec := nextRecord(h.pending, index, w.table, w.id, w.value)
		h.pending = histHead{Seq: rec.Seq, Index: index, Hash: rec.Hash}
		h.ops = append(h.ops, histOp{table: w.table, id: w.id, keys: h.tables[w.table].keys(w.v), rec: rec, value: w.value})
		h.overlay[[2]string{w.table, w.id}] = &pendingRow{ref: histRef{seq: rec.Seq, index: index}, value: w.value, through: index}
	}
	for _, w := range drops {
		h.ops = append(h.ops, histOp{table: w.table, id: w.id, keys: h.tables[w.table].keys(w.v), drop: true, ref: w.ref, at: index})
		h.overlay[[2]string{w.table, w.id}] = &pendingRow{ref: w.ref, dropped: true, through: index}
	}
}

// flush hands the writes of the batch applied through index through to the
// writer. A batch without history writes, while nothing is pending, counts
// as committed at once.
func (h *history) flush(through uint64) {
	h.mu.Lock()
	if len(h.ops) == 0 && h.committed >= h.enqueued {
		h.committed, h.enqueued = through, through
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		return
	}
	b := histBatch{through: through, ops: h.ops, head: h.pending}
	h.ops, h.enqueued = nil, through
	h.mu.Unlock()
	h.queue <- b
}

// write is the writer: it commits the batches queued, a group at a time.
func (h *history) write() {
	defer close(h.stopped)
	delay := time.NewTimer(writerDelay)
	for b := range h.queue {
		group := []histBatch{b}
		delay.Reset(writerDelay)
	more:
		for len(group) < writerGroup {
			select {
			case nb, ok := <-h.queue:
				if !ok {
					break more
				}
				group = append(group, nb)
			case <-delay.C:
				break more
			}
		}
		h.commitGroup(group)
	}
}

func (h *history) commitGroup(group []histBatch) {
	last := group[len(group)-1]
	err := h.db.Update(func(tx *bbolt.Tx) error {
		t := &histTx{h: h, tx: tx, head: last.head}
		for _, b := range group {
			for _, op := range b.ops {
				if op.drop {
					t.drop(op.at, op.table, op.id, op.ref, op.keys)
				} else {
					t.insertRecord(op.rec, op.value, op.keys)
				}
			}
		}
		t.compact(h.snapshotted.Load())
		return tx.Bucket(bucketMeta).Put(keyHead, last.head.encode())
	})
	if err != nil {
		// A node that cannot write its history must stop, as one that
		// cannot write its log does.
		panic(fmt.Sprintf("raftstore: commit history: %v", err))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.head = last.head
	h.committed = max(h.committed, last.through)
	for _, b := range group {
		for _, op := range b.ops {
			k := [2]string{op.table, op.id}
			if p := h.overlay[k]; p != nil && p.through <= last.through {
				delete(h.overlay, k)
			}
		}
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// drain waits until the writer committed everything it was handed (the
// FSM's goroutine: nothing is handed meanwhile).
func (h *history) drain() {
	h.mu.Lock()
	i := h.enqueued
	h.mu.Unlock()
	h.waitCommitted(i, 0)
}
