package raftstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// readsUntilCaughtUp reads node s as the server and the edge do (CaughtUp,
// then Read) again and again until a read finds every row of want, and
// fails the test on a read that finds some missing: a node must answer
// STORE_UNAVAILABLE, never "absent", for what it has not seen yet. It
// returns how many reads were refused as unavailable.
func readsUntilCaughtUp(ctx context.Context, t *testing.T, s *Store, want []string) (unavailable int) {
	t.Helper()
	for {
		if err := s.CaughtUp(); err != nil {
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.StoreUnavailable || e.RetryAfter <= 0 {
				t.Fatalf("a node behind answered %v; want STORE_UNAVAILABLE with Retry-After", err)
			}
			unavailable++
			select {
			case <-ctx.Done():
				t.Fatalf("the node did not catch up (%d reads refused): %v; status %+v", unavailable, err, s.Status())
			case <-time.After(time.Millisecond):
			}
			continue
		}
		r := s.Read()
		var missing []string
		for _, id := range want {
			if _, _, ok := things.Get(r, id); !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			t.Fatalf("a node that says it has caught up misses %d of %d rows (first %s): it answers as if they did not exist", len(missing), len(want), missing[0])
		}
		return unavailable
	}
}

// writeThings inserts things prefix-000… through node s and returns their IDs.
func writeThings(ctx context.Context, t *testing.T, s *Store, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		if _, err := s.Apply(ctx, things.Insert(&thing{ID: id})); err != nil {
			t.Fatalf("write %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestANodeBehindAnswersUnavailableNotAbsent: node x, restarted from its
// own snapshot while the rest of the cluster wrote 200 rows and compacted
// its log, must catch up by installing the leader's snapshot. Started
// while the others are down it knows no leader: its state lacks the new
// rows, and CaughtUp says why instead of letting it be read. Once the
// others are back, every read through it is either STORE_UNAVAILABLE or
// the new data, never a state without it.
func TestANodeBehindAnswersUnavailableNotAbsent(t *testing.T) {
	// Leases of a second: on a loaded machine a leader that misses a 200ms
	// lease steps down, and a write of the test's own setup would fail.
	c := newClusterTimed(t, Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second, CommitTimeout: 5 * time.Millisecond}, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead := c.leader(ctx)
	x := c.follower(lead)
	old := writeThings(ctx, t, c.nodes[lead], "old", 10)
	if _, err := c.nodes[x].ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	// x restarts from a snapshot of its own and replays the log after it.
	if err := c.nodes[x].Snapshot(); err != nil {
		t.Fatalf("snapshot on %s: %v", c.peers[x].ID, err)
	}
	old = append(old, writeThings(ctx, t, c.nodes[lead], "tail", 3)...)
	if _, err := c.nodes[x].ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	c.stop(x)

	// The others keep five log entries behind a snapshot, write 200 rows
	// and compact their logs past everything x holds.
	c.restartOthers(x, 5)
	lead = c.leader(ctx)
	fresh := writeThings(ctx, t, c.nodes[lead], "new", 200)
	for i := range c.nodes {
		if i == x {
			continue
		}
		if _, err := c.nodes[i].ConsistentRead(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.nodes[i].Snapshot(); err != nil {
			t.Fatalf("snapshot on %s: %v", c.peers[i].ID, err)
		}
	}
	for i := range c.nodes {
		if i != x {
			c.stop(i)
		}
	}

	// x alone: partitioned from any leader from its start.
	c.start(x, nil)
	behind := c.nodes[x]
	err := behind.CaughtUp()
	if e, ok := errcode.As(err); !ok || e.Code != errcode.StoreUnavailable || e.RetryAfter <= 0 || !strings.Contains(e.Message, "knows no leader") {
		t.Fatalf("a node that knows no leader: CaughtUp = %v; want STORE_UNAVAILABLE with Retry-After, saying it knows no leader", err)
	}
	if _, _, ok := things.Get(behind.Read(), fresh[0]); ok {
		t.Fatalf("%s holds %s before it heard from the others: the test would not show a node behind", c.peers[x].ID, fresh[0])
	}
	if id, _ := behind.Leader(); id != "" || behind.IsLeader() {
		t.Fatalf("%s leads or follows %q alone", c.peers[x].ID, id)
	}

	// The others come back; every read through x until it has caught up
	// is refused, and the first it answers has everything.
	for i := range c.nodes {
		if i != x {
			c.start(i, nil)
		}
	}
	unavailable := readsUntilCaughtUp(ctx, t, behind, append(old, fresh...))
	// Restores counted: x's own snapshot at start, then the leader's.
	if got := behind.catchup.attempt(); got < 2 {
		t.Errorf("%s restored %d snapshots; want its own at start and the leader's", c.peers[x].ID, got)
	}
	// It stays caught up, and agrees with the others.
	if err := behind.CaughtUp(); err != nil {
		t.Errorf("after catching up: %v", err)
	}
	c.converged(ctx)
	t.Logf("%s answered STORE_UNAVAILABLE %d times before it had caught up", c.peers[x].ID, unavailable)
}

// TestASingleNodeCatchesUpByReplayingItsLog: a single node has no leader
// to ask but itself; restarted, it has caught up once it has replayed the
// writes its log holds after its snapshot, and not before.
func TestASingleNodeCatchesUpByReplayingItsLog(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSingle(t, dir)
	want := writeThings(ctx, t, s, "snap", 20)
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want = append(want, writeThings(ctx, t, s, "log", 5)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{NodeID: "node-1", Dir: dir, Tables: testTables, Logger: testLogger(t), Timing: fastTiming})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readsUntilCaughtUp(ctx, t, s, want)
	if !s.IsLeader() {
		t.Errorf("caught up before it led: %+v", s.Status())
	}
}

// TestCatchUpState: a restore marks a caught-up node behind again, and an
// attempt that overlapped a restore does not count.
func TestCatchUpState(t *testing.T) {
	c := newCatchUp()
	if caughtUp, _, _ := c.state(); caughtUp {
		t.Fatal("a new node is caught up")
	}
	a := c.attempt()
	if c.fellBehind() {
		t.Error("a node not yet caught up says it was")
	}
	if done, _ := c.reached(a); done {
		t.Error("an attempt begun before a restore caught the node up")
	}
	a = c.attempt()
	if done, _ := c.reached(a); !done {
		t.Error("an attempt without a restore meanwhile did not catch the node up")
	}
	if done, _ := c.reached(a); done {
		t.Error("catching up twice")
	}
	if !c.fellBehind() {
		t.Error("a restore on a caught-up node: it was not caught up")
	}
	if caughtUp, _, _ := c.state(); caughtUp {
		t.Error("still caught up after a restore")
	}
	select {
	case <-c.kick:
	default:
		t.Error("a restore did not wake the catch-up loop")
	}
}
