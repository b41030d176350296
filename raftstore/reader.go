package raftstore

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Reader is a consistent read view of the store at one point of the log. A
// Reader never changes; take a new one to see later writes. Values returned
// from it are copies of the stored rows, but slices and maps inside them are
// shared with the store: never modify them, clone before changing.
type Reader struct {
	tx *memdb.Txn
	ws memdb.WatchSet
	// index is the last command applied when the view was taken (the view
	// may include a little more, never less).
	index uint64
	// hist is the node's history store, read as the view has it (nil
	// inside Apply: the tables' rules read memdb only).
	hist *history
}

// Wait blocks until anything this reader has looked at changes, or ctx ends.
// Blocking queries take a Reader, read, Wait, and read again with a new
// Reader. A reader that has looked at nothing waits for ctx.
func (r *Reader) Wait(ctx context.Context) error {
	if len(r.ws) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return r.ws.WatchCtx(ctx)
}

func (r *Reader) track(ch <-chan struct{}) {
	if r.ws == nil {
		r.ws = memdb.NewWatchSet()
	}
	r.ws.Add(ch)
}

// TableIndex returns the Raft index of the last command that wrote to the
// table, for CheckTable.
func (r *Reader) TableIndex(table Def) uint64 { return tableIndexOf(r.tx, table.TableName()) }

// Item is a row value with its metadata.
type Item[T any] struct {
	Value T
	Meta  Meta
}

// Get returns the row with the given ID.
func (t *Table[T]) Get(r *Reader, id string) (T, Meta, bool) {
	return t.First(r, "id", id)
}

// First returns the first row whose index key equals key.
func (t *Table[T]) First(r *Reader, index, key string) (T, Meta, bool) {
	if t.History {
		return histFirst(r, t, index, key)
	}
	ch, raw, err := r.tx.FirstWatch(t.Name, index, key)
	if err != nil {
		panic(fmt.Sprintf("raftstore: %s.%s: %v", t.Name, index, err))
	}
	r.track(ch)
	if raw == nil {
		var zero T
		return zero, Meta{}, false
	}
	rw := raw.(*row)
	return *rw.Value.(*T), rw.Meta, true
}

// Query selects rows of a table. The zero Query lists every row by ID.
type Query struct {
	// Index and Key select rows whose index key equals Key (or, with Prefix,
	// starts with it). Without Index the ID index is used.
	Index  string
	Key    string
	Prefix bool
	// After and Before bound the IDs returned (exclusive), for cursors over
	// the ID index. Reverse walks from the highest ID down.
	After, Before string
	Reverse       bool
	// Limit caps the rows returned; 0 means no cap.
	Limit int
	// Filter, if set, keeps only rows it returns true for.
	Filter func(any) bool
	// Until, if set, ends the walk at the first row it returns true for
	// (that row excluded): a walk in index order that knows nothing after
	// some row can match (the due deliveries, by time) stops there.
	Until func(any) bool
	// Where, on a history table only, selects rows by several indexes at
	// once: a row is selected when, for every group, it matches at least
	// one Match of the group. Rows come by ID (After, Before and Reverse
	// apply), and which match is decided from the indexes alone, so Filter
	// sees only rows that matched. Index and Key are then unused.
	Where [][]Match
}

// List returns the rows a query selects, in index order (or reverse), and
// whether more rows matched beyond Limit.
func (t *Table[T]) List(r *Reader, q Query) (items []Item[T], more bool) {
	if t.History {
		return histList(r, t, q)
	}
	if q.Where != nil {
		panic(fmt.Sprintf("raftstore: %s: Query.Where is for history tables", t.Name))
	}
	it := t.iterator(r, q)
	byID := q.Index == "" || q.Index == "id"
	for raw := it.Next(); raw != nil; raw = it.Next() {
		rw := raw.(*row)
		if q.After != "" && rw.ID <= q.After {
			if byID && q.Reverse {
				break // IDs only fall from here
			}
			continue
		}
		if q.Before != "" && rw.ID >= q.Before {
			if byID && !q.Reverse {
				break // IDs only rise from here
			}
			continue
		}
		v := rw.Value.(*T)
		if q.Until != nil && q.Until(v) {
			return items, false
		}
		if q.Filter != nil && !q.Filter(v) {
			continue
		}
		if q.Limit > 0 && len(items) == q.Limit {
			return items, true
		}
		items = append(items, Item[T]{Value: *v, Meta: rw.Meta})
	}
	return items, false
}

// Count returns the number of rows in the table.
func (t *Table[T]) Count(r *Reader) int {
	if t.History {
		return histCount(r, t.Name)
	}
	it := t.iterator(r, Query{})
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return n
}

func (t *Table[T]) iterator(r *Reader, q Query) memdb.ResultIterator {
	var (
		it  memdb.ResultIterator
		err error
	)
	switch {
	case q.Index != "" && q.Index != "id":
		index := q.Index
		if q.Prefix {
			index += "_prefix"
		}
		if q.Reverse {
			it, err = r.tx.GetReverse(t.Name, index, q.Key)
		} else {
			it, err = r.tx.Get(t.Name, index, q.Key)
		}
	case q.Reverse && q.Before != "":
		it, err = r.tx.ReverseLowerBound(t.Name, "id", q.Before)
	case q.Reverse:
		it, err = r.tx.GetReverse(t.Name, "id")
	case q.After != "":
		it, err = r.tx.LowerBound(t.Name, "id", q.After)
	default:
		it, err = r.tx.Get(t.Name, "id")
	}
	if err != nil {
		panic(fmt.Sprintf("raftstore: list %s: %v", t.Name, err))
	}
	r.track(it.WatchCh())
	return it
}

// Sweeper is what Sweep needs of a store.
type Sweeper interface {
	Update(ctx context.Context, build Build) (uint64, error)
}

var _ Sweeper = (*Store)(nil)

// Sweep deletes up to max rows that drop selects among those within
// selects (the zero Query: the whole table, by ID), in one write, each only
// if unchanged since it was read; a row that changed meanwhile is judged
// again on the newer view. It returns how many it deleted. Housekeeping
// loops (expiries) call it; it is never for append-only tables.
func (t *Table[T]) Sweep(ctx context.Context, s Sweeper, within Query, drop func(*T) bool, max int) (int, error) {
	n := 0
	_, err := s.Update(ctx, func(r *Reader) ([]Op, error) {
		q := within
		q.Filter, q.Limit = func(v any) bool { return drop(v.(*T)) }, max
		items, _ := t.List(r, q)
		ops := make([]Op, len(items))
		for i, it := range items {
			ops[i] = t.DeleteIf(t.ID(&it.Value), it.Meta.ModifyIndex)
		}
		n = len(ops)
		return ops, nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", t.Name, err)
	}
	return n, nil
}
