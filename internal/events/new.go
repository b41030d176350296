package events

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// New builds an event caused by the actor in ctx. data holds the event's
// fields only, never a secret; an event arising from an audited action with a
// target also carries target_kind and target_id. It panics on a name that is
// not in the catalogue, and on data whose fields are not exactly the
// catalogue's (a value may be nil): both are programming errors every test
// that reaches the write catches.
func New(ctx context.Context, now time.Time, name string, app *AppRef, targetKind, targetID string, data map[string]any) *Event {
	kind, ok := Lookup(name)
	if !ok {
		panic(fmt.Sprintf("events: %q is not in the catalogue", name))
	}
	if err := checkData(kind, data); err != nil {
		panic(err.Error())
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

// checkData says whether data has exactly the catalogue's fields of kind.
func checkData(kind Kind, data map[string]any) error {
	for _, f := range kind.Data {
		if _, ok := data[f]; !ok {
			return fmt.Errorf("events: %s lacks its data field %q (the catalogue's fields are %v)", kind.Name, f, kind.Data)
		}
	}
	for f := range data {
		if !slices.Contains(kind.Data, f) {
			return fmt.Errorf("events: %s has data field %q, which the catalogue does not list (its fields are %v)", kind.Name, f, kind.Data)
		}
	}
	return nil
}
