package raftstore

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/svchost/svc/internal/errcode"
)

// histStage collects the history writes of one command while its
// operations are checked; they reach the batch's history transaction only
// once the whole command is accepted.
type histStage struct {
	h      *history
	writes []histWrite
	// staged maps a row to its write in writes.
	staged map[[2]string]int
}

// row returns the row as the command sees it so far: committed, or
// inserted or dropped by an earlier operation of the command.
func (s *histStage) row(index uint64, table, id string) (histRef, bool) {
	if i, ok := s.staged[[2]string{table, id}]; ok {
		w := s.writes[i]
		return histRef{index: index}, w.value != nil
	}
	return s.h.lookup(table, id)
}

func (s *histStage) stage(w histWrite) {
	if s.staged == nil {
		s.staged = map[[2]string]int{}
	}
	k := [2]string{w.table, w.id}
	if i, ok := s.staged[k]; ok {
		// A drop of a row this command inserted: neither happens.
		s.writes = append(s.writes[:i], s.writes[i+1:]...)
		delete(s.staged, k)
		for kk, j := range s.staged {
			if j > i {
				s.staged[kk] = j - 1
			}
		}
		return
	}
	s.staged[k] = len(s.writes)
	s.writes = append(s.writes, w)
}

// apply checks and stages one operation on a history table, with the same
// refusals an operation on a memdb table gets.
func (s *histStage) apply(tx *memdb.Txn, index uint64, i int, td tableDef, op Op) *TxnError {
	if op.Kind == opCheck && op.ID == "" {
		if got := tableIndexOf(tx, td.name); got != *op.If {
			return refuse(ReasonStale, i, td.name, "", errcode.StateInvalid,
				"%s changed concurrently (index %d, expected %d); retry", td.name, got, *op.If)
		}
		return nil
	}
	ref, exists := s.row(index, td.name, op.ID)
	var cur *row
	if exists {
		cur = &row{ID: op.ID, Meta: Meta{CreateIndex: ref.index, ModifyIndex: ref.index}}
	}
	switch op.Kind {
	case opCheck:
		return checkIf(i, td.name, op.ID, cur, *op.If)

	case opPut:
		return refuse(ReasonAppendOnly, i, td.name, op.ID, errcode.StateInvalid,
			"%s keeps history: %s is written once and cannot be replaced", td.name, op.ID)

	case opInsert:
		if exists {
			reason := ReasonExists
			if td.appendOnly {
				reason = ReasonAppendOnly
			}
			return refuse(reason, i, td.name, op.ID, errcode.StateInvalid, "%s %s already exists", td.name, op.ID)
		}
		v, err := td.decode(op.Value)
		if err != nil {
			panic(fmt.Sprintf("raftstore: undecodable %s value at index %d: %v", td.name, index, err))
		}
		s.stage(histWrite{table: td.name, id: op.ID, value: op.Value, v: v})
		return nil

	case opDelete:
		if td.appendOnly {
			return refuse(ReasonAppendOnly, i, td.name, op.ID, errcode.StateInvalid,
				"%s is append-only: %s cannot be deleted", td.name, op.ID)
		}
		if !exists {
			return refuse(ReasonNotFound, i, td.name, op.ID, errcode.NotFound, "no %s %s", td.name, op.ID)
		}
		if op.If != nil {
			if err := checkIf(i, td.name, op.ID, cur, *op.If); err != nil {
				return err
			}
		}
		s.stage(histWrite{table: td.name, id: op.ID, ref: ref})
		return nil
	}
	panic(fmt.Sprintf("raftstore: unknown operation %q at index %d", op.Kind, index))
}

// retainHistory drops rows of a history table by the retention command,
// each only if the table's Retain rule allows it.
func (f *fsm) retainHistory(tx *memdb.Txn, index uint64, td tableDef, ids []string) any {
	s := &histStage{h: f.hist}
	r := &Reader{tx: tx}
	for i, id := range ids {
		ref, ok := s.row(index, td.name, id)
		if !ok {
			return refuse(ReasonNotFound, i, td.name, id, errcode.NotFound, "no %s %s", td.name, id)
		}
		if td.retain == nil {
			return refuse(ReasonRejected, i, td.name, id, errcode.StateInvalid,
				"%s has no retention rule: its rows are never removed", td.name)
		}
		v, err := td.decode(f.hist.valueOf(td.name, id, ref))
		if err != nil {
			panic(fmt.Sprintf("raftstore: history record %d of %s: %v", ref.seq, td.name, err))
		}
		if err := td.retain(r, v, Meta{CreateIndex: ref.index, ModifyIndex: ref.index}); err != nil {
			return hookError(ReasonRejected, i, td.name, id, err)
		}
		s.stage(histWrite{table: td.name, id: id, ref: ref})
	}
	f.bumpIndexes(tx, index, []touched{{table: td.name}})
	f.hist.stage(index, s.writes)
	tx.Commit()
	return nil
}
