//go:build linux

// The benchmarks need Linux for unix.Fdatasync (the call bbolt, and so the
// Raft log, makes on Linux); elsewhere the package's tests run without them.

package raftstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchTiming is the Raft timing of the benchmark clusters: Raft's defaults,
// as a production node has them (CommitTimeout 50ms). The three-node cluster
// starts once per run and its first election takes one to two seconds; the
// shorter fastTiming would save about one, at the price of spurious elections,
// and so failed writes, on a loaded machine.
var benchTiming = Timing{}

// benchDir returns a new directory for one benchmark's data, removed when the
// benchmark ends. It lies under $SVC_BENCH_DIR if that is set, else under the
// repository's .bench directory, so that the data is on the work dir's disk
// rather than on a tmpfs /tmp.
func benchDir(b *testing.B) string {
	b.Helper()
	parent := os.Getenv("SVC_BENCH_DIR")
	if parent == "" {
		root, err := repoRoot()
		if err != nil {
			b.Fatal(err)
		}
		parent = filepath.Join(root, ".bench")
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "raftstore-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			b.Logf("remove %s: %v", dir, err)
		}
	})
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && (st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC) {
		b.Logf("warning: %s is in memory; the figures do not reflect a disk", dir)
	}
	return dir
}

// repoRoot finds the module root above the working directory, which go test
// sets to the package directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// openBenchCluster starts n nodes with the given timing in a benchDir and
// waits for a leader. One node is a production single node (no network
// transport); several talk over loopback TCP like newCluster's. The nodes
// close when the benchmark ends.
func openBenchCluster(b *testing.B, n int, timing Timing) *cluster {
	b.Helper()
	dir := benchDir(b)
	c := &cluster{t: b, secret: []byte("a-bench-cluster-secret"), nodes: make([]*Store, n)}
	b.Cleanup(func() {
		for _, s := range c.nodes {
			if s != nil {
				_ = s.Close()
			}
		}
	})
	lns := make([]net.Listener, n)
	for i := range n {
		c.peers = append(c.peers, Peer{ID: fmt.Sprintf("node-%d", i+1)})
		c.dirs = append(c.dirs, filepath.Join(dir, c.peers[i].ID))
		if n == 1 {
			break
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[i] = ln
		c.peers[i].Addr = ln.Addr().String()
	}
	for i := range n {
		cfg := Config{NodeID: c.peers[i].ID, Dir: c.dirs[i], Tables: testTables, Logger: testLogger(b), Timing: timing}
		if n > 1 {
			cfg.RaftAddr, cfg.Listener, cfg.Peers, cfg.Secret = c.peers[i].Addr, lns[i], c.peers, c.secret
		}
		s, err := Open(cfg)
		if err != nil {
			b.Fatalf("open %s: %v", c.peers[i].ID, err)
		}
		c.nodes[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.leader(ctx)
	return c
}

// BenchmarkReplicatedWrites measures committed writes, each a transaction of
// a change and its audit entry (a row of a history table, as the audit log
// is), by 1 and by 64 concurrent writers, on a single node and on a
// three-node cluster. b.N writes are shared among the writers.
func BenchmarkReplicatedWrites(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			c := openBenchCluster(b, nodes, benchTiming)
			var ids atomic.Int64 // row IDs stay unique across sub-benchmarks
			run := func(name string, writers int, viaFollower bool, audit func(id string) Op) {
				b.Run(name, func(b *testing.B) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					target := c.leader(ctx)
					if viaFollower {
						target = c.follower(target)
					}
					benchWrites(b, c.nodes[target], writers, &ids, audit)
				})
			}
			run("writers=1", 1, false, historyAudit)
			run("writers=64", 64, false, historyAudit)
			if nodes > 1 {
				run("writers=1/via=follower", 1, true, historyAudit)
				run("writers=64/via=follower", 64, true, historyAudit)
			} else {
				// What the history store costs: the audit entry in memdb.
				run("writers=1/audit=memdb", 1, false, memdbAudit)
				run("writers=64/audit=memdb", 64, false, memdbAudit)
			}
		})
	}
}

// historyAudit is a write's audit entry as the audit log keeps it: a row of
// a history table; memdbAudit the same entry in memory, as before history
// tables.
func historyAudit(id string) Op {
	return hevents.Insert(&record{ID: id, Kind: "thing.create", Who: "bench", Tags: []string{"created thing " + id + " for the benchmark"}})
}

func memdbAudit(id string) Op {
	return entries.Insert(&entry{ID: id, Text: "created thing " + id + " for the benchmark"})
}

func benchWrites(b *testing.B, s *Store, writers int, ids *atomic.Int64, audit func(id string) Op) {
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	var (
		next     atomic.Int64
		failed   atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				id := "b" + strconv.FormatInt(ids.Add(1), 10)
				start := time.Now()
				_, err := s.Apply(ctx,
					things.Insert(&thing{ID: id, Name: "thing " + id, Owner: "bench", N: int(i)}), audit(id))
				lat[i] = time.Since(start)
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d writes failed, the first with: %v", n, b.N, firstErr)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	reportLatency(b, lat)
}

// reportLatency reports the median and 99th percentile of the durations.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p int) float64 {
		return float64(lat[(len(lat)-1)*p/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(99), "p99-ms")
}

// BenchmarkFsync measures the raw sync rate of the disk the replicated-write
// benchmarks write to: each operation overwrites a 4 KiB block of a
// preallocated file and syncs it. With writers=64 each of 64 goroutines syncs
// its own file, which shows whether the disk serves syncs in parallel.
// fdatasync is what bbolt (the Raft log) calls on Linux.
func BenchmarkFsync(b *testing.B) {
	syncs := []struct {
		name string
		sync func(*os.File) error
	}{
		{"fsync", (*os.File).Sync},
		{"fdatasync", func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }},
	}
	for _, sy := range syncs {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", sy.name, writers), func(b *testing.B) {
				benchSync(b, writers, sy.sync)
			})
		}
	}
}

func benchSync(b *testing.B, writers int, syncFile func(*os.File) error) {
	const (
		block  = 4 << 10
		blocks = 256
	)
	dir := benchDir(b)
	buf := make([]byte, block)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	files := make([]*os.File, writers)
	for w := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("sync-%02d", w)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for range blocks {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		files[w] = f
	}
	lat := make([]time.Duration, b.N)
	var (
		next     atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for _, f := range files {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				start := time.Now()
				_, err := f.WriteAt(buf, (i%blocks)*block)
				if err == nil {
					err = syncFile(f)
				}
				lat[i] = time.Since(start)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
	reportLatency(b, lat)
}
