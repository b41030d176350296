package apps

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Op builders: what other packages change on an app's row, they change
// through these, inside their own Update's build, so that the rules of the
// row (and the app.state_changed event) live here once. Each reads the app
// from the view it is given and returns a put conditional on that version:
// a change made meanwhile makes the caller's Update read again.

// change applies f to the app as r has it, stamps it updated at now, and
// returns it with its conditional put.
func change(r *raftstore.Reader, id string, now time.Time, f func(*App)) (App, raftstore.Op, error) {
	a, meta, ok := Apps.Get(r, id)
	if !ok {
		return App{}, raftstore.Op{}, errcode.New(errcode.NotFound, "no app %s", id)
	}
	f(&a)
	a.UpdatedAt = now
	return a, Apps.PutIf(&a, meta.ModifyIndex), nil
}

// PinOps records on the app's row which spec revision is pinned (the spec
// package pins, in the same write as its head). It returns the app as
// changed.
func PinOps(r *raftstore.Reader, id string, pin Pin, now time.Time) (App, []raftstore.Op, error) {
	a, op, err := change(r, id, now, func(a *App) { a.Pinned = &pin })
	if err != nil {
		return App{}, nil, err
	}
	return a, []raftstore.Op{op}, nil
}

// SetIconOps records when the app's tile image was set (nil: it shows a
// generated tile again), for the icon package's write of the image. It
// returns the app as changed.
func SetIconOps(r *raftstore.Reader, id string, at *time.Time, now time.Time) (App, []raftstore.Op, error) {
	a, op, err := change(r, id, now, func(a *App) { a.IconUpdatedAt = at })
	if err != nil {
		return App{}, nil, err
	}
	return a, []raftstore.Op{op}, nil
}

// DesiredOps sets the state an app is meant to be in (DesiredRunning or
// DesiredStopped; the reconciler converges on it). It returns the app as
// changed and the desired state it had; no operations when it is already
// meant to be so. because is why the system stops it (App.StoppedBecause),
// "" when a person asks.
func DesiredOps(r *raftstore.Reader, id, desired, because string, now time.Time) (App, string, []raftstore.Op, error) {
	if desired != DesiredRunning && desired != DesiredStopped {
		return App{}, "", nil, errcode.New(errcode.Internal, "no desired state %q", desired)
	}
	a, _, ok := Apps.Get(r, id)
	if !ok {
		return App{}, "", nil, errcode.New(errcode.NotFound, "no app %s", id)
	}
	from := a.DesiredState
	if from == desired {
		return a, from, nil, nil
	}
	a, op, err := change(r, id, now, func(a *App) { a.DesiredState, a.StoppedBecause = desired, stoppedBecause(desired, because) })
	if err != nil {
		return App{}, "", nil, err
	}
	return a, from, []raftstore.Op{op}, nil
}

// Cause is what moves an app's state.
type Cause int

// Causes of a transition.
const (
	// DeployBegan: a deploy of the app starts building; the app is
	// deploying until it ends, and only its end moves it on.
	DeployBegan Cause = iota + 1
	// DeployEnded: the deploy ended (Transition.Succeeded, Prior,
	// Released say how).
	DeployEnded
	// Observed: the reconciler saw the app's workloads in state To
	// (running, degraded, stopped, restarting, or failed when it gave up).
	Observed
)

// Transition is a move of an app's state, as its cause reports it;
// TransitionOps decides the state that follows.
type Transition struct {
	Cause Cause
	// To is the state observed (Observed only).
	To string
	// Succeeded, Prior and Released describe a deploy's end: whether it
	// succeeded, the app's state when it began, and whether a release
	// serves the app (after a failure, the previous one).
	Succeeded bool
	Prior     string
	Released  bool
	// Desired, when set, is also the desired state the app is meant to be
	// in afterwards (DesiredRunning or DesiredStopped), in the same put:
	// the system stopping an app (over its disk limit) observes it
	// stopped and means it to stay so, in one write.
	Desired string
	// Because is why the system stops the app (App.StoppedBecause), with
	// Desired DesiredStopped.
	Because string
}

// stoppedBecause is App.StoppedBecause for an app meant to be in desired,
// stopped by the system for because ("" for a person).
func stoppedBecause(desired, because string) *string {
	if desired != DesiredStopped || because == "" {
		return nil
	}
	return &because
}

// TransitionOps returns the operations that move an app's state as t
// says, with the app.state_changed event {from, to} when the state
// changes; no operations when nothing changes.
// The rules, decided here only:
//
//   - a deploy beginning makes the app deploying, whatever it was;
//   - a deploy ending moves a deploying app on: running (and meant to
//     run) after success; after a failure back to failed or stopped if it
//     was so before the deploy, else stopped or running as it is meant to
//     be while a release serves it, and draft when nothing was ever
//     deployed;
//   - an observation never moves an app a deploy holds (deploying), nor
//     one that is failed (it stays failed until somebody deploys it);
//   - Desired, when set, is the desired state afterwards, whatever the
//     state does (a deploy's success still leaves it running).
func TransitionOps(ctx context.Context, r *raftstore.Reader, id string, t Transition, now time.Time) ([]raftstore.Op, error) {
	if t.Desired != "" && t.Desired != DesiredRunning && t.Desired != DesiredStopped {
		return nil, errcode.New(errcode.Internal, "no desired state %q", t.Desired)
	}
	a, meta, ok := Apps.Get(r, id)
	if !ok {
		return nil, errcode.New(errcode.NotFound, "no app %s", id)
	}
	from, desired := a.State, a.DesiredState
	if t.Desired != "" {
		desired = t.Desired
	}
	to := from
	switch t.Cause {
	case DeployBegan:
		to = StateDeploying
	case DeployEnded:
		to = afterDeploy(a, t)
		if t.Succeeded {
			desired = DesiredRunning // a deploy leaves the app running the new revision
		}
	case Observed:
		if from != StateDeploying && from != StateFailed {
			to = t.To
		}
	default:
		return nil, errcode.New(errcode.Internal, "no transition cause %d", t.Cause)
	}
	if to == from && desired == a.DesiredState {
		return nil, nil
	}
	if desired != a.DesiredState || t.Desired != "" {
		a.StoppedBecause = stoppedBecause(desired, t.Because)
	}
	a.State, a.DesiredState, a.UpdatedAt = to, desired, now
	ops := []raftstore.Op{Apps.PutIf(&a, meta.ModifyIndex)}
	if from != to {
		ops = append(ops, events.Emit(ctx, now, "app.state_changed", refOf(a), "", "", map[string]any{"from": from, "to": to}))
	}
	return ops, nil
}

// afterDeploy is the app's state once a deploy of it ends.
func afterDeploy(a App, t Transition) string {
	switch {
	case t.Succeeded:
		return StateRunning
	case a.State != StateDeploying:
		return a.State
	case !t.Released:
		return StateDraft
	}
	switch t.Prior {
	case StateFailed, StateStopped:
		return t.Prior
	}
	if a.DesiredState == DesiredStopped {
		return StateStopped
	}
	return StateRunning
}
