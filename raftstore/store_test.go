package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// fastTiming keeps elections short in tests while leaving room for a loaded
// two-core machine running the race detector.
var fastTiming = Timing{
	HeartbeatTimeout:   300 * time.Millisecond,
	ElectionTimeout:    300 * time.Millisecond,
	LeaderLeaseTimeout: 200 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SVC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func openSingle(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Config{NodeID: "node-1", Dir: dir, Tables: testTables, Logger: testLogger(t), Timing: fastTiming})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "single node leads", s.IsLeader)
	return s
}

func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-tick.C:
		}
	}
}

func TestSingleNodePersistsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openSingle(t, dir)
	for i := range 20 {
		if _, err := s.Apply(ctx, things.Insert(&thing{ID: fmt.Sprintf("t%02d", i), N: i})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Writes after the snapshot live only in the log.
	last, err := s.Apply(ctx, things.Put(&thing{ID: "t00", N: 100}), entries.Insert(&entry{ID: "e"}))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Digest()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s = openSingle(t, dir)
	defer s.Close()
	if err := s.WaitIndex(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Digest(); got != want {
		t.Errorf("state after restart differs from before")
	}
	if v, _, _ := things.Get(s.Read(), "t00"); v.N != 100 {
		t.Errorf("t00.N = %d after restart, want 100", v.N)
	}
}

func TestNodeIDIsKeptInTheStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Tables: testTables, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	id := s.NodeID()
	if !strings.HasPrefix(id, "node-") {
		t.Errorf("generated node id %q", id)
	}
	s.Close()
	s, err = Open(Config{Dir: dir, Tables: testTables, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if s.NodeID() != id {
		t.Errorf("node id after restart = %q, want %q", s.NodeID(), id)
	}
	s.Close()
	_, err = Open(Config{NodeID: "someone-else", Dir: dir, Tables: testTables, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "belongs to node") {
		t.Errorf("open under another id = %v, want refusal", err)
	}
}

func TestSecondProcessOnSameDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := openSingle(t, dir)
	defer s.Close()
	_, err := Open(Config{NodeID: "node-1", Dir: dir, Tables: testTables, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open = %v, want in-use error", err)
	}
}

func TestApplyReportsRefusalsAndEncodingErrors(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "a"})); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(ctx, things.Insert(&thing{ID: "a"}))
	if !IsReason(err, ReasonExists) || errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("duplicate insert = %v, want exists / STATE_INVALID", err)
	}
	_, err = s.Apply(ctx, things.Insert(nil))
	if errcode.CodeOf(err) != errcode.Internal {
		t.Errorf("nil insert = %v, want INTERNAL", err)
	}
	_, err = s.Apply(ctx)
	if errcode.CodeOf(err) != errcode.Internal {
		t.Errorf("empty transaction = %v, want INTERNAL", err)
	}
	if _, err := s.Retain(ctx, notes, "x"); !IsReason(err, ReasonNotFound) {
		t.Errorf("retain missing = %v, want not found", err)
	}
}

// TestConsistentReadOnAQuietStore: after an election the last committed
// entries are a no-op and a barrier, which the FSM never sees; a consistent
// read must not wait for them (nor for the next write).
func TestConsistentReadOnAQuietStore(t *testing.T) {
	t.Run("single node", func(t *testing.T) {
		s := openSingle(t, t.TempDir())
		defer s.Close()
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.ConsistentRead(ctx); err != nil {
			t.Fatalf("consistent read on a quiet store: %v (status %+v)", err, s.Status())
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := newCluster(t, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lead := c.leader(ctx)
		for i := range c.nodes {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.nodes[i].ConsistentRead(rctx)
			rcancel()
			if err != nil {
				t.Errorf("consistent read on %s (leader %s): %v", c.peers[i].ID, c.peers[lead].ID, err)
			}
		}
	})
	t.Run("restored from its own snapshot", func(t *testing.T) {
		dir := t.TempDir()
		s := openSingle(t, dir)
		if _, err := s.Apply(context.Background(), things.Insert(&thing{ID: "a"})); err != nil {
			t.Fatal(err)
		}
		if err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
		applied := s.Status().AppliedIndex
		s.Close()
		s = openSingle(t, dir)
		defer s.Close()
		if got := s.Status().AppliedIndex; got < applied {
			t.Errorf("applied index after restoring the snapshot = %d, want %d", got, applied)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.ConsistentRead(ctx); err != nil {
			t.Fatalf("consistent read after a restart: %v", err)
		}
	})
}

func TestReaderWaitSeesChanges(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := s.Read()
	if _, _, ok := things.Get(r, "w"); ok {
		t.Fatal("row exists before the write")
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx) }()
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "w"})); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if _, _, ok := things.Get(s.Read(), "w"); !ok {
		t.Error("row missing after Wait returned")
	}
}

// cluster is an in-process cluster of store nodes on loopback TCP.
type cluster struct {
	t      testing.TB
	timing Timing
	peers  []Peer
	dirs   []string
	secret []byte
	nodes  []*Store
	runs   []*atomic.Int64 // per node: how often the leader loop started
	blobs  []BlobSource    // per node, if given: its Config.Blobs
}

// newCluster starts n nodes; blobs, if given, are their blob sources in
// order.
func newCluster(t testing.TB, n int, blobs ...BlobSource) *cluster {
	t.Helper()
	return newClusterTimed(t, fastTiming, n, blobs...)
}

// newClusterTimed is newCluster with the given timing.
func newClusterTimed(t testing.TB, timing Timing, n int, blobs ...BlobSource) *cluster {
	t.Helper()
	c := &cluster{t: t, secret: []byte("a-test-cluster-secret"), timing: timing, blobs: blobs}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.peers = append(c.peers, Peer{ID: fmt.Sprintf("node-%d", i+1), Addr: ln.Addr().String()})
		c.dirs = append(c.dirs, t.TempDir())
		c.runs = append(c.runs, new(atomic.Int64))
	}
	c.nodes = make([]*Store, n)
	for i := range n {
		c.start(i, lns[i])
	}
	t.Cleanup(func() {
		for _, s := range c.nodes {
			if s != nil {
				_ = s.Close()
			}
		}
	})
	return c
}

// start opens node i, binding its address again unless ln is given.
func (c *cluster) start(i int, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		var err error
		deadline := time.Now().Add(5 * time.Second)
		for {
			ln, err = net.Listen("tcp", c.peers[i].Addr)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			c.t.Fatalf("rebind %s: %v", c.peers[i].Addr, err)
		}
	}
	cfg := Config{
		NodeID: c.peers[i].ID, Dir: c.dirs[i], RaftAddr: c.peers[i].Addr, Listener: ln,
		Peers: c.peers, Secret: c.secret, Tables: testTables, Logger: testLogger(c.t), Timing: c.timing,
	}
	if i < len(c.blobs) {
		cfg.Blobs = c.blobs[i]
	}
	s, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open %s: %v", c.peers[i].ID, err)
	}
	runs := c.runs[i]
	s.RunWhileLeader("probe", func(ctx context.Context) error {
		runs.Add(1)
		<-ctx.Done()
		runs.Add(-1)
		return nil
	})
	c.nodes[i] = s
}

// restartOthers restarts every node but skip, keeping only trailing log
// entries behind a snapshot from now on: once they snapshot, their logs no
// longer reach back to what skip holds.
func (c *cluster) restartOthers(skip int, trailing uint64) {
	c.t.Helper()
	c.timing.TrailingLogs = trailing
	for i := range c.nodes {
		if i != skip {
			c.stop(i)
			c.start(i, nil)
		}
	}
}

func (c *cluster) stop(i int) {
	if err := c.nodes[i].Close(); err != nil {
		c.t.Logf("close %s: %v", c.peers[i].ID, err)
	}
	c.nodes[i] = nil
}

// leader waits until exactly one live node leads and returns its index.
func (c *cluster) leader(ctx context.Context) int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, ctx, "one leader", func() bool {
		idx = -1
		for i, s := range c.nodes {
			if s != nil && s.IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

// leaveBehind stops a follower and restarts the other nodes keeping few
// log entries after a snapshot, so that the follower, started again after
// they snapshotted, is sent a snapshot rather than the log. It returns the
// follower.
func (c *cluster) leaveBehind(ctx context.Context) int {
	c.t.Helper()
	behind := c.follower(c.leader(ctx))
	c.stop(behind)
	c.restartOthers(behind, 5)
	return behind
}

func (c *cluster) follower(leader int) int {
	for i, s := range c.nodes {
		if s != nil && i != leader {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}

// converged waits until every live node applied the same index and then
// checks that their states are identical.
func (c *cluster) converged(ctx context.Context) {
	c.t.Helper()
	waitFor(c.t, ctx, "nodes apply the same index", func() bool {
		var seen []uint64
		for _, s := range c.nodes {
			if s != nil {
				seen = append(seen, s.Status().AppliedIndex)
			}
		}
		for _, a := range seen {
			if a != seen[0] || a == 0 {
				return false
			}
		}
		return true
	})
	var want string
	for i, s := range c.nodes {
		if s == nil {
			continue
		}
		d, err := s.Digest()
		if err != nil {
			c.t.Fatal(err)
		}
		if want == "" {
			want = d
		} else if d != want {
			c.t.Errorf("%s has a different state from the others", c.peers[i].ID)
		}
	}
}

func TestClusterForwardsWritesAndRunsLoopsOnTheLeaderOnly(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lead := c.leader(ctx)
	waitFor(t, ctx, "leader loop runs on the leader", func() bool { return c.runs[lead].Load() == 1 })
	for i := range c.nodes {
		if i != lead && c.runs[i].Load() != 0 {
			t.Errorf("leader loop runs on follower %s", c.peers[i].ID)
		}
	}

	// A write on a follower is forwarded, and the follower sees it at once.
	f := c.follower(lead)
	if _, err := c.nodes[f].Apply(ctx, things.Insert(&thing{ID: "from-follower", Name: "n1"})); err != nil {
		t.Fatalf("write via follower: %v", err)
	}
	if _, _, ok := things.Get(c.nodes[f].Read(), "from-follower"); !ok {
		t.Errorf("follower does not see its own forwarded write")
	}
	// A refusal travels back through the forwarding connection intact.
	_, err := c.nodes[f].Apply(ctx, things.Insert(&thing{ID: "other", Name: "n1"}))
	var te *TxnError
	if !errors.As(err, &te) || te.Reason != ReasonConflict || te.Index != "name" || errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("refused forwarded write = %#v, want a name conflict", err)
	}
	// A consistent read on another follower sees a write made on the leader.
	if _, err := c.nodes[lead].Apply(ctx, things.Insert(&thing{ID: "on-leader"})); err != nil {
		t.Fatal(err)
	}
	for i := range c.nodes {
		r, err := c.nodes[i].ConsistentRead(ctx)
		if err != nil {
			t.Fatalf("consistent read on %s: %v", c.peers[i].ID, err)
		}
		if _, _, ok := things.Get(r, "on-leader"); !ok {
			t.Errorf("consistent read on %s misses a committed write", c.peers[i].ID)
		}
	}

	// The leader goes away: another node leads and runs the loops.
	c.stop(lead)
	next := c.leader(ctx)
	waitFor(t, ctx, "leader loop runs on the new leader", func() bool { return c.runs[next].Load() == 1 })
	if n := c.runs[lead].Load(); n != 0 {
		t.Errorf("stopped node still runs %d loops", n)
	}
	if _, err := c.nodes[c.follower(next)].Apply(ctx, things.Insert(&thing{ID: "after-failover"})); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	c.start(lead, nil)
	c.converged(ctx)
	if _, _, ok := things.Get(c.nodes[lead].Read(), "after-failover"); !ok {
		t.Errorf("restarted node did not catch up")
	}
}

// TestClusterKeepsAcknowledgedWrites writes from several clients through every
// node while the leader is stopped and restarted, and then finds every
// acknowledged write on every node.
func TestClusterKeepsAcknowledgedWrites(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c.leader(ctx)

	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
		stop  atomic.Bool
		fails atomic.Int64
	)
	var nodesMu sync.RWMutex
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				nodesMu.RLock()
				s := c.nodes[(w+i)%len(c.nodes)]
				nodesMu.RUnlock()
				if s == nil {
					continue
				}
				id := fmt.Sprintf("w%d-%05d", w, i)
				wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
				_, err := s.Apply(wctx, things.Insert(&thing{ID: id}), entries.Insert(&entry{ID: id}))
				wcancel()
				if err != nil {
					fails.Add(1)
					continue
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	for round := range 3 {
		time.Sleep(700 * time.Millisecond)
		lead := c.leader(ctx)
		nodesMu.Lock()
		c.stop(lead)
		nodesMu.Unlock()
		c.leader(ctx)
		time.Sleep(300 * time.Millisecond)
		nodesMu.Lock()
		c.start(lead, nil)
		nodesMu.Unlock()
		t.Logf("round %d: stopped and restarted %s", round, c.peers[lead].ID)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	c.converged(ctx)

	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged; the test did not exercise the cluster", len(acked))
	}
	for i, s := range c.nodes {
		r := s.Read()
		missing := 0
		for _, id := range acked {
			_, _, ok1 := things.Get(r, id)
			_, _, ok2 := entries.Get(r, id)
			if !ok1 || !ok2 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s misses %d of %d acknowledged writes", c.peers[i].ID, missing, len(acked))
		}
	}
	t.Logf("%d writes acknowledged, %d refused or unconfirmed", len(acked), fails.Load())
}

// TestClusterCatchesUpAFollowerFromASnapshot stops a follower, writes
// enough that the leader compacts its log past what the follower has, and
// restarts the follower: it can only catch up by installing the leader's
// snapshot, which exercises Persist and Restore across nodes.
func TestClusterCatchesUpAFollowerFromASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	behind := c.leaveBehind(ctx)
	lead := c.leader(ctx)
	for i := range 200 {
		id := fmt.Sprintf("s%03d", i)
		write(t, c.leading(ctx), func(r *Reader) bool { _, _, ok := things.Get(r, id); return ok },
			things.Insert(&thing{ID: id, Name: fmt.Sprintf("n%03d", i)}))
	}
	if err := c.nodes[c.leader(ctx)].Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	leaderApplied := c.nodes[lead].Status().AppliedIndex
	c.start(behind, nil)
	c.converged(ctx)
	r := c.nodes[behind].Read()
	if n := things.Count(r); n != 200 {
		t.Errorf("the follower has %d rows after catching up, want 200", n)
	}
	if _, _, ok := things.First(r, "name", "n150"); !ok {
		t.Errorf("indexes were not rebuilt from the snapshot")
	}
	if got := c.nodes[behind].Status().AppliedIndex; got < leaderApplied {
		t.Errorf("follower applied %d, leader was at %d", got, leaderApplied)
	}
}

func TestClusterRefusesANodeWithTheWrongSecret(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := c.leader(ctx)

	m := newMux(nil, []byte("not-the-cluster-secret"), testLogger(t))
	_, err := m.dial(c.peers[lead].Addr, connForward, time.Second)
	if err == nil {
		t.Fatal("a client with the wrong secret completed the handshake")
	}
	// A client that knows the secret is admitted.
	good := newMux(nil, c.secret, testLogger(t))
	conn, err := good.dial(c.peers[lead].Addr, connForward, time.Second)
	if err != nil {
		t.Fatalf("dial with the right secret: %v", err)
	}
	conn.Close()
}

func TestSweep(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Apply(ctx, things.Insert(&thing{ID: fmt.Sprintf("t%d", i), N: i})); err != nil {
			t.Fatal(err)
		}
	}
	odd := func(v *thing) bool { return v.N%2 == 1 }
	n, err := things.Sweep(ctx, s, Query{}, odd, 1)
	if err != nil || n != 1 {
		t.Fatalf("Sweep with max 1 = %d, %v", n, err)
	}
	// t2 changes after Sweep read it, so that it no longer qualifies: it is
	// judged again on the newer view and left; the others go.
	var once sync.Once
	n, err = things.Sweep(ctx, s, Query{}, func(v *thing) bool {
		once.Do(func() {
			if _, err := s.Apply(ctx, things.Put(&thing{ID: "t2", N: 0})); err != nil {
				t.Errorf("change t2: %v", err)
			}
		})
		return v.N != 0
	}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	items, _ := things.List(s.Read(), Query{})
	for _, it := range items {
		left = append(left, it.Value.ID)
	}
	if n != 2 || strings.Join(left, ",") != "t0,t2" {
		t.Errorf("Sweep over a changing row deleted %d, left %v; want 2 deleted (t3, t4), t0 and the changed t2 left", n, left)
	}
	if n, err := things.Sweep(ctx, s, Query{}, func(*thing) bool { return false }, 10); n != 0 || err != nil {
		t.Errorf("Sweep of nothing = %d, %v", n, err)
	}
}
