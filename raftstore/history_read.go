package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"go.etcd.io/bbolt"
)

// Match is one condition of Query.Where: rows whose key in Index is Key (or,
// with Prefix, starts with it).
type Match struct {
	Index  string
	Key    string
	Prefix bool
}

// histView runs fn on the history store as the reader's view has it: with
// the records of the table that view includes (bound: the table's last
// write in the view) committed.
func (r *Reader) histView(table string, fn func(tx *bbolt.Tx, bound uint64)) {
	if r.hist == nil {
		panic(fmt.Sprintf("raftstore: %s is a history table, which a table's Validate, Retain or Invariant rule cannot read", table))
	}
	ch, raw, err := r.tx.FirstWatch(indexTable, "id", table)
	if err != nil {
		panic(fmt.Sprintf("raftstore: %s index: %v", table, err))
	}
	r.track(ch)
	if raw == nil {
		return // never written
	}
	bound := raw.(*tableIndex).Index
	r.hist.waitCommitted(bound, historyWaitLimit)
	if err := r.hist.db.View(func(tx *bbolt.Tx) error { fn(tx, bound); return nil }); err != nil {
		panic(fmt.Sprintf("raftstore: read history of %s: %v", table, err))
	}
}

// histValue returns a record's value, or nil for a value not on this node
// (a row being caught up; see restore).
func histValue(tx *bbolt.Tx, seq uint64) []byte {
	return tx.Bucket(bucketValues).Get(u64(seq))
}

func decodeInto[T any](table string, raw []byte) T {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		panic(fmt.Sprintf("raftstore: history row of %s: %v", table, err))
	}
	return v
}

func refMeta(ref histRef) Meta { return Meta{CreateIndex: ref.index, ModifyIndex: ref.index} }

// histFirst is Table.First for a history table: index "id", an index name,
// or an index name with "_prefix".
func histFirst[T any](r *Reader, t *Table[T], index, key string) (v T, m Meta, ok bool) {
	r.histView(t.Name, func(tx *bbolt.Tx, bound uint64) {
		if index == "id" {
			if ref, found := lookupRow(tx, t.Name, key); found && ref.index <= bound {
				if raw := histValue(tx, ref.seq); raw != nil {
					v, m, ok = decodeInto[T](t.Name, raw), refMeta(ref), true
				}
			}
			return
		}
		prefix := strings.HasSuffix(index, "_prefix")
		name := strings.TrimSuffix(index, "_prefix")
		p := []byte(key)
		if !prefix {
			p = append(p, 0)
		}
		c := newKeyCursor(tx, indexBucket(t.Name, name), p, false, bound)
		for id, ref, found := c.seek(nil, false); found; id, ref, found = c.seek(id, false) {
			if raw := histValue(tx, ref.seq); raw != nil {
				v, m, ok = decodeInto[T](t.Name, raw), refMeta(ref), true
				return
			}
		}
	})
	return v, m, ok
}

// histList is Table.List for a history table.
func histList[T any](r *Reader, t *Table[T], q Query) (items []Item[T], more bool) {
	r.histView(t.Name, func(tx *bbolt.Tx, bound uint64) {
		var (
			c    cursor
			byID = true
		)
		switch {
		case q.Where != nil:
			c = newWhereCursor(tx, t.Name, q.Where, q.Reverse, bound)
		case q.Index != "" && q.Index != "id":
			p := []byte(q.Key)
			if !q.Prefix {
				p = append(p, 0)
			}
			c = newRangeCursor(tx, indexBucket(t.Name, q.Index), p, q.Reverse, bound)
			byID = false
		default:
			c = newKeyCursor(tx, rowsBucket(t.Name), nil, q.Reverse, bound)
		}
		// The ID walks seek to the cursor bound they start from and stop at
		// the other; an index walk in key order filters on both.
		var pos []byte
		if byID && q.Reverse {
			pos = []byte(q.Before)
		} else if byID {
			pos = []byte(q.After)
		}
		after, before := []byte(q.After), []byte(q.Before)
		for {
			id, ref, ok := c.seek(pos, false)
			if !ok {
				return
			}
			pos = id
			if len(after) > 0 && bytes.Compare(id, after) <= 0 || len(before) > 0 && bytes.Compare(id, before) >= 0 {
				if byID {
					return
				}
				continue
			}
			raw := histValue(tx, ref.seq)
			if raw == nil {
				continue
			}
			v := decodeInto[T](t.Name, raw)
			if q.Until != nil && q.Until(&v) {
				return
			}
			if q.Filter != nil && !q.Filter(&v) {
				continue
			}
			if q.Limit > 0 && len(items) == q.Limit {
				more = true
				return
			}
			items = append(items, Item[T]{Value: v, Meta: refMeta(ref)})
		}
	})
	return items, more
}

// histCount is Table.Count for a history table.
func histCount(r *Reader, table string) int {
	n := 0
	r.histView(table, func(tx *bbolt.Tx, _ uint64) {
		if b := tx.Bucket(bucketMeta).Get(countKey(table)); b != nil {
			n = int(decodeU64(b))
		}
	})
	return n
}

func decodeU64(b []byte) uint64 {
	if len(b) != 8 {
		panic(fmt.Sprintf("raftstore: history counter of %d bytes", len(b)))
	}
	return binary.BigEndian.Uint64(b)
}

// A cursor walks rows in one direction. seek returns the first row beyond
// id in its direction (at id too, with inclusive); from an empty id it
// starts at the beginning. Rows a view does not include are skipped. The
// IDs it returns are bbolt's memory, valid while the transaction is open:
// the walks compare them without copying.
type cursor interface {
	seek(id []byte, inclusive bool) ([]byte, histRef, bool)
}

// walk steps through the entries of a bucket under one prefix, in one
// direction, skipping those a view does not include.
type walk struct {
	c       *bbolt.Cursor
	prefix  []byte
	reverse bool
	bound   uint64
}

func newWalk(tx *bbolt.Tx, bucket, prefix []byte, reverse bool, bound uint64) walk {
	b := tx.Bucket(bucket)
	if b == nil {
		panic(fmt.Sprintf("raftstore: no history bucket %q", bucket))
	}
	return walk{c: b.Cursor(), prefix: prefix, reverse: reverse, bound: bound}
}

func (w *walk) step() ([]byte, []byte) {
	if w.reverse {
		return w.c.Prev()
	}
	return w.c.Next()
}

// from returns the first entry from key on (key included) that is under the
// prefix and in the view, with its reference.
func (w *walk) from(key, val []byte) ([]byte, histRef, bool) {
	for ; key != nil && bytes.HasPrefix(key, w.prefix); key, val = w.step() {
		if ref := decodeRef(val); ref.index <= w.bound {
			return key, ref, true
		}
	}
	return nil, histRef{}, false
}

// last positions the cursor on the last entry before target (nil: the end).
func (w *walk) last(target []byte) ([]byte, []byte) {
	if target == nil {
		return w.c.Last()
	}
	if key, _ := w.c.Seek(target); key == nil {
		return w.c.Last()
	}
	return w.c.Prev()
}

// keyCursor walks, by ID, the entries of a bucket under one prefix: a key of
// a secondary index (the key and its NUL), or the whole ID index (no
// prefix).
type keyCursor struct {
	walk
	target []byte // scratch: the key sought
}

var _ cursor = (*keyCursor)(nil)

func newKeyCursor(tx *bbolt.Tx, bucket, prefix []byte, reverse bool, bound uint64) *keyCursor {
	return &keyCursor{walk: newWalk(tx, bucket, prefix, reverse, bound)}
}

func (k *keyCursor) seek(id []byte, inclusive bool) ([]byte, histRef, bool) {
	k.target = append(append(k.target[:0], k.prefix...), id...)
	target := k.target
	var key, val []byte
	switch {
	case !k.reverse:
		key, val = k.c.Seek(target)
		if len(id) > 0 && !inclusive && bytes.Equal(key, target) {
			key, val = k.c.Next()
		}
	case len(id) == 0:
		key, val = k.last(prefixEnd(k.prefix))
	default:
		key, val = k.c.Seek(target)
		if !inclusive || !bytes.Equal(key, target) {
			key, val = k.last(target)
		}
	}
	key, ref, ok := k.from(key, val)
	if !ok {
		return nil, histRef{}, false
	}
	return key[len(k.prefix):], ref, true
}

// prefixEnd is the lowest key above every key that starts with p, or, for a
// prefix of only 0xff bytes or none, nil, which seeks past the end.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// rangeCursor walks the entries of a secondary index under a prefix in key
// order (key, then ID), as memdb's index walks do. seek ignores its
// arguments after the first call and steps on.
type rangeCursor struct {
	walk
	started bool
}

var _ cursor = (*rangeCursor)(nil)

func newRangeCursor(tx *bbolt.Tx, bucket, prefix []byte, reverse bool, bound uint64) *rangeCursor {
	return &rangeCursor{walk: newWalk(tx, bucket, prefix, reverse, bound)}
}

func (r *rangeCursor) seek([]byte, bool) ([]byte, histRef, bool) {
	var key, val []byte
	switch {
	case r.started:
		key, val = r.step()
	case r.reverse:
		key, val = r.last(prefixEnd(r.prefix))
	default:
		key, val = r.c.Seek(r.prefix)
	}
	r.started = true
	key, ref, ok := r.from(key, val)
	if !ok {
		return nil, histRef{}, false
	}
	return key[bytes.IndexByte(key, 0)+1:], ref, true
}

// unionCursor walks the rows any of its cursors walks, by ID.
type unionCursor struct {
	subs    []cursor
	reverse bool
}

var _ cursor = (*unionCursor)(nil)

func (u *unionCursor) seek(id []byte, inclusive bool) ([]byte, histRef, bool) {
	var (
		best    []byte
		bestRef histRef
		found   bool
	)
	for _, c := range u.subs {
		got, ref, ok := c.seek(id, inclusive)
		if !ok {
			continue
		}
		if cmp := bytes.Compare(got, best); !found || u.reverse && cmp > 0 || !u.reverse && cmp < 0 {
			best, bestRef, found = got, ref, true
		}
	}
	return best, bestRef, found
}

// joinCursor walks the rows every one of its cursors walks, by ID: a
// leapfrog join, which seeks each cursor to the others' position, so that
// it visits about as many index entries as the rarest cursor has rows
// between the matches, and reads no value to decide.
type joinCursor struct {
	subs []cursor
}

var _ cursor = (*joinCursor)(nil)

func (j *joinCursor) seek(id []byte, inclusive bool) ([]byte, histRef, bool) {
	cand, ref, ok := j.subs[0].seek(id, inclusive)
	if !ok {
		return nil, histRef{}, false
	}
	for agree, i := 1, 1%len(j.subs); agree < len(j.subs); i = (i + 1) % len(j.subs) {
		got, r, ok := j.subs[i].seek(cand, true)
		if !ok {
			return nil, histRef{}, false
		}
		if bytes.Equal(got, cand) {
			agree++
			continue
		}
		cand, ref, agree = got, r, 1
	}
	return cand, ref, true
}

// newWhereCursor walks, by ID, the rows that match every group of where,
// a row matching a group when it matches any of the group's Matches.
func newWhereCursor(tx *bbolt.Tx, table string, where [][]Match, reverse bool, bound uint64) cursor {
	if len(where) == 0 {
		return newKeyCursor(tx, rowsBucket(table), nil, reverse, bound)
	}
	join := &joinCursor{}
	for _, group := range where {
		u := &unionCursor{reverse: reverse}
		for _, m := range group {
			u.subs = append(u.subs, matchCursors(tx, table, m, reverse, bound)...)
		}
		join.subs = append(join.subs, u)
	}
	if len(join.subs) == 1 {
		return join.subs[0]
	}
	return join
}

// matchCursors returns a cursor for each key m matches: one for an exact
// key, one for each distinct key under a prefix (found by seeking from key
// to key, so it costs the keys, not their rows).
func matchCursors(tx *bbolt.Tx, table string, m Match, reverse bool, bound uint64) []cursor {
	bucket := indexBucket(table, m.Index)
	if !m.Prefix {
		return []cursor{newKeyCursor(tx, bucket, append([]byte(m.Key), 0), reverse, bound)}
	}
	b := tx.Bucket(bucket)
	if b == nil {
		panic(fmt.Sprintf("raftstore: no history bucket %q", bucket))
	}
	var out []cursor
	c := b.Cursor()
	for k, _ := c.Seek([]byte(m.Key)); k != nil && bytes.HasPrefix(k, []byte(m.Key)); k, _ = c.Seek(prefixEnd(k[:bytes.IndexByte(k, 0)+1])) {
		key := bytes.Clone(k[:bytes.IndexByte(k, 0)+1])
		out = append(out, newKeyCursor(tx, bucket, key, reverse, bound))
	}
	return out
}

// Since returns the rows of a history table written by commands after Raft
// index after, in the order the log wrote them, at most limit of them (0:
// no cap), and whether more follow. Rows dropped since are skipped. It is
// how a reader follows a history table as a log (the outbox's dispatcher):
// IDs minted from a clock do not say in which order rows committed, the
// chain does.
func (t *Table[T]) Since(r *Reader, after uint64, limit int) (items []Item[T], more bool) {
	if !t.History {
		panic(fmt.Sprintf("raftstore: %s: Since is for history tables", t.Name))
	}
	r.histView(t.Name, func(tx *bbolt.Tx, bound uint64) {
		chain, values, dropped := tx.Bucket(bucketChain), tx.Bucket(bucketValues), tx.Bucket(bucketDropped)
		c := chain.Cursor()
		last, _ := c.Last()
		if last == nil {
			return
		}
		// The first record written after index after: records are in log
		// order, so their indexes only grow with their numbers.
		lo, hi := uint64(1), decodeU64(last)+1
		for lo < hi {
			mid := lo + (hi-lo)/2
			k, v := c.Seek(u64(mid))
			if k == nil || binary.BigEndian.Uint64(v) > after {
				hi = mid
			} else {
				lo = decodeU64(k) + 1
			}
		}
		for k, v := c.Seek(u64(lo)); k != nil; k, v = c.Next() {
			rec, err := decodeRecord(decodeU64(k), v)
			if err != nil {
				panic(fmt.Sprintf("raftstore: %v", err))
			}
			if rec.Index > bound {
				return
			}
			if rec.Table != t.Name || rec.Index <= after {
				continue
			}
			if d := dropped.Get(k); d != nil && decodeU64(d) <= bound {
				continue
			}
			raw := values.Get(k)
			if raw == nil {
				continue
			}
			if limit > 0 && len(items) == limit {
				more = true
				return
			}
			items = append(items, Item[T]{Value: decodeInto[T](t.Name, raw), Meta: Meta{CreateIndex: rec.Index, ModifyIndex: rec.Index}})
		}
	})
	return items, more
}
