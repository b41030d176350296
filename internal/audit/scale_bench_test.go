package audit

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// thing is the live row each audited write of BenchmarkAuditedWrites
// changes, as a rename changes a launcher section.
type thing struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

var things = &raftstore.Table[thing]{Name: "things", ID: func(t *thing) string { return t.ID }}

// BenchmarkAuditedWrites writes SVC_BENCH_AUDIT_ENTRIES audited changes
// (default 1,000,000) to a real single-node store on disk (under
// $SVC_BENCH_DIR when set), 64 writers at a time, each change a row of the
// writer's own put through Update with its audit entry, as a request writes
// them. It reports:
//
//   - writes/s: audited changes committed per second;
//   - heap-MB/M-entries: the heap the process holds after the writes and a
//     garbage collection, less what it held before them, per million
//     entries (the state machine's memory per entry of history);
//   - raft-log-MB, history-MB, snapshots-MB: the store's files on disk;
//   - query-p50-ms, query-p99-ms: GET /audit's query over all the entries,
//     for each filter BenchmarkQuery uses, first and deep pages alike.
//
// It takes minutes: make bench runs it once (-benchtime 1x).
func BenchmarkAuditedWrites(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("SVC_BENCH_AUDIT_ENTRIES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1000 {
			b.Fatalf("SVC_BENCH_AUDIT_ENTRIES=%q: want a whole number of at least 1000", s)
		}
		n = v
	}
	for b.Loop() {
		benchAuditedWrites(b, n)
	}
}

func benchAuditedWrites(b *testing.B, n int) {
	dir := benchDir(b)
	s, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: dir, Tables: []raftstore.Def{Entries, things}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.ConsistentRead(ctx); err != nil {
		b.Fatal(err)
	}
	before := heapInUse()

	u := newUniverse(1000, 50, 200)
	const writers = 64
	var (
		next     atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			// Each writer makes its own entries; IDs only need to be unique
			// and roughly time-ordered, as real ones are.
			gen := genEntries(u, 1, uint64(w)+100)
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			g := idGen(uint64(w)+1000, time.Now(), time.Microsecond)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				e := gen[0]
				e.ID = g.New(ids.Audit)
				e.Time = time.Now().UTC()
				e.RequestID = fmt.Sprintf("req_%d", i)
				e.Details = map[string]any{"name": fmt.Sprintf("section %d", i)}
				e.Action = u.actions[rng.IntN(len(u.actions))]
				e.PrincipalID = u.users[rng.IntN(len(u.users))]
				t := thing{ID: fmt.Sprintf("thing-%02d", w), Name: fmt.Sprintf("name %d", i)}
				_, err := s.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
					_, m, _ := things.Get(r, t.ID)
					return []raftstore.Op{things.PutIf(&t, m.ModifyIndex), Insert(&e)}, nil
				})
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := firstErr.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "writes/s")
	after := heapInUse()
	b.ReportMetric(float64(int64(after)-int64(before))/(1<<20)*1e6/float64(n), "heap-MB/M-entries")

	r := s.Read()
	if got := Entries.Count(r); got != n {
		b.Fatalf("the store holds %d audit entries, want %d", got, n)
	}
	var lat []time.Duration
	for _, f := range []Filter{
		{}, {PrincipalID: u.users[0]}, {PrincipalID: u.users[999]}, {Action: "secret.read"}, {Action: "app."},
		{Action: "grant."}, {Involving: u.users[3]}, {PrincipalKind: PrincipalToken}, {PrincipalID: "usr_none"},
	} {
		before := ""
		for range 20 {
			t0 := time.Now()
			page, more := Query(s.Read(), f, before, DefaultLimit)
			lat = append(lat, time.Since(t0))
			if !more || len(page) == 0 {
				break
			}
			before = page[len(page)-1].ID
		}
	}
	slices.Sort(lat)
	ms := func(p int) float64 { return float64(lat[(len(lat)-1)*p/100]) / float64(time.Millisecond) }
	b.ReportMetric(ms(50), "query-p50-ms")
	b.ReportMetric(ms(99), "query-p99-ms")
	b.ReportMetric(dirMB(b, dir, "raft.db"), "raft-log-MB")
	b.ReportMetric(dirMB(b, dir, "history.db"), "history-MB")
	b.ReportMetric(dirMB(b, dir, "snapshots"), "snapshots-MB")
}

// heapInUse returns the heap in use after a full garbage collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// dirMB returns the size in MB of the files under dir/name (a file or a
// directory; 0 when absent).
func dirMB(b *testing.B, dir, name string) float64 {
	var total int64
	err := filepath.WalkDir(filepath.Join(dir, name), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	return float64(total) / (1 << 20)
}

// benchDir is a directory for the benchmark's store, on the disk
// $SVC_BENCH_DIR names when set, removed when the benchmark ends.
func benchDir(b *testing.B) string {
	parent := os.Getenv("SVC_BENCH_DIR")
	if parent == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "audit-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
