package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/svchost/svc/internal/errcode"
)

// Catching up. A node that starts, or that restores a snapshot the leader
// sent it, holds an older state than the cluster's until it has applied
// what the cluster had committed: read then, it answers as if what was
// written meanwhile did not exist (a valid token unknown, an app not
// found). So a node counts as caught up only once it has applied the index
// the leader names for a consistent read (its applied index, see
// ConsistentRead) when asked after the node's start or its last snapshot
// restore. Until then CaughtUp answers STORE_UNAVAILABLE, and the server
// and the edge answer that instead of reading.
//
// A single node is its own leader: it is caught up once it has replayed its
// own log (the barrier it runs on gaining leadership). A node that knows no
// leader stays behind, for as long as that lasts, and CaughtUp says so; the
// store's start does not wait for it.

// catchUp is a node's catch-up state.
type catchUp struct {
	mu sync.Mutex
	// restores counts the snapshots restored since the store opened (at
	// start, or sent by the leader): an attempt that saw a restore happen
	// while it ran proves nothing.
	restores uint64
	caughtUp bool
	// target is the leader's applied index this node waits for, 0 before a
	// leader named one; why is the last attempt's failure to learn it.
	target uint64
	why    string
	since  time.Time // when the node fell behind: its start, or the last restore
	// kick wakes the catch-up loop after a restore.
	kick chan struct{}
}

func newCatchUp() *catchUp {
	return &catchUp{since: time.Now(), kick: make(chan struct{}, 1)}
}

// fellBehind marks the node behind: a snapshot restore is about to replace
// its state. It reports whether the node was caught up until now.
func (c *catchUp) fellBehind() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restores++
	was := c.caughtUp
	if was {
		c.caughtUp, c.since, c.why = false, time.Now(), ""
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return was
}

// attempt starts an attempt: it returns the restores so far, for reached.
func (c *catchUp) attempt() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restores
}

// aim records the index this node waits for, or why it could not learn it.
func (c *catchUp) aim(target uint64, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if target > 0 {
		c.target = target
	}
	c.why = why
}

// reached marks the node caught up, unless a snapshot was restored since
// the attempt began; it reports whether the node has just caught up, and
// since when it was behind.
func (c *catchUp) reached(attempt uint64) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caughtUp || attempt != c.restores {
		return false, 0
	}
	c.caughtUp, c.why = true, ""
	return true, time.Since(c.since)
}

func (c *catchUp) state() (caughtUp bool, target uint64, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caughtUp, c.target, c.why
}

// restoreWatch is the FSM as raft sees it: the store's, with every
// snapshot restore (at start, or one the leader sent) marking the node
// behind before its state is replaced.
type restoreWatch struct {
	*fsm
	behind func()
}

var _ raft.BatchingFSM = restoreWatch{}

func (w restoreWatch) Restore(rc io.ReadCloser) error {
	w.behind()
	return w.fsm.Restore(rc)
}

// CaughtUp returns nil once this node has caught up with the cluster (see
// above), and until then a retryable STORE_UNAVAILABLE that says why. A
// caller that answers from this node's state (Read) checks it first, so
// that it never denies what the node has not seen yet.
func (s *Store) CaughtUp() error {
	caughtUp, target, why := s.catchup.state()
	if caughtUp {
		return nil
	}
	var reason string
	switch leader, _ := s.Leader(); {
	case leader == "" && target > 0:
		reason = fmt.Sprintf("it knows no leader of the store now, and has applied index %d of the %d it must reach", s.fsm.applied.Load(), target)
	case leader == "":
		reason = "it knows no leader of the store to catch up with"
	case target > 0:
		reason = fmt.Sprintf("it has applied index %d of the %d the leader had applied when asked", s.fsm.applied.Load(), target)
	case why != "":
		reason = why
	default:
		reason = "it is asking the leader how far to catch up"
	}
	e := errcode.New(errcode.StoreUnavailable, "this node has not caught up with the replicated store since it started or restored a snapshot: %s", reason)
	e.RetryAfter = 1
	return e.WithRemedy("retry shortly, or send the request to another node of the cluster")
}

// Errors of an attempt to learn the leader's applied index.
var (
	errNoLeader       = errors.New("it knows no leader of the store to catch up with")
	errLeaderNotReady = errors.New("the leader is not serving consistent reads yet (it is applying what earlier leaders committed)")
)

// leaderApplied asks the leader, once, for the index a consistent read must
// see: the last command its FSM applied (see readIndex); this node's own
// when it leads.
func (s *Store) leaderApplied(ctx context.Context) (uint64, error) {
	if s.IsLeader() {
		index, ok := s.readIndex()
		if !ok {
			return 0, errLeaderNotReady
		}
		return index, nil
	}
	addr, id := s.raft.LeaderWithID()
	if addr == "" || s.fwd == nil {
		return 0, errNoLeader
	}
	resp, err := s.fwd.call(ctx, string(addr), fwdReadIndex, nil)
	switch {
	case err != nil:
		return 0, fmt.Errorf("the leader %s did not answer: %w", id, err)
	case resp.Retry:
		return 0, errLeaderNotReady
	}
	return resp.Index, nil
}

// fellBehind marks the node behind as a snapshot restore begins.
func (s *Store) fellBehind() {
	if s.catchup.fellBehind() {
		s.log.Info("restoring a snapshot the leader sent; catching up with the replicated store before answering reads again")
	}
}

// askLeaderApplied is one attempt of the catch-up loop: leaderApplied,
// given up after catchUpAsk or when the store closes.
func (s *Store) askLeaderApplied() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpAsk)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.leaderApplied(ctx)
}

// caughtUpSince marks the node caught up: it has applied what the leader
// named in an attempt that began after the given number of restores.
func (s *Store) caughtUpSince(attempt uint64) {
	if done, behind := s.catchup.reached(attempt); done {
		s.log.Info("caught up with the replicated store; answering reads", "applied_index", s.fsm.applied.Load(), "behind_for", behind.Round(time.Millisecond))
	}
}

// Catch-up loop timing: the pause after a failed attempt grows from the
// first to the last value; an attempt gives up after catchUpAsk (which
// also bounds how long Close waits for one under way); a node still behind
// says so in its log every catchUpReport.
const (
	catchUpPauseMin = 50 * time.Millisecond
	catchUpPauseMax = 2 * time.Second
	catchUpAsk      = 2 * time.Second
	catchUpReport   = 30 * time.Second
)

// catchUpLoop catches the node up after its start and after every snapshot
// restore: it asks the leader for its applied index and waits until this
// node has applied that far. A consistent read that succeeds catches the
// node up too (ConsistentRead).
func (s *Store) catchUpLoop() {
	defer s.wg.Done()
	pause := catchUpPauseMin
	reported := time.Now()
	for {
		if caughtUp, _, _ := s.catchup.state(); caughtUp {
			select {
			case <-s.catchup.kick:
				continue
			case <-s.closed:
				return
			}
		}
		attempt := s.catchup.attempt()
		index, err := s.askLeaderApplied()
		if err != nil {
			s.catchup.aim(0, err.Error())
			if time.Since(reported) >= catchUpReport {
				reported = time.Now()
				s.log.Warn("not caught up with the replicated store yet; reads answer STORE_UNAVAILABLE", "reason", s.CaughtUp())
			}
			select {
			case <-time.After(pause):
			case <-s.closed:
				return
			}
			pause = min(2*pause, catchUpPauseMax)
			continue
		}
		pause = catchUpPauseMin
		s.catchup.aim(index, "")
		// The index is committed: this node reaches it once it hears from
		// any leader, however long that takes.
		if s.WaitIndex(context.Background(), index) != nil {
			return // closed
		}
		s.caughtUpSince(attempt)
	}
}
