package raftstore

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// A snapshot carries the head of the history chain, not its records. A node
// that restores one brings its history store to that head:
//
//   - when its chain reaches the head (a restart: the store on disk is ahead
//     of the snapshot by the commands Raft is about to replay), it undoes
//     what came after the snapshot (truncate);
//   - when it is behind (a follower the leader sends a snapshot), it fetches
//     the records it lacks from the other servers over the cluster port (a
//     blob whose name is the range), checks that they continue its chain
//     and end exactly at the head, and appends them; a chain that does not
//     continue is fetched again whole.
//
// A node that cannot do either does not restore: a single node whose
// history file was lost stops rather than serve a state whose history is
// gone.

// historyBlobPrefix starts the blob names of history ranges; a BlobSource's
// own names never start with it.
const historyBlobPrefix = "raftstore-history."

// historyRange is a fetch of the history a node lacks: the records after
// FromSeq through ToSeq, and the drops of records up to FromSeq made by the
// commands after DropsAfter through Through (the snapshot's index).
type historyRange struct {
	FromSeq, ToSeq      uint64
	DropsAfter, Through uint64
}

func (r historyRange) name() string {
	return fmt.Sprintf("%s%d.%d.%d.%d", historyBlobPrefix, r.FromSeq, r.ToSeq, r.DropsAfter, r.Through)
}

func parseHistoryRange(name string) (historyRange, bool) {
	rest, ok := strings.CutPrefix(name, historyBlobPrefix)
	if !ok {
		return historyRange{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return historyRange{}, false
	}
	var n [4]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return historyRange{}, false
		}
		n[i] = v
	}
	r := historyRange{FromSeq: n[0], ToSeq: n[1], DropsAfter: n[2], Through: n[3]}
	return r, r.FromSeq <= r.ToSeq && r.DropsAfter <= r.Through
}

// wireRecord is a record, or a drop of an earlier record, as a history range
// carries it: one JSON line each.
type wireRecord struct {
	Seq       uint64          `json:"s"`
	Index     uint64          `json:"i,omitempty"`
	Table     string          `json:"t,omitempty"`
	ID        string          `json:"id,omitempty"`
	ValueHash string          `json:"vh,omitempty"`
	Hash      string          `json:"h,omitempty"`
	Value     json.RawMessage `json:"v,omitempty"`
	// Dropped is the index of the command that dropped the record, when it
	// is at or before the range's Through.
	Dropped uint64 `json:"d,omitempty"`
	// DropOnly marks the drop of a record the fetching node has.
	DropOnly bool `json:"drop,omitempty"`
}

// export writes a history range to a temporary file in dir and returns it,
// open at its start, with its size; closing it removes it. A range this
// node does not hold entirely is ErrBlobNotFound.
func (h *history) export(req historyRange, dir string) (io.ReadCloser, int64, error) {
	h.mu.Lock()
	holds := h.head.Seq >= req.ToSeq && h.committed >= req.Through
	h.mu.Unlock()
	if !holds {
		return nil, 0, ErrBlobNotFound
	}
	f, err := os.CreateTemp(dir, "history-export-*")
	if err != nil {
		return nil, 0, err
	}
	rc := &removeOnClose{File: f}
	w := bufio.NewWriterSize(f, 1<<16)
	enc := json.NewEncoder(w)
	err = h.db.View(func(tx *bbolt.Tx) error {
		values, dropped := tx.Bucket(bucketValues), tx.Bucket(bucketDropped)
		c := tx.Bucket(bucketChain).Cursor()
		next := req.FromSeq + 1
		for k, raw := c.Seek(u64(next)); k != nil && binary.BigEndian.Uint64(k) <= req.ToSeq; k, raw = c.Next() {
			rec, err := decodeRecord(binary.BigEndian.Uint64(k), raw)
			if err != nil {
				return err
			}
			if rec.Seq != next {
				return fmt.Errorf("history record %d follows %d", rec.Seq, next-1)
			}
			next++
			wr := wireRecord{Seq: rec.Seq, Index: rec.Index, Table: rec.Table, ID: rec.ID,
				ValueHash: hex.EncodeToString(rec.ValueHash[:]), Hash: hex.EncodeToString(rec.Hash[:])}
			if d := dropped.Get(k); d != nil && binary.BigEndian.Uint64(d) <= req.Through {
				wr.Dropped = binary.BigEndian.Uint64(d)
			} else if wr.Value = values.Get(k); wr.Value == nil {
				// Dropped after Through and compacted here: this node
				// cannot give the state at Through (a later snapshot can).
				return fmt.Errorf("history record %d was dropped after index %d and its value is gone from this node", rec.Seq, req.Through)
			}
			if err := enc.Encode(wr); err != nil {
				return err
			}
		}
		if next != req.ToSeq+1 {
			return ErrBlobNotFound
		}
		dc := tx.Bucket(bucketDrops).Cursor()
		for k, _ := dc.Seek(dropKey(req.DropsAfter+1, 0)); k != nil && binary.BigEndian.Uint64(k) <= req.Through; k, _ = dc.Next() {
			index, seq := binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])
			if seq <= req.FromSeq {
				if err := enc.Encode(wireRecord{Seq: seq, Dropped: index, DropOnly: true}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = w.Flush()
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = rc.Close()
		return nil, 0, err
	}
	return rc, size, nil
}

type removeOnClose struct{ *os.File }

func (r *removeOnClose) Close() error {
	err := r.File.Close()
	_ = os.Remove(r.Name())
	return err
}

// blobRouter serves a store's own blobs (history ranges) beside those of the
// configured BlobSource.
type blobRouter struct {
	hist func() *history
	dir  string
	user BlobSource
}

var _ BlobSource = blobRouter{}

func (b blobRouter) OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if req, ok := parseHistoryRange(name); ok {
		return b.hist().export(req, b.dir)
	}
	if strings.HasPrefix(name, historyBlobPrefix) || b.user == nil {
		return nil, 0, ErrBlobNotFound
	}
	return b.user.OpenBlob(ctx, name)
}

// prepareHistory readies the history store for the state Raft starts this
// node from: the latest snapshot, whose restore brings the history store to
// its head, or, without one, the empty state from which Raft replays the
// whole log, so the history store starts empty too (the replay writes it
// again, identically).
func (f *fsm) prepareHistory(snaps raft.SnapshotStore) error {
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) > 0 {
		f.hist.snapshotted.Store(metas[0].Index)
		return nil
	}
	if f.hist.currentHead().Seq == 0 {
		return nil
	}
	f.hist.drain()
	t := f.hist.begin()
	t.wipe()
	t.commit()
	f.hist.reset(histHead{}, 0)
	return nil
}

// historyFetchTimeout bounds fetching the history a snapshot needs (each
// transfer also fails after blobIdleTimeout without progress).
const historyFetchTimeout = 30 * time.Minute

// restoreHistory brings the history store to the head w of a snapshot taken
// at index through.
func (f *fsm) restoreHistory(w *histHeadJSON, through uint64) error {
	want, err := w.head()
	if err != nil {
		return err
	}
	f.hist.drain()
	local := f.hist.committedHead()
	if local.Seq >= want.Seq {
		rec, ok, err := f.hist.recordAt(want.Seq)
		if err != nil {
			return err
		}
		if want.Seq == 0 || ok && rec.Hash == want.Hash {
			t := f.hist.begin()
			got := t.truncate(through)
			t.commit()
			f.hist.reset(got, through)
			if got != want {
				return fmt.Errorf("history: undoing the writes after index %d left the chain at record %d, not at the snapshot's %d", through, got.Seq, want.Seq)
			}
			return nil
		}
	} else {
		// Behind: whatever this node applied after through (it cannot
		// have, on the same log) is undone before records are appended.
		t := f.hist.begin()
		local = t.truncate(through)
		t.commit()
		f.hist.reset(local, through)
	}
	err = f.fetchHistory(local, want, through)
	if err != nil && local.Seq > 0 {
		// The fetched records did not continue this node's chain: start
		// it again from the other servers' copy.
		t := f.hist.begin()
		t.wipe()
		t.commit()
		f.hist.reset(histHead{}, 0)
		err = f.fetchHistory(histHead{}, want, through)
	}
	if err != nil {
		return fmt.Errorf("%w (this node's chain ends at record %d, the snapshot's at %d): %w", errHistoryBehind, local.Seq, want.Seq, err)
	}
	return nil
}

// fetchHistory fetches the records after from through want from the other
// servers and appends them.
func (f *fsm) fetchHistory(from, want histHead, through uint64) error {
	if f.catchUp == nil {
		return errors.New("no other server to fetch it from")
	}
	tmp, err := os.CreateTemp(f.hist.dir, "history-import-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), historyFetchTimeout)
	defer cancel()
	req := historyRange{FromSeq: from.Seq, ToSeq: want.Seq, DropsAfter: from.Index, Through: through}
	if err := f.catchUp(ctx, req, tmp); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	head, err := f.hist.importRange(bufio.NewReaderSize(tmp, 1<<16), from)
	if err != nil {
		return err
	}
	if head != want {
		return fmt.Errorf("the fetched history ends at record %d (%x), not at the snapshot's head %d (%x)", head.Seq, head.Hash[:4], want.Seq, want.Hash[:4])
	}
	f.hist.reset(head, through)
	f.fetches.Add(1)
	return nil
}

// importBatch is how many records one transaction of an import appends.
const importBatch = 4096

// importRange appends a fetched history range after the head from, checking
// that every record continues the chain and that values match their
// hashes, and applies the drops it carries. It commits every importBatch
// records, so an import cut short leaves a shorter valid chain.
func (h *history) importRange(r io.Reader, from histHead) (histHead, error) {
	dec := json.NewDecoder(r)
	head := from
	for done := false; !done; {
		err := h.db.Update(func(tx *bbolt.Tx) error {
			t := &histTx{h: h, tx: tx, head: head}
			for n := 0; n < importBatch; n++ {
				var wr wireRecord
				if err := dec.Decode(&wr); err == io.EOF {
					done = true
					break
				} else if err != nil {
					return fmt.Errorf("read fetched history: %w", err)
				}
				if err := t.importOne(wr); err != nil {
					return err
				}
			}
			head = t.head
			return tx.Bucket(bucketMeta).Put(keyHead, t.head.encode())
		})
		if err != nil {
			return head, err
		}
	}
	return head, nil
}

func (t *histTx) importOne(wr wireRecord) error {
	if wr.DropOnly {
		if t.tx.Bucket(bucketDropped).Get(u64(wr.Seq)) != nil {
			return nil // dropped here already
		}
		rec := t.record(wr.Seq)
		if rec.Seq == 0 {
			return fmt.Errorf("fetched drop of history record %d, which this node does not have", wr.Seq)
		}
		t.drop(wr.Dropped, rec.Table, rec.ID, histRef{seq: rec.Seq, index: rec.Index}, t.keysOf(rec.Table, rec.Seq))
		t.must(t.tx.Bucket(bucketValues).Delete(u64(wr.Seq)), "import")
		return nil
	}
	rec := histRecord{Seq: wr.Seq, Index: wr.Index, Table: wr.Table, ID: wr.ID}
	td, ok := t.h.tables[rec.Table]
	switch {
	case rec.Seq != t.head.Seq+1:
		return fmt.Errorf("fetched history record %d does not follow record %d", rec.Seq, t.head.Seq)
	case !ok || !td.history:
		return fmt.Errorf("fetched history record %d is of table %q, which is no history table here", rec.Seq, rec.Table)
	case len(rec.ID) > maxIDLength:
		return fmt.Errorf("fetched history record %d has an id of %d bytes", rec.Seq, len(rec.ID))
	}
	if err := unhex(rec.ValueHash[:], wr.ValueHash); err != nil {
		return fmt.Errorf("fetched history record %d: value hash: %w", rec.Seq, err)
	}
	if err := unhex(rec.Hash[:], wr.Hash); err != nil {
		return fmt.Errorf("fetched history record %d: hash: %w", rec.Seq, err)
	}
	if chainHash(t.head.Hash, &rec) != rec.Hash {
		return fmt.Errorf("fetched history record %d does not continue this node's chain", rec.Seq)
	}
	var v any
	if wr.Dropped == 0 {
		if wr.Value == nil {
			return fmt.Errorf("fetched history record %d has no value", rec.Seq)
		}
		if sha256.Sum256(wr.Value) != rec.ValueHash {
			return fmt.Errorf("fetched history record %d: its value does not match its hash", rec.Seq)
		}
		var err error
		if v, err = td.decode(wr.Value); err != nil {
			return fmt.Errorf("fetched history record %d: %w", rec.Seq, err)
		}
	}
	key := u64(rec.Seq)
	t.must(t.appending(bucketChain).Put(key, rec.encode()), "import")
	t.head = histHead{Seq: rec.Seq, Index: rec.Index, Hash: rec.Hash}
	if wr.Dropped != 0 {
		t.must(t.tx.Bucket(bucketDropped).Put(key, u64(wr.Dropped)), "import")
		t.must(t.tx.Bucket(bucketDrops).Put(dropKey(wr.Dropped, rec.Seq), nil), "import")
		return nil
	}
	t.must(t.appending(bucketValues).Put(key, wr.Value), "import")
	t.index(rec.Table, rec.ID, td.keys(v), histRef{seq: rec.Seq, index: rec.Index}, true)
	t.count(rec.Table, 1)
	return nil
}

func unhex(dst []byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(dst) {
		return fmt.Errorf("%q is not %d hex-encoded bytes", s, len(dst))
	}
	copy(dst, b)
	return nil
}

// legacyRow is a history table's row in a snapshot of format 1, from before
// history tables were kept apart.
type legacyRow struct {
	table, id string
	index     uint64
	value     []byte
	v         any
}

// importLegacy replaces the history store with the history tables' rows of
// a format-1 snapshot, chained in the order of the commands that created
// them (then by table and ID, as commands chain their rows), so that nodes
// restoring the same snapshot build the same chain.
func (f *fsm) importLegacy(rows []legacyRow, through uint64) {
	slices.SortFunc(rows, func(a, b legacyRow) int {
		switch {
		case a.index != b.index:
			return cmp.Compare(a.index, b.index)
		case a.table != b.table:
			return strings.Compare(a.table, b.table)
		}
		return strings.Compare(a.id, b.id)
	})
	f.hist.drain()
	t := f.hist.begin()
	t.wipe()
	t.commit()
	head := histHead{}
	for chunk := range slices.Chunk(rows, importBatch) {
		t := f.hist.begin()
		t.head = head
		for _, r := range chunk {
			t.insert(r.index, r.table, r.id, r.value, f.tables[r.table].keys(r.v))
		}
		t.commit()
		head = t.head
	}
	f.hist.reset(head, through)
}
