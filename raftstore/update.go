package raftstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// Build reads what a change depends on from r and returns the operations
// that make it, with preconditions (PutIf, DeleteIf, Check, CheckTable) on
// what it read. It may run several times for one change, each time on a
// newer view, so it must have no side effects: no I/O, no writes to another
// system, no counters. Values it computes for the caller are assigned to the
// caller's variables on every run; the last run's are the ones applied. A
// build that returns no operations writes nothing; an error ends the change
// with that error.
type Build func(r *Reader) ([]Op, error)

// Retry policy of Update. Only a change that raced another write is tried
// again, after a short pause with jitter; from its second try on, a change
// holds this node's update lock, so the changes of one node that collide
// take turns instead of colliding again, and while the lock is held new
// changes on this node wait for their turn as well. (The lock is per node,
// not per row: while changes collide, this node's writes are serialized.)
const (
	maxUpdateTries   = 12
	updatePauseFirst = time.Millisecond
	updatePauseMax   = 64 * time.Millisecond
)

// Update makes one change to the store, the one way services write: it
// calls build on a read view, applies the operations it returns as one
// transaction, and, when the transaction was refused because something
// build read changed meanwhile (a conflict), calls build again on a newer
// view. A refusal that is not a conflict (a precondition the caller itself
// set, a unique key that was already taken when build read, a table's
// Validate or Invariant) is returned as it is, at once.
//
// A conflict is a refusal for a stale or missing row, an existing row or a
// taken unique key, on a table that was written after the view build read:
// the refusal is about a change build did not see. One definition serves
// every service, so a hot object is serialized, not refused: concurrent
// changes to it are applied one after another, as a database would.
//
// Update returns the Raft index of the write (0 when build wrote nothing).
func (s *Store) Update(ctx context.Context, build Build) (uint64, error) {
	r := s.Read()
	locked := false
	defer func() {
		if locked {
			<-s.updateLock
		}
	}()
	// While changes that collided are taking turns, a new change waits for
	// its turn too: otherwise new changes could keep overtaking the one
	// whose turn it is until it runs out of tries.
	if len(s.updateLock) > 0 {
		if err := s.takeUpdateLock(ctx); err != nil {
			return 0, err
		}
		locked = true
		var err error
		if r, err = s.ConsistentRead(ctx); err != nil {
			return 0, err
		}
	}
	for try := 1; ; try++ {
		ops, err := build(r)
		if err != nil || len(ops) == 0 {
			return 0, err
		}
		index, err := s.Apply(ctx, ops...)
		if err == nil || !s.conflict(r, err) {
			return index, err
		}
		if try == maxUpdateTries {
			s.log.Warn("store: a change kept colliding with other writes; giving up", "tries", try, "err", err)
			return 0, busy(err)
		}
		s.updatePause(ctx, try)
		if !locked {
			if err := s.takeUpdateLock(ctx); err != nil {
				return 0, err
			}
			locked = true
		}
		if r, err = s.ConsistentRead(ctx); err != nil {
			return 0, err
		}
	}
}

// takeUpdateLock waits for this node's update lock.
func (s *Store) takeUpdateLock(ctx context.Context) error {
	select {
	case s.updateLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return s.ctxErr(ctx)
	case <-s.closed:
		return s.ctxErr(ctx)
	}
}

// conflict reports whether err refused a change because of a write the view
// r did not include.
func (s *Store) conflict(r *Reader, err error) bool {
	var te *TxnError
	if !errors.As(err, &te) {
		return false
	}
	switch te.Reason {
	case ReasonStale, ReasonNotFound, ReasonExists, ReasonConflict:
	default:
		return false
	}
	// The node that took the write has applied the refused command, so its
	// table indexes include every write that came before it.
	return tableIndexOf(s.fsm.db.Load().Txn(false), te.Table) > r.index
}

// updatePause waits before another try: a random time up to a bound that
// doubles with each try, so colliding writers on different nodes drift
// apart.
func (s *Store) updatePause(ctx context.Context, try int) {
	bound := updatePauseFirst << (try - 1)
	if bound > updatePauseMax || bound <= 0 {
		bound = updatePauseMax
	}
	t := time.NewTimer(rand.N(bound) + time.Millisecond/2)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closed:
	}
}

// busy is the answer when a change still collided after every try: the
// store is overloaded with writes to the same rows, which says nothing
// about the request, so the caller may retry it as it is.
func busy(err error) error {
	e := errcode.Wrap(err, errcode.StoreUnavailable, "too many concurrent writes to the same objects; the change was not applied")
	e.RetryAfter = 1
	return e.WithRemedy("retry the request")
}
