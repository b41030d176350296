// Package events owns the event catalogue (the 43 names, their scope and data
// fields) and the outbox: events are written to the events table in the same
// replicated write as the change they describe, and delivered from there.
//
// The events table is append-only, enforced by the store's FSM. Its only
// removal is retention, which the FSM allows for an event only once the
// outbox cursor has passed it (the dispatcher has fanned it out into
// deliveries). This package must not touch HTTP or send anything itself.
package events

import (
	"errors"
	"time"

	"github.com/svchost/svc/raftstore"
)

// AppRef names the app an event concerns.
type AppRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

// Actor is who caused an event: kind is user, token, system or anonymous.
type Actor struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

// Event is one event of the outbox. Data holds the event's fields only and
// never a secret value.
type Event struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	OccurredAt time.Time      `json:"occurred_at"`
	App        *AppRef        `json:"app,omitempty"`
	Actor      Actor          `json:"actor"`
	Data       map[string]any `json:"data"`
}

// Cursor records how far the dispatcher has fanned events out: every event
// created at or before raft index Through has its deliveries recorded.
type Cursor struct {
	ID      string `json:"id"`
	Through uint64 `json:"through"`
}

// CursorID is the ID of the one outbox cursor row.
const CursorID = "outbox"

// Events is the outbox table: append-only; retention removes an event only
// once the cursor has passed it. It is a history table: events live in each
// node's history store on disk, not in memory; the dispatcher reads those
// after its cursor.
var Events = &raftstore.Table[Event]{
	Name:       "events",
	ID:         func(e *Event) string { return e.ID },
	AppendOnly: true,
	History:    true,
	Indexes: []raftstore.Index[Event]{
		{Name: "type", Key: func(e *Event) (string, bool) { return e.Type, true }},
		{Name: "app", Key: func(e *Event) (string, bool) {
			if e.App == nil {
				return "", false
			}
			return e.App.ID, true
		}},
	},
	Retain: func(r *raftstore.Reader, _ *Event, m raftstore.Meta) error {
		c, _, _ := Cursors.Get(r, CursorID)
		if m.CreateIndex > c.Through {
			return errors.New("the event has not been dispatched yet")
		}
		return nil
	},
}

// Cursors holds the outbox cursor. The cursor never moves back.
var Cursors = &raftstore.Table[Cursor]{
	Name: "outbox_cursor",
	ID:   func(c *Cursor) string { return c.ID },
	Validate: func(_ *raftstore.Reader, old, new *Cursor) error {
		if new == nil {
			return errors.New("the outbox cursor cannot be removed")
		}
		if old != nil && new.Through < old.Through {
			return errors.New("the outbox cursor cannot move back")
		}
		return nil
	},
}

// ReadCursor returns how far the outbox has been fanned out, and the
// cursor row's version for Advance.
func ReadCursor(r *raftstore.Reader) (through uint64, version uint64) {
	c, meta, _ := Cursors.Get(r, CursorID)
	return c.Through, meta.ModifyIndex
}

// Advance is the operation that moves the outbox cursor to through, only if
// the cursor is still at the version ReadCursor gave (the dispatcher's
// write that records the deliveries of the events up to through).
func Advance(through, version uint64) raftstore.Op {
	return Cursors.PutIf(&Cursor{ID: CursorID, Through: through}, version)
}
