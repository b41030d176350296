package raftstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// A saved store is the whole replicated state as files, for a
// disaster-recovery bundle: the FSM's snapshot at an applied index, the
// history chain through that index (the records a snapshot only names by
// its head), and what they add up to. Install writes a saved store into
// the directory of a new node, which starts from it as a single-node
// cluster with the same state, digest included.
const (
	savedSnapshotFile = "snapshot.jsonl"
	savedHistoryFile  = "history.jsonl"
	savedInfoFile     = "saved.json"
)

// Saved describes a saved store.
type Saved struct {
	// Applied is the last command the saved state includes.
	Applied uint64 `json:"applied"`
	// Digest is the state's digest (Store.Digest) at Applied.
	Digest string `json:"digest"`
	// HistoryRecords is the length of the history chain at Applied.
	HistoryRecords uint64 `json:"history_records"`
}

// Save writes a consistent copy of the whole state into dir, which must be
// empty or not exist: a snapshot of the FSM taken through Raft (a new one,
// or the latest when nothing was applied since), and the history chain
// through the snapshot's index. It does not stop writes.
func (s *Store) Save(ctx context.Context, dir string) (Saved, error) {
	if err := emptyDir(dir); err != nil {
		return Saved{}, fmt.Errorf("save store: %w", err)
	}
	rc, err := s.openSnapshot()
	if err != nil {
		return Saved{}, fmt.Errorf("save store: %w", err)
	}
	err = writeFileFrom(filepath.Join(dir, savedSnapshotFile), rc)
	_ = rc.Close()
	if err != nil {
		return Saved{}, fmt.Errorf("save store: snapshot: %w", err)
	}
	saved, head, err := s.fsm.digestSaved(filepath.Join(dir, savedSnapshotFile))
	if err != nil {
		return Saved{}, fmt.Errorf("save store: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Saved{}, err
	}
	// The snapshot's index is persisted, so history is committed through
	// it; a drop after it whose value a later snapshot let go makes the
	// range unavailable (the next save takes a newer snapshot).
	hist, _, err := s.fsm.hist.export(historyRange{ToSeq: head.Seq, Through: saved.Applied}, dir)
	if err != nil {
		return Saved{}, fmt.Errorf("save store: history through index %d: %w", saved.Applied, err)
	}
	err = writeFileFrom(filepath.Join(dir, savedHistoryFile), hist)
	_ = hist.Close()
	if err != nil {
		return Saved{}, fmt.Errorf("save store: history: %w", err)
	}
	info, _ := json.Marshal(saved)
	if err := writeFileFrom(filepath.Join(dir, savedInfoFile), bytes.NewReader(info)); err != nil {
		return Saved{}, fmt.Errorf("save store: %w", err)
	}
	return saved, nil
}

// openSnapshot takes a snapshot through Raft and opens it; when nothing
// was applied since the last one, that one is the state and is opened.
func (s *Store) openSnapshot() (io.ReadCloser, error) {
	fut := s.raft.Snapshot()
	err := fut.Error()
	if err == nil {
		_, rc, err := fut.Open()
		return rc, err
	}
	if !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, fmt.Errorf("take a snapshot: %w", err)
	}
	metas, err := s.snaps.List()
	if err != nil || len(metas) == 0 {
		return nil, fmt.Errorf("open the latest snapshot: %v", err)
	}
	_, rc, err := s.snaps.Open(metas[0].ID)
	return rc, err
}

// digestSaved reads a snapshot file and returns what it saves: its index,
// the digest of its state (the same as digest computes over the state it
// restores) and its history head.
func (f *fsm) digestSaved(path string) (Saved, histHead, error) {
	file, err := os.Open(path)
	if err != nil {
		return Saved{}, histHead{}, err
	}
	defer file.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(file, 1<<16))
	var hdr snapshotHeader
	if err := dec.Decode(&hdr); err != nil {
		return Saved{}, histHead{}, fmt.Errorf("snapshot header: %w", err)
	}
	if hdr.Format != snapshotFormat || hdr.History == nil {
		return Saved{}, histHead{}, fmt.Errorf("snapshot format %d: want %d with a history head", hdr.Format, snapshotFormat)
	}
	head, err := hdr.History.head()
	if err != nil {
		return Saved{}, histHead{}, err
	}
	d := newStateDigest()
	indexes := map[string]uint64{}
	for {
		var rec snapshotRecord
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			return Saved{}, histHead{}, fmt.Errorf("snapshot record: %w", err)
		}
		if rec.IndexOf != "" {
			indexes[rec.IndexOf] = rec.Index
			continue
		}
		d.row(rec.Table, rec.ID, rec.C, rec.M, rec.Value)
	}
	digest := d.sum(f.all, func(name string) uint64 { return indexes[name] }, head)
	return Saved{Applied: hdr.Applied, Digest: digest, HistoryRecords: head.Seq}, head, nil
}

// InstallConfig names the new node a saved store is installed for.
type InstallConfig struct {
	// Dir is the node's store directory; it must hold no store.
	Dir string
	// NodeID and RaftAddr are the node's, as it will be opened (empty:
	// a new id and a single node without a network transport).
	NodeID   string
	RaftAddr string
	Tables   []Def
}

// Install writes the saved store in savedDir into the store directory of a
// new node, which then starts from that state as the only server of a new
// cluster: the history chain is imported and checked against the
// snapshot's head, and the snapshot installed with a configuration of
// this node alone. It refuses a directory that holds a store already, and
// removes what it wrote when it fails.
func Install(cfg InstallConfig, savedDir string) (_ Saved, err error) {
	if cfg.Dir == "" {
		return Saved{}, errors.New("install store: no data directory")
	}
	if err := emptyDir(cfg.Dir); err != nil {
		return Saved{}, fmt.Errorf("install store: %w (a saved store is installed only into a new installation)", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(cfg.Dir)
		}
	}()
	var want Saved
	b, err := os.ReadFile(filepath.Join(savedDir, savedInfoFile))
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %s: %w", savedInfoFile, err)
	}
	id, err := resolveNodeID(cfg.Dir, cfg.NodeID)
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	f, err := newFSM(cfg.Tables, cfg.Dir)
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	defer func() { _ = f.hist.close() }()
	got, head, err := f.digestSaved(filepath.Join(savedDir, savedSnapshotFile))
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	if got != want {
		return Saved{}, fmt.Errorf("install store: the snapshot adds up to index %d, digest %s, not the saved index %d, digest %s",
			got.Applied, got.Digest, want.Applied, want.Digest)
	}
	hf, err := os.Open(filepath.Join(savedDir, savedHistoryFile))
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	imported, err := f.hist.importRange(bufio.NewReaderSize(hf, 1<<16), histHead{})
	_ = hf.Close()
	if err != nil {
		return Saved{}, fmt.Errorf("install store: history: %w", err)
	}
	if imported != head {
		return Saved{}, fmt.Errorf("install store: the saved history ends at record %d, not at the snapshot's head %d", imported.Seq, head.Seq)
	}
	addr := raft.ServerAddress(inmemAddr)
	if cfg.RaftAddr != "" {
		addr = raft.ServerAddress(cfg.RaftAddr)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, newHCLog(slog.New(slog.DiscardHandler), "raft"))
	if err != nil {
		return Saved{}, fmt.Errorf("install store: snapshot store: %w", err)
	}
	// A new cluster: its first term, this node its only voter. Raft
	// restores the snapshot when the node opens, and the history store,
	// already at the snapshot's head, has nothing to fetch.
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(id), Address: addr, Suffrage: raft.Voter}}}
	// The transport only encodes the peers of the legacy format: an
	// address as itself, as the network transport does too.
	_, trans := raft.NewInmemTransport(addr)
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, want.Applied, 1, conf, want.Applied, trans)
	if err != nil {
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	sf, err := os.Open(filepath.Join(savedDir, savedSnapshotFile))
	if err != nil {
		_ = sink.Cancel()
		return Saved{}, fmt.Errorf("install store: %w", err)
	}
	_, err = io.Copy(sink, sf)
	_ = sf.Close()
	if err != nil {
		_ = sink.Cancel()
		return Saved{}, fmt.Errorf("install store: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return Saved{}, fmt.Errorf("install store: write snapshot: %w", err)
	}
	return want, nil
}

// emptyDir makes sure dir exists and holds nothing.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(es) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

// writeFileFrom writes r into a new file at path and syncs it.
func writeFileFrom(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
