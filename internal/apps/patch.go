package apps

import (
	"context"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Patch is a change of an app's name or slug; nil fields stay.
type Patch struct {
	Name *string
	Slug *string
}

// Update renames an app or changes its slug, audited as app.update.
func (s *Service) Update(ctx context.Context, id string, p Patch) (App, error) {
	r := s.store.Read()
	a, meta, ok := Apps.Get(r, id)
	if !ok {
		return App{}, errcode.New(errcode.NotFound, "no app %s", id)
	}
	changed := []string{}
	if p.Name != nil && *p.Name != a.Name {
		if err := checkName(*p.Name); err != nil {
			return App{}, err
		}
		a.Name = *p.Name
		changed = append(changed, "name")
	}
	if p.Slug != nil && *p.Slug != a.Slug {
		if err := checkSlug(*p.Slug); err != nil {
			return App{}, err
		}
		a.Slug = *p.Slug
		changed = append(changed, "slug")
	}
	if len(changed) == 0 {
		return a, nil
	}
	now := s.now()
	a.UpdatedAt = now
	_, err := s.store.Apply(ctx,
		Apps.PutIf(&a, meta.ModifyIndex),
		audit.Record(ctx, now, "app.update", id, audit.Target{Kind: "app", ID: id}, map[string]any{"changed": changed}),
	)
	switch {
	case err == nil:
		return a, nil
	case raftstore.IsReason(err, raftstore.ReasonConflict):
		return App{}, errcode.New(errcode.StateInvalid, "the slug %q is taken", a.Slug).WithDetail("field", "slug")
	case raftstore.IsReason(err, raftstore.ReasonStale), raftstore.IsReason(err, raftstore.ReasonNotFound):
		return App{}, errcode.New(errcode.StateInvalid, "the app changed meanwhile; read it again and retry")
	}
	return App{}, fmt.Errorf("update app: %w", err)
}

// StateOps returns the operations that move an app to a state, with the
// app.state_changed event (from, to), and apply also (if set) to the record
// in the same write (the deploy path makes the app meant to run); nil when
// nothing changes. Callers add them to the write that causes the move.
func StateOps(ctx context.Context, r *raftstore.Reader, id, to string, now time.Time, also func(*App)) ([]raftstore.Op, error) {
	a, meta, ok := Apps.Get(r, id)
	if !ok {
		return nil, errcode.New(errcode.NotFound, "no app %s", id)
	}
	from, desired := a.State, a.DesiredState
	if also != nil {
		also(&a)
	}
	if from == to && a.DesiredState == desired {
		return nil, nil
	}
	a.State, a.UpdatedAt = to, now
	ops := []raftstore.Op{Apps.PutIf(&a, meta.ModifyIndex)}
	if from != to {
		ops = append(ops, events.Emit(ctx, now, "app.state_changed", refOf(a), "", "", map[string]any{"from": from, "to": to}))
	}
	return ops, nil
}
