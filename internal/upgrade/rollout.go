package upgrade

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// A rollout upgrades every server of a cluster from one request: the
// binary, checked by the server that took it, is kept in that server's
// work directory and served to the others as a blob (BlobPrefix); the
// rollouts table's one row says which server's turn it is. Each server
// follows the row (Service.Follow) and, on its turn, fetches the binary,
// checks it again (digest, its own signing key, its version) and upgrades
// itself as a single server does (marker, swap, trial, exec or rollback).
// Its new binary, once it serves and has caught up, marks its step done
// in the write that emits svc.upgraded, which starts the next server's
// turn; a failure anywhere marks the step and the rollout failed (in the
// write that emits svc.upgrade_failed, naming the server) and no further
// server upgrades. Followers go first, by ID; the leader last, after
// handing its leadership to another server. So one server at a time is
// away and a three-server cluster keeps its quorum throughout.

// States of a rollout (the Record's State) beside StateDone and
// StateFailed, and of its steps.
const (
	StateRolling = "rolling"

	StepPending   = "pending"
	StepUpgrading = "upgrading"
	StepDone      = StateDone
	StepFailed    = StateFailed
)

// BlobPrefix begins the name of a rollout's binary among the blobs the
// servers serve each other; the rest is the rollout's ID.
const BlobPrefix = "upgrade-"

// rolloutRow is the rollouts table's only row: the latest rollout.
const rolloutRow = "latest"

// Step is one server's part in a rollout.
type Step struct {
	Node       string     `json:"node"`
	State      string     `json:"state"`
	Reason     *string    `json:"reason"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// Rollout is the latest cluster-wide upgrade: its Record (state rolling,
// done or failed), the binary's SHA-256 digest (hex), size and signature,
// the server that took it, and the steps in their order.
type Rollout struct {
	Record
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Signature string `json:"signature,omitempty"`
	Origin    string `json:"origin"`
	Steps     []Step `json:"steps"`
}

// Blob is the name the rollout's binary is served under.
func (r *Rollout) Blob() string { return BlobPrefix + r.ID }

// Rollouts is the table of the latest rollout (one row).
var Rollouts = &raftstore.Table[Rollout]{
	Name: "upgrade_rollouts",
	ID:   func(*Rollout) string { return rolloutRow },
	Validate: func(_ *raftstore.Reader, _, r *Rollout) error {
		if r == nil {
			return nil
		}
		switch {
		case r.ID == "" || r.To == "" || len(r.Digest) != 64:
			return errors.New("a rollout has an id, a version to go to and the binary's digest")
		case r.State != StateRolling && r.State != StateDone && r.State != StateFailed:
			return errors.New("a rollout's state is rolling, done or failed")
		case len(r.Steps) == 0:
			return errors.New("a rollout has a step per server")
		}
		for _, st := range r.Steps {
			switch st.State {
			case StepPending, StepUpgrading, StepDone, StepFailed:
			default:
				return fmt.Errorf("a rollout step's state is pending, upgrading, done or failed, not %q", st.State)
			}
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Rollouts} }

// LatestRollout is the latest rollout in the view r, nil when there never
// was one.
func LatestRollout(r *raftstore.Reader) *Rollout {
	ro, _, ok := Rollouts.Get(r, rolloutRow)
	if !ok {
		return nil
	}
	return &ro
}

// Order is the order servers upgrade in: the followers by ID, then the
// leader (which hands its leadership on first).
func Order(servers []string, leader string) []string {
	out := slices.Clone(servers)
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == leader && b != leader:
			return 1
		case b == leader && a != leader:
			return -1
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}

// Action is what a server does about a rollout now.
type StepAction int

const (
	// Idle: no rollout under way, or nothing for anyone to do.
	Idle StepAction = iota
	// Wait: another server's step comes first.
	Wait
	// Transfer: it is this server's turn and it leads: hand leadership
	// to another server first.
	Transfer
	// Upgrade: it is this server's turn.
	Upgrade
	// Abandon: (the leader) the step under way has not finished within
	// the step timeout: mark it failed.
	Abandon
)

func (a StepAction) String() string {
	return [...]string{"idle", "wait", "transfer", "upgrade", "abandon"}[a]
}

// NextStep says what server self does about rollout r (nil: none) now,
// with leader the cluster's leader ("" when none is known) and timeout
// how long a step may be upgrading; step is the index of the step acted
// on.
func NextStep(r *Rollout, self, leader string, now time.Time, timeout time.Duration) (a StepAction, step int) {
	if r == nil || r.State != StateRolling {
		return Idle, -1
	}
	i := slices.IndexFunc(r.Steps, func(st Step) bool { return st.State != StepDone })
	if i < 0 {
		return Idle, -1
	}
	st := r.Steps[i]
	switch st.State {
	case StepUpgrading:
		if self == leader && st.StartedAt != nil && now.Sub(*st.StartedAt) > timeout {
			return Abandon, i
		}
		return Wait, i
	case StepPending:
		switch {
		case st.Node != self:
			return Wait, i
		case leader == "":
			return Wait, i // no leader: nothing can be written now
		case self == leader && len(r.Steps) > 1:
			return Transfer, i
		}
		return Upgrade, i
	}
	return Idle, -1 // a failed step: the rollout is failed
}

// startRolloutOps writes a new rollout, refused while one is rolling.
func startRolloutOps(r *raftstore.Reader, ro *Rollout) ([]raftstore.Op, error) {
	if cur := LatestRollout(r); cur != nil && cur.State == StateRolling {
		return nil, errcode.New(errcode.StateInvalid, "rollout %s (%s → %s) is under way", cur.ID, cur.From, cur.To).
			WithRemedy("wait for it to finish (GET /api/v1/upgrade), then try again")
	}
	return []raftstore.Op{Rollouts.Put(ro)}, nil
}

// errStepMoved is a step that is no longer in the state a transition
// expects (another server moved it first, or the rollout ended).
var errStepMoved = errors.New("the rollout's step has moved on")

// stepOps moves node's step of rollout id from one of from to to (with
// reason when failed) at now. A failed step fails the rollout; the last
// step done finishes it. errStepMoved when the step is not in from.
func stepOps(r *raftstore.Reader, id, node string, from []string, to string, reason string, now time.Time) (*Rollout, []raftstore.Op, error) {
	ro := LatestRollout(r)
	if ro == nil || ro.ID != id || ro.State != StateRolling {
		return nil, nil, errStepMoved
	}
	i := slices.IndexFunc(ro.Steps, func(st Step) bool { return st.Node == node })
	if i < 0 || !slices.Contains(from, ro.Steps[i].State) {
		return nil, nil, errStepMoved
	}
	ro.Steps = slices.Clone(ro.Steps)
	st := &ro.Steps[i]
	st.State = to
	switch to {
	case StepUpgrading:
		st.StartedAt = &now
	case StepDone:
		st.FinishedAt = &now
		if !slices.ContainsFunc(ro.Steps, func(s Step) bool { return s.State != StepDone }) {
			ro.State, ro.FinishedAt = StateDone, &now
		}
	case StepFailed:
		st.FinishedAt, st.Reason = &now, &reason
		why := fmt.Sprintf("%s: %s", node, reason)
		ro.State, ro.FinishedAt, ro.Reason = StateFailed, &now, &why
	}
	return ro, []raftstore.Op{Rollouts.Put(ro)}, nil
}

// status is the rollout as the API shows it: each server's state and
// version (the version it went to once done, the one it left before).
func (r *Rollout) status(self, selfVersion string) Status {
	st := Status{Record: r.Record, Nodes: make([]Node, 0, len(r.Steps))}
	for _, s := range r.Steps {
		v := r.From
		switch {
		case s.Node == self:
			v = selfVersion
		case s.State == StepDone:
			v = r.To
		}
		st.Nodes = append(st.Nodes, Node{ID: s.Node, Version: v, State: s.State, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt})
	}
	return st
}
