package raftstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"go.etcd.io/bbolt"
)

// HistoryHead names a node's whole history: the number of records in its
// chain and the hash of the last one. Nodes that applied the same log have
// the same head; a head written down somewhere else (a ticket, another
// system) later proves the history up to it unchanged.
type HistoryHead struct {
	Records uint64 `json:"records"`
	Index   uint64 `json:"index"`
	Hash    string `json:"hash"`
}

// HistoryHead returns this node's history head.
func (s *Store) HistoryHead() HistoryHead { return s.fsm.hist.currentHead().public() }

func (h histHead) public() HistoryHead {
	return HistoryHead{Records: h.Seq, Index: h.Index, Hash: hex.EncodeToString(h.Hash[:])}
}

// HistoryReport is what VerifyHistory found.
type HistoryReport struct {
	Head    HistoryHead `json:"head"`
	Checked uint64      `json:"checked"`
	Dropped uint64      `json:"dropped"`
	// Problems lists the first problems found (at most maxProblems); empty
	// when the chain, every value and every drop check out.
	Problems []string `json:"problems"`
}

const (
	maxProblems = 20
	// verifyBatch is how many records one read transaction checks, so that
	// a long verification never holds the file's pages for long.
	verifyBatch = 8192
)

// VerifyHistory checks the whole history chain on this node: that every
// record's hash follows from the one before, that every value kept matches
// the hash its record carries, that a value is missing only where a drop is
// recorded, and that no row of an append-only table without a retention
// rule was dropped. It reads the store in steps and can take a while on a
// long history (about a second per few hundred thousand records).
func (s *Store) VerifyHistory(ctx context.Context) (HistoryReport, error) {
	// What this node applied so far, once the writer committed it.
	s.fsm.hist.waitCommitted(s.fsm.applied.Load(), historyWaitLimit)
	return s.fsm.hist.verify(ctx)
}

func (h *history) verify(ctx context.Context) (HistoryReport, error) {
	head := h.committedHead()
	rep := HistoryReport{Head: head.public(), Problems: []string{}}
	problem := func(format string, args ...any) {
		if len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		}
	}
	var prev [32]byte
	next := uint64(1)
	for next <= head.Seq {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		err := h.db.View(func(tx *bbolt.Tx) error {
			values, dropped := tx.Bucket(bucketValues), tx.Bucket(bucketDropped)
			c := tx.Bucket(bucketChain).Cursor()
			n := 0
			for k, raw := c.Seek(u64(next)); k != nil && n < verifyBatch && next <= head.Seq; k, raw = c.Next() {
				seq := binary.BigEndian.Uint64(k)
				if seq != next {
					problem("records %d to %d are missing from the chain", next, seq-1)
				}
				rec, err := decodeRecord(seq, raw)
				if err != nil {
					problem("%v", err)
					next, n = seq+1, n+1
					continue
				}
				if chainHash(prev, &rec) != rec.Hash {
					problem("record %d (%s %s): its hash does not follow from the record before it", seq, rec.Table, rec.ID)
				}
				prev = rec.Hash
				td, known := h.tables[rec.Table]
				d := dropped.Get(k)
				switch v := values.Get(k); {
				case !known || !td.history:
					problem("record %d is of table %q, which is no history table", seq, rec.Table)
				case d != nil && td.appendOnly && td.retain == nil:
					problem("record %d (%s %s) is dropped, but %s is append-only", seq, rec.Table, rec.ID, rec.Table)
				case v != nil && sha256.Sum256(v) != rec.ValueHash:
					problem("record %d (%s %s): its value does not match the hash in the chain", seq, rec.Table, rec.ID)
				case v == nil && d == nil:
					problem("record %d (%s %s): its value is missing and no drop is recorded", seq, rec.Table, rec.ID)
				}
				if d != nil {
					rep.Dropped++
				}
				rep.Checked++
				next, n = seq+1, n+1
			}
			if n == 0 {
				problem("records %d to %d are missing from the chain", next, head.Seq)
				next = head.Seq + 1
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("verify history: %w", err)
		}
	}
	if prev != head.Hash {
		problem("the chain ends at a hash other than the head recorded")
	}
	return rep, nil
}
