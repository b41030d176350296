package raftstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSaveAndInstallIntoANewNode: a store saved while it runs (history
// rows inserted and dropped on both sides of an earlier snapshot) and
// installed into the directory of a new node under another id gives that
// node the same state: the same digest, rows and history chain, which
// verifies; the node takes writes and keeps them across a restart.
func TestSaveAndInstallIntoANewNode(t *testing.T) {
	s := openHist(t, t.TempDir())
	writeRecords(t, single(s), hlog, 0, 30)
	dropRecords(t, single(s), "r00003")
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	dropRecords(t, single(s), "r00004")
	writeRecords(t, single(s), hlog, 30, 10)
	writeRecords(t, single(s), hevents, 100, 5)
	wantIDs, wantHead, wantDigest := listIDs(s, hlog), s.HistoryHead(), digestOf(t, s)

	saved := filepath.Join(t.TempDir(), "store")
	got, err := s.Save(context.Background(), saved)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != wantDigest || got.HistoryRecords != wantHead.Records {
		t.Fatalf("saved digest %s with %d history records, want the store's %s with %d", got.Digest, got.HistoryRecords, wantDigest, wantHead.Records)
	}
	// Saved again with nothing applied since: the same snapshot, the same state.
	again, err := s.Save(context.Background(), filepath.Join(t.TempDir(), "store"))
	if err != nil || again != got {
		t.Fatalf("saved again: %+v, %v; want %+v", again, err, got)
	}
	// The original goes on, and is not what the new node gets.
	writeRecords(t, single(s), hlog, 40, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "raft")
	installed, err := Install(InstallConfig{Dir: dir, NodeID: "node-9", Tables: testTables}, saved)
	if err != nil {
		t.Fatal(err)
	}
	if installed != got {
		t.Fatalf("installed %+v, want %+v", installed, got)
	}
	n := openNode(t, dir, "node-9")
	if d := digestOf(t, n); d != wantDigest {
		t.Fatalf("the new node's digest is %s, want the saved %s", d, wantDigest)
	}
	if ids := listIDs(n, hlog); !slices.Equal(ids, wantIDs) {
		t.Fatalf("the new node's rows are %v, want %v", ids, wantIDs)
	}
	if h := n.HistoryHead(); h != wantHead {
		t.Fatalf("the new node's history head is %+v, want %+v", h, wantHead)
	}
	if rep := verify(t, n); rep.Checked != wantHead.Records || rep.Dropped != 2 {
		t.Errorf("verify checked %d records (%d dropped), want %d (2 dropped)", rep.Checked, rep.Dropped, wantHead.Records)
	}
	writeRecords(t, single(n), hlog, 50, 2)
	want := listIDs(n, hlog)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir, "node-9")
	waitFor(t, context.Background(), "the log after the installed snapshot is replayed", func() bool { return slices.Equal(listIDs(n, hlog), want) })
	verify(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInstallRefusesWhatDoesNotAddUp: a saved store is installed only
// into an empty directory, and only when its parts agree: a changed
// snapshot row, a history that does not reach the snapshot's head, or a
// changed history record is refused, and the directory is left empty.
func TestInstallRefusesWhatDoesNotAddUp(t *testing.T) {
	s := openHist(t, t.TempDir())
	writeRecords(t, single(s), hlog, 0, 10)
	saved := filepath.Join(t.TempDir(), "store")
	if _, err := s.Save(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(context.Background(), saved); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("saving into a directory that is not empty: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(saved, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	snap, hist := read(savedSnapshotFile), read(savedHistoryFile)
	lines := strings.SplitAfter(hist, "\n")
	cases := []struct {
		name, file, content, want string
	}{
		{"a row changed", savedSnapshotFile, strings.Replace(snap, `"n":9`, `"n":8`, 1), "not the saved"},
		{"history cut short", savedHistoryFile, strings.Join(lines[:len(lines)-3], ""), "not at the snapshot's head"},
		{"a history value changed", savedHistoryFile, strings.Replace(hist, `u1`, `u2`, 1), "does not match its hash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.content == read(c.file) {
				t.Fatal("the case changes nothing")
			}
			bad := t.TempDir()
			for _, name := range []string{savedSnapshotFile, savedHistoryFile, savedInfoFile} {
				content := read(name)
				if name == c.file {
					content = c.content
				}
				if err := os.WriteFile(filepath.Join(bad, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(t.TempDir(), "raft")
			_, err := Install(InstallConfig{Dir: dir, Tables: testTables}, bad)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("install: %v, want an error saying %q", err, c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("a refused install left %s behind (%v)", dir, err)
			}
		})
	}
	// A directory that holds a store already is not overwritten.
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "raft.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(InstallConfig{Dir: used, Tables: testTables}, saved); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("install over a store: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(used, "raft.db")); string(b) != "x" {
		t.Error("install touched a directory that holds a store")
	}
}

func openNode(t *testing.T, dir, id string) *Store {
	t.Helper()
	s, err := Open(Config{NodeID: id, Dir: dir, Tables: testTables, Logger: testLogger(t), Timing: fastTiming})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "the node leads", s.IsLeader)
	if _, err := s.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzInstall: whatever a saved store's files hold (the snapshot and the
// history changed, cut or made up), Install either installs a store
// whose parts add up or refuses, and leaves nothing behind when it
// refuses; it never panics.
func FuzzInstall(f *testing.F) {
	// No test logger: the store's goroutines would log through f while
	// the fuzzing worker runs.
	s, err := Open(Config{NodeID: "node-1", Dir: f.TempDir(), Tables: testTables, Timing: fastTiming})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.ConsistentRead(ctx); err != nil {
		f.Fatal(err)
	}
	writeRecords(f, single(s), hlog, 0, 3)
	saved := filepath.Join(f.TempDir(), "store")
	if _, err := s.Save(context.Background(), saved); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(saved, name))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	snap, hist, info := read(savedSnapshotFile), read(savedHistoryFile), read(savedInfoFile)
	f.Add(snap, hist)
	f.Add(snap[:len(snap)/2], hist)
	f.Add(snap, hist[:len(hist)/3])
	f.Add([]byte(`{"format":2,"applied":1,"history":{"records":0,"index":0,"hash":""}}`), []byte{})
	f.Fuzz(func(t *testing.T, snapshot, history []byte) {
		in := t.TempDir()
		for name, b := range map[string][]byte{savedSnapshotFile: snapshot, savedHistoryFile: history, savedInfoFile: info} {
			if err := os.WriteFile(filepath.Join(in, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(t.TempDir(), "raft")
		if _, err := Install(InstallConfig{Dir: dir, NodeID: "node-9", Tables: testTables}, in); err != nil {
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Fatalf("a refused install (%v) left %s behind", err, dir)
			}
		}
	})
}

// BenchmarkSaveAndInstall measures an installation bundle's store part:
// saving a store of 20,000 live rows and 20,000 history records (Save:
// a Raft snapshot, the history chain, the digest), then installing it
// into a new node's directory (Install: the history imported and
// checked, the snapshot written). It reports the saved bytes per second.
func BenchmarkSaveAndInstall(b *testing.B) {
	s, err := Open(Config{NodeID: "node-1", Dir: benchDir(b), Tables: testTables, Timing: fastTiming})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.ConsistentRead(ctx); err != nil {
		b.Fatal(err)
	}
	for c := range 200 {
		ops := make([]Op, 0, 200)
		for i := range 100 {
			n := c*100 + i
			ops = append(ops, things.Put(&thing{ID: fmt.Sprintf("t%06d", n), Name: fmt.Sprintf("thing %06d %s", n, strings.Repeat("x", 52)), N: n}),
				hlog.Insert(&record{ID: fmt.Sprintf("r%06d", n), Kind: "k", Who: "u"}))
		}
		if _, err := s.Update(ctx, func(*Reader) ([]Op, error) { return ops, nil }); err != nil {
			b.Fatal(err)
		}
	}
	var size int64
	for b.Loop() {
		b.StopTimer()
		dir := benchDir(b)
		b.StartTimer()
		if _, err := s.Save(ctx, filepath.Join(dir, "saved")); err != nil {
			b.Fatal(err)
		}
		if _, err := Install(InstallConfig{Dir: filepath.Join(dir, "raft"), Tables: testTables}, filepath.Join(dir, "saved")); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		size = 0
		for _, name := range []string{savedSnapshotFile, savedHistoryFile} {
			fi, err := os.Stat(filepath.Join(dir, "saved", name))
			if err != nil {
				b.Fatal(err)
			}
			size += fi.Size()
		}
		// The next save must take a new snapshot, as a bundle of a live
		// store does.
		if _, err := s.Update(ctx, func(*Reader) ([]Op, error) { return []Op{things.Put(&thing{ID: "tick", N: b.N})}, nil }); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.SetBytes(size)
	b.ReportMetric(float64(size)/(1<<20), "saved-MiB")
}
