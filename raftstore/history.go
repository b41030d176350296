package raftstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
)

// The history store keeps the rows of history tables (Table.History): what
// only grows, such as the audit log, the outbox and finished deploys' logs.
// They are written by the same replicated commands as the live tables, but
// the FSM keeps them in a bbolt file beside the snapshot, not in memory, so
// that the memory a node needs follows its live state, not its age.
//
// Every row a command inserts is a record of one hash chain, in the order the
// commands were applied (and, within a command, by table and ID):
//
//	hash(n) = SHA-256(hash(n-1) | seq | raft index | table | id | SHA-256(value))
//
// so a record changed, removed or inserted afterwards breaks the chain from
// there on (Store.VerifyHistory), and two nodes that applied the same log
// hold the same chain: its head, which snapshots carry, names the whole
// history.
//
// A history row is never changed. A table that allows it (not AppendOnly,
// or AppendOnly with a Retain rule) may drop a row: the row leaves the
// table's ID and secondary indexes and its record is marked dropped at the
// command's index; the record stays in the chain and its value is deleted
// from disk once a snapshot covers the drop (until then a restore may have
// to undo it).
//
// Layout (bbolt buckets; seq and indexes are 8-byte big-endian):
//
//	meta            "head" -> seq | index | hash; "count:<table>" -> rows;
//	                "compacted" -> drop index through which values are deleted
//	chain           seq -> index | table | id | value hash | hash
//	values          seq -> the value as the command carried it (JSON)
//	dropped         seq -> index of the command that dropped it
//	drops           drop index | seq -> nothing (drops in command order)
//	rows:<table>    id -> seq | index
//	index:<t>:<ix>  key NUL id -> seq | index
//
// The file is synced at every commit, which is once per batch of commands
// Raft hands the FSM, so it costs one sync per batch, not per write.
const historyFileName = "history.db"

var (
	bucketMeta    = []byte("meta")
	bucketChain   = []byte("chain")
	bucketValues  = []byte("values")
	bucketDropped = []byte("dropped")
	bucketDrops   = []byte("drops")
	keyHead       = []byte("head")
	keyCompacted  = []byte("compacted")
)

func rowsBucket(table string) []byte         { return []byte("rows:" + table) }
func indexBucket(table, index string) []byte { return []byte("index:" + table + ":" + index) }
func countKey(table string) []byte           { return []byte("count:" + table) }

// histHead is the end of the chain: its last record's number, the Raft index
// of the command that wrote it and its hash (zero for the empty chain).
type histHead struct {
	Seq   uint64   `json:"seq"`
	Index uint64   `json:"index"`
	Hash  [32]byte `json:"-"`
}

// histHeadJSON is how a head travels in snapshots.
type histHeadJSON struct {
	Seq   uint64 `json:"seq"`
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

func (h histHead) wire() *histHeadJSON {
	return &histHeadJSON{Seq: h.Seq, Index: h.Index, Hash: hex.EncodeToString(h.Hash[:])}
}

func (w *histHeadJSON) head() (histHead, error) {
	h := histHead{Seq: w.Seq, Index: w.Index}
	b, err := hex.DecodeString(w.Hash)
	if err != nil || len(b) != len(h.Hash) {
		return h, fmt.Errorf("history head hash %q is not 32 hex-encoded bytes", w.Hash)
	}
	copy(h.Hash[:], b)
	return h, nil
}

func (h histHead) encode() []byte {
	b := make([]byte, 16+32)
	binary.BigEndian.PutUint64(b, h.Seq)
	binary.BigEndian.PutUint64(b[8:], h.Index)
	copy(b[16:], h.Hash[:])
	return b
}

func decodeHead(b []byte) (histHead, error) {
	var h histHead
	if len(b) != 48 {
		return h, fmt.Errorf("history head of %d bytes", len(b))
	}
	h.Seq = binary.BigEndian.Uint64(b)
	h.Index = binary.BigEndian.Uint64(b[8:])
	copy(h.Hash[:], b[16:])
	return h, nil
}

// histRef is where a row's record is: its number and the Raft index of the
// command that wrote it.
type histRef struct {
	seq, index uint64
}

func (r histRef) encode() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, r.seq)
	binary.BigEndian.PutUint64(b[8:], r.index)
	return b
}

func decodeRef(b []byte) histRef {
	if len(b) != 16 {
		panic(fmt.Sprintf("raftstore: history reference of %d bytes", len(b)))
	}
	return histRef{seq: binary.BigEndian.Uint64(b), index: binary.BigEndian.Uint64(b[8:])}
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// histRecord is one record of the chain.
type histRecord struct {
	Seq       uint64
	Index     uint64
	Table, ID string
	ValueHash [32]byte
	Hash      [32]byte
}

func (r *histRecord) encode() []byte {
	b := make([]byte, 0, 8+1+len(r.Table)+2+len(r.ID)+64)
	b = binary.BigEndian.AppendUint64(b, r.Index)
	b = append(b, byte(len(r.Table)))
	b = append(b, r.Table...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.ID)))
	b = append(b, r.ID...)
	b = append(b, r.ValueHash[:]...)
	return append(b, r.Hash[:]...)
}

func decodeRecord(seq uint64, b []byte) (histRecord, error) {
	r := histRecord{Seq: seq}
	bad := fmt.Errorf("history record %d: malformed (%d bytes)", seq, len(b))
	if len(b) < 9 {
		return r, bad
	}
	r.Index = binary.BigEndian.Uint64(b)
	n := int(b[8])
	b = b[9:]
	if len(b) < n+2 {
		return r, bad
	}
	r.Table, b = string(b[:n]), b[n:]
	n = int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != n+64 {
		return r, bad
	}
	r.ID, b = string(b[:n]), b[n:]
	copy(r.ValueHash[:], b[:32])
	copy(r.Hash[:], b[32:])
	return r, nil
}

// chainHash is the hash of record r after a record whose hash is prev.
func chainHash(prev [32]byte, r *histRecord) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], r.Seq)
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], r.Index)
	h.Write(n[:])
	h.Write([]byte{byte(len(r.Table))})
	h.Write([]byte(r.Table))
	binary.BigEndian.PutUint16(n[:2], uint16(len(r.ID)))
	h.Write(n[:2])
	h.Write([]byte(r.ID))
	h.Write(r.ValueHash[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// history is a node's history store.
type history struct {
	db     *bbolt.DB
	dir    string
	tables map[string]tableDef

	mu sync.Mutex
	// head is the chain's head as committed to disk; pending is its head as
	// applied (history_pending.go).
	head, pending histHead
	// committed is the Raft index through which every history write of
	// applied commands is committed; readers of a view that includes a
	// history table's write at index i wait until committed reaches i.
	committed uint64
	changed   chan struct{} // closed and replaced when committed moves
	// overlay holds the rows applied and not yet committed, by table and
	// ID (history_pending.go); enqueued is the last index handed to the
	// writer.
	overlay  map[[2]string]*pendingRow
	enqueued uint64
	// ops are the history writes of the batch being applied (the FSM's
	// goroutine only).
	ops []histOp

	queue     chan histBatch
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
	// snapshotted is the index of the last snapshot persisted: drops at or
	// before it can no longer be undone by a restore, so their values may
	// leave the disk.
	snapshotted atomic.Uint64
}

func openHistory(dir string, tables map[string]tableDef) (*history, error) {
	db, err := bbolt.Open(filepath.Join(dir, historyFileName), 0o600, &bbolt.Options{
		Timeout:      2 * time.Second,
		FreelistType: bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open history store: %w", err)
	}
	// Transfers cut short by a crash leave their temporary files behind.
	for _, pattern := range []string{"history-export-*", "history-import-*"} {
		left, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range left {
			_ = os.Remove(f)
		}
	}
	h := &history{db: db, dir: dir, tables: tables, changed: make(chan struct{}), overlay: map[[2]string]*pendingRow{},
		queue: make(chan histBatch, writerQueue), stopped: make(chan struct{})}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketChain, bucketValues, bucketDropped, bucketDrops} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		for name, td := range tables {
			if !td.history {
				continue
			}
			if _, err := tx.CreateBucketIfNotExists(rowsBucket(name)); err != nil {
				return err
			}
			for _, ix := range td.indexNames {
				if _, err := tx.CreateBucketIfNotExists(indexBucket(name, ix)); err != nil {
					return err
				}
			}
		}
		if b := tx.Bucket(bucketMeta).Get(keyHead); b != nil {
			if h.head, err = decodeHead(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open history store: %w", err)
	}
	h.pending, h.committed, h.enqueued = h.head, h.head.Index, h.head.Index
	go h.write()
	return h, nil
}

// close lets the writer commit what it was handed and closes the file. The
// FSM must have stopped applying.
func (h *history) close() error {
	h.closeOnce.Do(func() {
		close(h.queue)
		<-h.stopped
		h.closeErr = h.db.Close()
	})
	return h.closeErr
}

// currentHead returns the head of the chain as applied.
func (h *history) currentHead() histHead {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

// committedHead returns the head of the chain as committed to disk.
func (h *history) committedHead() histHead {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head
}

// reset sets the heads and the committed index after a restore, once
// nothing is pending.
func (h *history) reset(head histHead, committed uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.head, h.pending = head, head
	h.committed, h.enqueued = committed, committed
	close(h.changed)
	h.changed = make(chan struct{})
}

// historyWaitLimit bounds how long a read waits for the history writes of
// the commands its view includes; the writer commits them within a disk
// sync or two, so the wait is short. Past it (a disk that stalls) the read
// sees what is committed.
const historyWaitLimit = 10 * time.Second

// waitCommitted waits until history is committed through Raft index i, or
// for at most limit (0: however long it takes). It reports whether it is.
func (h *history) waitCommitted(i uint64, limit time.Duration) bool {
	var timeout <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	for {
		h.mu.Lock()
		done, ch := h.committed >= i, h.changed
		h.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timeout:
			return false
		}
	}
}

// histWrite is one history operation of a command: an insert (value set)
// or a drop.
type histWrite struct {
	table string
	id    string
	value []byte // the value as the command carried it; nil for a drop
	v     any    // the decoded value of an insert
	ref   histRef
}

// histTx is a bbolt write transaction of the history store: the writer's
// commit of applied batches, or a restore's changes.
type histTx struct {
	h    *history
	tx   *bbolt.Tx
	head histHead
}

// begin starts a transaction for a restore's changes; nothing may be
// pending (drain).
func (h *history) begin() *histTx {
	tx, err := h.db.Begin(true)
	if err != nil {
		panic(fmt.Sprintf("raftstore: begin history transaction: %v", err))
	}
	return &histTx{h: h, tx: tx, head: h.committedHead()}
}

// commit makes the transaction durable. A node that cannot write its
// history must stop, as one that cannot write its log does.
func (t *histTx) commit() {
	if err := t.tx.Bucket(bucketMeta).Put(keyHead, t.head.encode()); err != nil {
		panic(fmt.Sprintf("raftstore: history head: %v", err))
	}
	if err := t.tx.Commit(); err != nil {
		panic(fmt.Sprintf("raftstore: commit history: %v", err))
	}
}

// lookupRow finds a row of a history table as committed.
func lookupRow(tx *bbolt.Tx, table, id string) (histRef, bool) {
	b := tx.Bucket(rowsBucket(table))
	if b == nil {
		return histRef{}, false
	}
	v := b.Get([]byte(id))
	if v == nil {
		return histRef{}, false
	}
	return decodeRef(v), true
}

func sortWrites(ws []histWrite) {
	slices.SortFunc(ws, func(a, b histWrite) int {
		if c := strings.Compare(a.table, b.table); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
}

func (t *histTx) must(err error, what string) {
	if err != nil {
		panic(fmt.Sprintf("raftstore: history %s: %v", what, err))
	}
}

// nextRecord is the record after head of a row inserted at index.
func nextRecord(head histHead, index uint64, table, id string, value []byte) histRecord {
	rec := histRecord{Seq: head.Seq + 1, Index: index, Table: table, ID: id, ValueHash: sha256.Sum256(value)}
	rec.Hash = chainHash(head.Hash, &rec)
	return rec
}

// insert appends a row's record after the transaction's head.
func (t *histTx) insert(index uint64, table, id string, value []byte, keys []indexKey) {
	rec := nextRecord(t.head, index, table, id, value)
	t.insertRecord(rec, value, keys)
	t.head = histHead{Seq: rec.Seq, Index: index, Hash: rec.Hash}
}

// insertRecord writes a record, its value and the row's index entries.
func (t *histTx) insertRecord(rec histRecord, value []byte, keys []indexKey) {
	key := u64(rec.Seq)
	t.must(t.appending(bucketChain).Put(key, rec.encode()), "chain")
	t.must(t.appending(bucketValues).Put(key, value), "value")
	t.index(rec.Table, rec.ID, keys, histRef{seq: rec.Seq, index: rec.Index}, true)
	t.count(rec.Table, 1)
}

// appending returns a bucket whose keys mostly grow (record numbers, and
// IDs, which are minted from the time): its pages are filled before they
// split, not halved as for keys that land anywhere.
func (t *histTx) appending(name []byte) *bbolt.Bucket {
	b := t.tx.Bucket(name)
	b.FillPercent = 0.95
	return b
}

// index adds (or removes) a row to its table's ID index and secondary
// indexes.
func (t *histTx) index(table, id string, keys []indexKey, ref histRef, add bool) {
	put := func(b *bbolt.Bucket, key []byte) {
		if add {
			t.must(b.Put(key, ref.encode()), "index")
		} else {
			t.must(b.Delete(key), "index")
		}
	}
	put(t.appending(rowsBucket(table)), []byte(id))
	for _, k := range keys {
		put(t.tx.Bucket(indexBucket(table, k.index)), indexEntry(k.key, id))
	}
}

// indexEntry is the key of a row in a secondary index bucket: the index key
// and the row's ID separated by NUL, so that rows of one key sort by ID and
// an exact key never matches a longer one (keys never contain NUL; the
// tables skip such keys, as memdb's NUL-terminated indexes would misread
// them).
func indexEntry(key, id string) []byte {
	b := make([]byte, 0, len(key)+1+len(id))
	b = append(b, key...)
	b = append(b, 0)
	return append(b, id...)
}

func (t *histTx) count(table string, d int64) {
	m := t.tx.Bucket(bucketMeta)
	var n uint64
	if b := m.Get(countKey(table)); b != nil {
		n = binary.BigEndian.Uint64(b)
	}
	t.must(m.Put(countKey(table), u64(uint64(int64(n)+d))), "count")
}

// drop takes a row out of its indexes and marks its record dropped by the
// command at index.
func (t *histTx) drop(index uint64, table, id string, ref histRef, keys []indexKey) {
	t.index(table, id, keys, ref, false)
	t.must(t.tx.Bucket(bucketDropped).Put(u64(ref.seq), u64(index)), "drop")
	t.must(t.tx.Bucket(bucketDrops).Put(dropKey(index, ref.seq), nil), "drop")
	t.count(table, -1)
}

func dropKey(index, seq uint64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, index)
	binary.BigEndian.PutUint64(b[8:], seq)
	return b
}

// keysOf returns the index keys of a record of table from its stored value.
func (t *histTx) keysOf(table string, seq uint64) []indexKey {
	raw := t.tx.Bucket(bucketValues).Get(u64(seq))
	if raw == nil {
		panic(fmt.Sprintf("raftstore: history record %d of %s has no value", seq, table))
	}
	v, err := t.h.tables[table].decode(raw)
	if err != nil {
		panic(fmt.Sprintf("raftstore: history record %d of %s: %v", seq, table, err))
	}
	return t.h.tables[table].keys(v)
}

// compactLimit bounds the dropped values one batch deletes from disk.
const compactLimit = 256

// compact deletes from disk the values of rows dropped at or before index
// (the last snapshot: no restore can undo those drops any more), at most
// compactLimit of them.
func (t *histTx) compact(through uint64) {
	m := t.tx.Bucket(bucketMeta)
	var done uint64
	if b := m.Get(keyCompacted); b != nil {
		done = binary.BigEndian.Uint64(b)
	}
	if done >= through {
		return
	}
	c := t.tx.Bucket(bucketDrops).Cursor()
	values := t.tx.Bucket(bucketValues)
	n := 0
	for k, _ := c.Seek(u64(done + 1)); k != nil && n < compactLimit; k, _ = c.Next() {
		index, seq := binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])
		if index > through {
			break
		}
		t.must(values.Delete(u64(seq)), "compact")
		done = index
		n++
	}
	if n < compactLimit {
		done = through
	}
	t.must(m.Put(keyCompacted, u64(done)), "compact")
}

// truncate undoes every history write of a command after Raft index
// through: it removes the records after it and restores the rows dropped
// after it (their values are still on disk: values are deleted only once a
// snapshot covers the drop). It returns the new head.
func (t *histTx) truncate(through uint64) histHead {
	chain := t.tx.Bucket(bucketChain)
	dropped := t.tx.Bucket(bucketDropped)
	// Drops after through, newest first: the rows come back.
	dc := t.tx.Bucket(bucketDrops).Cursor()
	for k, _ := dc.Last(); k != nil && binary.BigEndian.Uint64(k) > through; k, _ = dc.Last() {
		seq := binary.BigEndian.Uint64(k[8:])
		rec := t.record(seq)
		if rec.Seq == 0 {
			panic(fmt.Sprintf("raftstore: history drop of record %d, which is not in the chain", seq))
		}
		t.index(rec.Table, rec.ID, t.keysOf(rec.Table, seq), histRef{seq: seq, index: rec.Index}, true)
		t.count(rec.Table, 1)
		t.must(dropped.Delete(u64(seq)), "truncate")
		t.must(dc.Delete(), "truncate")
	}
	// Records after through, newest first.
	cc := chain.Cursor()
	for k, raw := cc.Last(); k != nil; k, raw = cc.Last() {
		seq := binary.BigEndian.Uint64(k)
		rec, err := decodeRecord(seq, raw)
		t.must(err, "truncate")
		if rec.Index <= through {
			break
		}
		// Every drop of it came after it, so it was undone above.
		t.index(rec.Table, rec.ID, t.keysOf(rec.Table, seq), histRef{seq: seq, index: rec.Index}, false)
		t.count(rec.Table, -1)
		t.must(t.tx.Bucket(bucketValues).Delete(k), "truncate")
		t.must(cc.Delete(), "truncate")
	}
	t.head = histHead{}
	if k, raw := cc.Last(); k != nil {
		rec, err := decodeRecord(binary.BigEndian.Uint64(k), raw)
		t.must(err, "truncate")
		t.head = histHead{Seq: rec.Seq, Index: rec.Index, Hash: rec.Hash}
	}
	return t.head
}

// record returns the chain record seq (Seq 0 if absent).
func (t *histTx) record(seq uint64) histRecord {
	raw := t.tx.Bucket(bucketChain).Get(u64(seq))
	if raw == nil {
		return histRecord{}
	}
	rec, err := decodeRecord(seq, raw)
	t.must(err, "read")
	return rec
}

// wipe empties the history store.
func (t *histTx) wipe() {
	var names [][]byte
	t.must(t.tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		names = append(names, bytes.Clone(name))
		return nil
	}), "wipe")
	for _, name := range names {
		t.must(t.tx.DeleteBucket(name), "wipe")
		_, err := t.tx.CreateBucket(name)
		t.must(err, "wipe")
	}
	t.head = histHead{}
}

// recordAt returns the record seq from the committed store.
func (h *history) recordAt(seq uint64) (histRecord, bool, error) {
	var (
		rec histRecord
		ok  bool
	)
	err := h.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketChain).Get(u64(seq))
		if raw == nil {
			return nil
		}
		var err error
		rec, err = decodeRecord(seq, raw)
		ok = err == nil
		return err
	})
	return rec, ok, err
}

// errHistoryBehind says a node's history lacks records its state needs.
var errHistoryBehind = errors.New("the history store lacks records the snapshot includes")
