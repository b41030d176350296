package raftstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"

	"github.com/svchost/svc/internal/errcode"
)

// indexTable records, per table, the Raft index of the last command that
// wrote to it. It makes table-wide preconditions (CheckTable) possible.
const indexTable = "_index"

type tableIndex struct {
	Name  string
	Index uint64
}

// fsm is the replicated state machine: a go-memdb database of the declared
// tables, and the history store (history.go) for the history tables.
// ApplyBatch and Restore are called by Raft one at a time; reads may run
// concurrently against the database pointer they loaded.
type fsm struct {
	tables map[string]tableDef
	names  []string // sorted names of the tables memdb holds
	all    []string // sorted names of every table, history tables too
	schema *memdb.DBSchema

	db      atomic.Pointer[memdb.MemDB]
	applied atomic.Uint64

	mu       sync.Mutex
	appliedC chan struct{} // closed and replaced whenever applied moves

	hist *history
	// catchUp fetches history records this node lacks from the other
	// servers, for a snapshot from the leader that is ahead of it.
	catchUp func(ctx context.Context, req historyRange, w io.Writer) error
	// fetches counts the history ranges this node fetched from others.
	fetches atomic.Int64
	// servers are the servers' announced versions (versions.go).
	servers servers
	// restoreErr is the last restore's failure, which Raft logs but does
	// not return when no snapshot could be restored at start.
	restoreErr atomic.Pointer[error]
}

var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.BatchingFSM = (*fsm)(nil)
)

// newFSM builds the state machine of the declared tables, its history store
// in dir.
func newFSM(defs []Def, dir string) (*fsm, error) {
	f := &fsm{
		tables:   map[string]tableDef{},
		schema:   &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{}},
		appliedC: make(chan struct{}),
	}
	f.schema.Tables[indexTable] = &memdb.TableSchema{
		Name: indexTable,
		Indexes: map[string]*memdb.IndexSchema{
			"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
		},
	}
	for _, d := range defs {
		if v, ok := d.(interface{ validate() error }); ok {
			if err := v.validate(); err != nil {
				return nil, err
			}
		}
		td := d.def()
		if _, dup := f.tables[td.name]; dup {
			return nil, fmt.Errorf("table %s declared twice", td.name)
		}
		f.tables[td.name] = td
		f.all = append(f.all, td.name)
		if td.history {
			continue
		}
		f.schema.Tables[td.name] = td.schema
		f.names = append(f.names, td.name)
	}
	sort.Strings(f.names)
	sort.Strings(f.all)
	db, err := memdb.NewMemDB(f.schema)
	if err != nil {
		return nil, fmt.Errorf("memdb schema: %w", err)
	}
	f.db.Store(db)
	if f.hist, err = openHistory(dir, f.tables); err != nil {
		return nil, err
	}
	return f, nil
}

// Apply applies one committed log entry.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed log entries in order. Each command commits
// to memdb on its own; the history writes of the whole batch go to the
// history store's writer at its end (history_pending.go). It panics on an
// entry it cannot decode or does not know: a node that cannot apply the
// log must stop rather than diverge from the others.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.applyOne(l)
	}
	last := logs[len(logs)-1].Index
	f.hist.flush(last)
	f.setApplied(last)
	return out
}

func (f *fsm) applyOne(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("raftstore: empty log entry at index %d", l.Index))
	}
	t := cmdType(l.Data[0])
	fn, ok := handlers[t]
	if !ok {
		if t&ignorableFlag != 0 {
			return nil
		}
		panic(fmt.Sprintf("raftstore: unknown command type %d at index %d", t, l.Index))
	}
	return fn(f, l.Index, l.Data[1:])
}

func (f *fsm) setApplied(index uint64) {
	f.applied.Store(index)
	f.mu.Lock()
	close(f.appliedC)
	f.appliedC = make(chan struct{})
	f.mu.Unlock()
}

// appliedWatch returns the applied index and a channel closed when it moves.
func (f *fsm) appliedWatch() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied.Load(), f.appliedC
}

// touched is a row a transaction wrote, kept for the tables' Validate hooks.
type touched struct {
	table string
	id    string
	old   any // value before the command's first write to it, nil if new
}

func (f *fsm) applyTxn(index uint64, payload []byte) any {
	var c txnCmd
	if err := json.Unmarshal(payload, &c); err != nil {
		panic(fmt.Sprintf("raftstore: undecodable transaction at index %d: %v", index, err))
	}
	tx := f.db.Load().Txn(true)
	defer tx.Abort()

	var (
		writes []touched
		hs     *histStage
	)
	seen := map[[2]string]bool{}
	for i, op := range c.Ops {
		td, ok := f.tables[op.Table]
		if !ok {
			panic(fmt.Sprintf("raftstore: unknown table %q at index %d", op.Table, index))
		}
		var (
			old any
			err *TxnError
		)
		if td.history {
			if hs == nil {
				hs = &histStage{h: f.hist}
			}
			err = hs.apply(tx, index, i, td, op)
		} else {
			old, err = f.applyOp(tx, index, i, td, op)
		}
		if err != nil {
			return err
		}
		if op.Kind == opCheck {
			continue
		}
		if k := [2]string{op.Table, op.ID}; !seen[k] {
			seen[k] = true
			writes = append(writes, touched{table: op.Table, id: op.ID, old: old})
		}
	}
	r := &Reader{tx: tx}
	for _, w := range writes {
		td := f.tables[w.table]
		if td.check == nil {
			continue
		}
		var cur any
		if raw, err := tx.First(w.table, "id", w.id); err == nil && raw != nil {
			cur = raw.(*row).Value
		}
		if err := td.check(r, w.old, cur); err != nil {
			return hookError(ReasonRejected, -1, w.table, w.id, err)
		}
	}
	if err := f.checkInvariants(tx, writes); err != nil {
		return err
	}
	f.bumpIndexes(tx, index, writes)
	if hs != nil {
		f.hist.stage(index, hs.writes)
	}
	tx.Commit()
	return nil
}

// checkInvariants runs, once each, the invariants of the tables written.
func (f *fsm) checkInvariants(tx *memdb.Txn, writes []touched) *TxnError {
	done := map[*Invariant]bool{}
	r := &Reader{tx: tx}
	for _, w := range writes {
		inv := f.tables[w.table].invariant
		if inv == nil || done[inv] {
			continue
		}
		done[inv] = true
		if err := inv.Check(r); err != nil {
			te := hookError(ReasonRejected, -1, w.table, "", err)
			te.Index = inv.Name
			return te
		}
	}
	return nil
}

// applyOp applies one operation and returns the row's value before it.
func (f *fsm) applyOp(tx *memdb.Txn, index uint64, i int, td tableDef, op Op) (any, *TxnError) {
	existing, err := tx.First(td.name, "id", op.ID)
	if op.Kind == opCheck && op.ID == "" {
		existing, err = nil, nil
	}
	if err != nil {
		panic(fmt.Sprintf("raftstore: memdb lookup %s/%s: %v", td.name, op.ID, err))
	}
	var cur *row
	if existing != nil {
		cur = existing.(*row)
	}
	var old any
	if cur != nil {
		old = cur.Value
	}

	switch op.Kind {
	case opCheck:
		if op.ID == "" {
			if got := tableIndexOf(tx, td.name); got != *op.If {
				return nil, refuse(ReasonStale, i, td.name, "", errcode.StateInvalid,
					"%s changed concurrently (index %d, expected %d); retry", td.name, got, *op.If)
			}
			return nil, nil
		}
		return nil, checkIf(i, td.name, op.ID, cur, *op.If)

	case opDelete:
		if td.appendOnly {
			return nil, refuse(ReasonAppendOnly, i, td.name, op.ID, errcode.StateInvalid,
				"%s is append-only: %s cannot be deleted", td.name, op.ID)
		}
		if cur == nil {
			return nil, refuse(ReasonNotFound, i, td.name, op.ID, errcode.NotFound, "no %s %s", td.name, op.ID)
		}
		if op.If != nil {
			if err := checkIf(i, td.name, op.ID, cur, *op.If); err != nil {
				return nil, err
			}
		}
		if err := tx.Delete(td.name, cur); err != nil {
			panic(fmt.Sprintf("raftstore: memdb delete %s/%s: %v", td.name, op.ID, err))
		}
		return old, nil

	case opInsert, opPut:
		if cur != nil && op.Kind == opInsert {
			reason := ReasonExists
			if td.appendOnly {
				reason = ReasonAppendOnly
			}
			return nil, refuse(reason, i, td.name, op.ID, errcode.StateInvalid,
				"%s %s already exists", td.name, op.ID)
		}
		if op.Kind == opPut && td.appendOnly {
			return nil, refuse(ReasonAppendOnly, i, td.name, op.ID, errcode.StateInvalid,
				"%s is append-only: %s cannot be replaced", td.name, op.ID)
		}
		if op.If != nil {
			if err := checkIf(i, td.name, op.ID, cur, *op.If); err != nil {
				return nil, err
			}
		}
		v, err := td.decode(op.Value)
		if err != nil {
			panic(fmt.Sprintf("raftstore: undecodable %s value at index %d: %v", td.name, index, err))
		}
		nr := &row{ID: op.ID, Value: v, Meta: Meta{CreateIndex: index, ModifyIndex: index}}
		if cur != nil {
			nr.CreateIndex = cur.CreateIndex
		}
		if err := f.checkUnique(tx, i, td, nr); err != nil {
			return nil, err
		}
		if err := tx.Insert(td.name, nr); err != nil {
			panic(fmt.Sprintf("raftstore: memdb insert %s/%s: %v", td.name, op.ID, err))
		}
		return old, nil
	}
	panic(fmt.Sprintf("raftstore: unknown operation %q at index %d", op.Kind, index))
}

func checkIf(i int, table, id string, cur *row, want uint64) *TxnError {
	switch {
	case cur == nil && want == 0:
		return nil
	case cur == nil:
		return refuse(ReasonNotFound, i, table, id, errcode.NotFound, "no %s %s", table, id)
	case cur.ModifyIndex != want:
		return refuse(ReasonStale, i, table, id, errcode.StateInvalid,
			"%s %s changed concurrently (index %d, expected %d); retry", table, id, cur.ModifyIndex, want)
	}
	return nil
}

// checkUnique refuses a row whose unique index key another row holds.
func (f *fsm) checkUnique(tx *memdb.Txn, i int, td tableDef, nr *row) *TxnError {
	for _, ix := range td.unique {
		ok, key, err := td.schema.Indexes[ix].Indexer.(memdb.SingleIndexer).FromObject(nr)
		if err != nil {
			panic(fmt.Sprintf("raftstore: index %s.%s: %v", td.name, ix, err))
		}
		if !ok {
			continue
		}
		other, err := tx.First(td.name, ix, string(key[:len(key)-1]))
		if err != nil {
			panic(fmt.Sprintf("raftstore: memdb lookup %s.%s: %v", td.name, ix, err))
		}
		if other != nil && other.(*row).ID != nr.ID {
			e := refuse(ReasonConflict, i, td.name, nr.ID, errcode.StateInvalid,
				"%s %s: %s is already taken by %s", td.name, nr.ID, ix, other.(*row).ID)
			e.Index = ix
			return e
		}
	}
	return nil
}

func hookError(reason Reason, op int, table, id string, err error) *TxnError {
	pub, ok := errcode.As(err)
	if !ok {
		pub = errcode.New(errcode.StateInvalid, "%s", err.Error())
	}
	return &TxnError{Reason: reason, Op: op, Table: table, ID: id, Err: pub}
}

func (f *fsm) bumpIndexes(tx *memdb.Txn, index uint64, writes []touched) {
	done := map[string]bool{}
	for _, w := range writes {
		if done[w.table] {
			continue
		}
		done[w.table] = true
		if err := tx.Insert(indexTable, &tableIndex{Name: w.table, Index: index}); err != nil {
			panic(fmt.Sprintf("raftstore: memdb index %s: %v", w.table, err))
		}
	}
}

func tableIndexOf(tx *memdb.Txn, table string) uint64 {
	raw, err := tx.First(indexTable, "id", table)
	if err != nil || raw == nil {
		return 0
	}
	return raw.(*tableIndex).Index
}

// applyRetain removes rows of a table by the retention command, each only if
// the table's Retain rule allows it. It is the only way a row of an
// append-only table ever leaves the store.
func (f *fsm) applyRetain(index uint64, payload []byte) any {
	var c retainCmd
	if err := json.Unmarshal(payload, &c); err != nil {
		panic(fmt.Sprintf("raftstore: undecodable retention at index %d: %v", index, err))
	}
	td, ok := f.tables[c.Table]
	if !ok {
		panic(fmt.Sprintf("raftstore: unknown table %q at index %d", c.Table, index))
	}
	tx := f.db.Load().Txn(true)
	defer tx.Abort()
	if td.history {
		return f.retainHistory(tx, index, td, c.IDs)
	}
	r := &Reader{tx: tx}
	var writes []touched
	for i, id := range c.IDs {
		raw, err := tx.First(td.name, "id", id)
		if err != nil {
			panic(fmt.Sprintf("raftstore: memdb lookup %s/%s: %v", td.name, id, err))
		}
		if raw == nil {
			return refuse(ReasonNotFound, i, td.name, id, errcode.NotFound, "no %s %s", td.name, id)
		}
		if td.retain == nil {
			return refuse(ReasonRejected, i, td.name, id, errcode.StateInvalid,
				"%s has no retention rule: its rows are never removed", td.name)
		}
		cur := raw.(*row)
		if err := td.retain(r, cur.Value, cur.Meta); err != nil {
			return hookError(ReasonRejected, i, td.name, id, err)
		}
		if err := tx.Delete(td.name, cur); err != nil {
			panic(fmt.Sprintf("raftstore: memdb delete %s/%s: %v", td.name, id, err))
		}
		writes = append(writes, touched{table: td.name, id: id})
	}
	if err := f.checkInvariants(tx, writes); err != nil {
		return err
	}
	f.bumpIndexes(tx, index, writes)
	tx.Commit()
	return nil
}

// Snapshot captures a read view of the database and the head of the
// history chain; Persist streams the live rows later without blocking
// Apply. History rows are not in the snapshot: the head names them (see
// restoreHistory).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{f: f, tx: f.db.Load().Txn(false), applied: f.applied.Load(), head: f.hist.currentHead()}, nil
}

// snapshotFormat versions the snapshot stream. A record is one JSON line.
// Format 1 had no history head and carried history tables' rows like any
// others; Restore still reads it.
const snapshotFormat = 2

type snapshotHeader struct {
	Format int `json:"format"`
	// Applied is the last command the snapshot includes; a node restored
	// from it has applied that far.
	Applied uint64 `json:"applied"`
	// History is the head of the history chain at Applied.
	History *histHeadJSON `json:"history,omitempty"`
}

type snapshotRecord struct {
	Table string          `json:"t,omitempty"`
	ID    string          `json:"id,omitempty"`
	C     uint64          `json:"c,omitempty"`
	M     uint64          `json:"m,omitempty"`
	Value json.RawMessage `json:"v,omitempty"`
	// Index rows: the table's last write index.
	IndexOf string `json:"x,omitempty"`
	Index   uint64 `json:"i,omitempty"`
}

type fsmSnapshot struct {
	f       *fsm
	tx      *memdb.Txn
	applied uint64
	head    histHead
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	// The snapshot names the history through its index: it is complete
	// once that is on disk.
	s.f.hist.waitCommitted(s.applied, 0)
	if err := sink.Close(); err != nil {
		return err
	}
	// No restore goes back before this snapshot now: the values of rows
	// dropped up to it may leave the disk.
	s.f.hist.snapshotted.Store(s.applied)
	return nil
}

func (s *fsmSnapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(snapshotHeader{Format: snapshotFormat, Applied: s.applied, History: s.head.wire()}); err != nil {
		return err
	}
	err := eachRow(s.tx, s.f.names, func(table string, r *row, value []byte) error {
		return enc.Encode(snapshotRecord{Table: table, ID: r.ID, C: r.CreateIndex, M: r.ModifyIndex, Value: value})
	})
	if err != nil {
		return err
	}
	for _, name := range s.f.all {
		if idx := tableIndexOf(s.tx, name); idx != 0 {
			if err := enc.Encode(snapshotRecord{IndexOf: name, Index: idx}); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

func (s *fsmSnapshot) Release() {}

// eachRow calls fn for every row of every table, tables by name and rows by
// ID, with the row's value encoded as JSON.
func eachRow(tx *memdb.Txn, names []string, fn func(table string, r *row, value []byte) error) error {
	for _, name := range names {
		it, err := tx.Get(name, "id")
		if err != nil {
			return fmt.Errorf("iterate %s: %w", name, err)
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			r := raw.(*row)
			b, err := json.Marshal(r.Value)
			if err != nil {
				return fmt.Errorf("encode %s/%s: %w", name, r.ID, err)
			}
			if err := fn(name, r, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Restore replaces the whole state with a snapshot. It builds a fresh
// database, brings the history store to the snapshot's head (restoreHistory)
// and swaps the database in only when both are complete.
func (f *fsm) Restore(rc io.ReadCloser) error {
	err := f.restore(rc)
	if err != nil {
		f.restoreErr.Store(&err)
	}
	return err
}

func (f *fsm) restore(rc io.ReadCloser) error {
	defer rc.Close()
	db, err := memdb.NewMemDB(f.schema)
	if err != nil {
		return fmt.Errorf("restore: memdb: %w", err)
	}
	tx := db.Txn(true)
	dec := json.NewDecoder(bufio.NewReaderSize(rc, 1<<16))
	var hdr snapshotHeader
	if err := dec.Decode(&hdr); err != nil {
		return fmt.Errorf("restore: header: %w", err)
	}
	switch {
	case hdr.Format == 1:
	case hdr.Format == snapshotFormat && hdr.History != nil:
	default:
		return fmt.Errorf("restore: snapshot format %d, this build reads 1 and %d", hdr.Format, snapshotFormat)
	}
	var legacy []legacyRow // format 1: history tables' rows, to import
	for {
		var rec snapshotRecord
		err := dec.Decode(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("restore: record: %w", err)
		}
		if rec.IndexOf != "" {
			if err := tx.Insert(indexTable, &tableIndex{Name: rec.IndexOf, Index: rec.Index}); err != nil {
				return fmt.Errorf("restore: index %s: %w", rec.IndexOf, err)
			}
			continue
		}
		td, ok := f.tables[rec.Table]
		if !ok {
			return fmt.Errorf("restore: snapshot has table %q that this build does not know", rec.Table)
		}
		v, err := td.decode(rec.Value)
		if err != nil {
			return fmt.Errorf("restore: %s/%s: %w", rec.Table, rec.ID, err)
		}
		if td.history {
			if hdr.Format != 1 {
				return fmt.Errorf("restore: snapshot has a row of history table %s", rec.Table)
			}
			legacy = append(legacy, legacyRow{table: td.name, id: rec.ID, index: rec.C, value: rec.Value, v: v})
			continue
		}
		if err := tx.Insert(td.name, &row{ID: rec.ID, Value: v, Meta: Meta{CreateIndex: rec.C, ModifyIndex: rec.M}}); err != nil {
			return fmt.Errorf("restore: %s/%s: %w", rec.Table, rec.ID, err)
		}
	}
	if hdr.Format == 1 {
		f.importLegacy(legacy, hdr.Applied)
	} else if err := f.restoreHistory(hdr.History, hdr.Applied); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	tx.Commit()
	f.db.Store(db)
	f.setApplied(hdr.Applied)
	return nil
}

// digest hashes the whole state: every table, row, index and value. Two nodes
// that applied the same log have the same digest.
func (f *fsm) digest() (string, error) {
	tx := f.db.Load().Txn(false)
	d := newStateDigest()
	err := eachRow(tx, f.names, func(table string, r *row, value []byte) error {
		d.row(table, r.ID, r.CreateIndex, r.ModifyIndex, value)
		return nil
	})
	if err != nil {
		return "", err
	}
	return d.sum(f.all, func(name string) uint64 { return tableIndexOf(tx, name) }, f.hist.currentHead()), nil
}

// stateDigest hashes a state row by row, then its tables' indexes and
// its history head: digest over the live database, digestSaved over a
// saved snapshot, which must agree.
type stateDigest struct{ h hash.Hash }

func newStateDigest() stateDigest { return stateDigest{h: sha256.New()} }

func (d stateDigest) row(table, id string, create, modify uint64, value []byte) {
	fmt.Fprintf(d.h, "%s\x00%s\x00%d\x00%d\x00", table, id, create, modify)
	d.h.Write(value)
	d.h.Write([]byte{'\n'})
}

func (d stateDigest) sum(tables []string, indexOf func(string) uint64, head histHead) string {
	for _, name := range tables {
		fmt.Fprintf(d.h, "%s\x00%d\n", name, indexOf(name))
	}
	fmt.Fprintf(d.h, "history\x00%d\x00%x\n", head.Seq, head.Hash)
	return hex.EncodeToString(d.h.Sum(nil))
}

// tableNames returns the declared tables, sorted.
func (f *fsm) tableNames() []string { return slices.Clone(f.all) }
