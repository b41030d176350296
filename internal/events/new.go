package events

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// New builds an event caused by the actor in ctx. data holds the event's
// fields only, never a secret; an event arising from an audited action with a
// target also carries target_kind and target_id. It panics on a name that is
// not in the catalogue: that is a programming error a test catches.
func New(ctx context.Context, now time.Time, name string, app *AppRef, targetKind, targetID string, data map[string]any) *Event {
	if _, ok := Lookup(name); !ok {
		panic(fmt.Sprintf("events: %q is not in the catalogue", name))
	}
	a := actor.From(ctx)
	d := map[string]any{}
	maps.Copy(d, data)
	if targetKind != "" {
		d["target_kind"], d["target_id"] = targetKind, targetID
	}
	return &Event{
		ID:         ids.NewAt(ids.Event, now),
		Type:       name,
		OccurredAt: now.UTC(),
		App:        app,
		Actor:      Actor{Kind: a.Kind, ID: a.ID},
		Data:       d,
	}
}

// Emit is the operation that writes an event to the outbox, for the write
// that makes the change it describes (New's rules apply). Other packages
// write to the outbox only through Emit and Insert.
func Emit(ctx context.Context, now time.Time, name string, app *AppRef, targetKind, targetID string, data map[string]any) raftstore.Op {
	return Events.Insert(New(ctx, now, name, app, targetKind, targetID, data))
}

// Insert is the operation that writes an event built with New and then
// completed by the caller.
func Insert(ev *Event) raftstore.Op { return Events.Insert(ev) }
