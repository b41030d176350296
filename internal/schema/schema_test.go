package schema_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

func openStore(t *testing.T) *raftstore.Store { return raftstoretest.Open(t, schema.Tables()...) }

func TestTheAppendOnlyTables(t *testing.T) {
	var got []string
	for _, d := range schema.Tables() {
		if raftstore.AppendOnly(d) {
			got = append(got, d.TableName())
		}
	}
	slices.Sort(got)
	want := []string{"audit", "events", "keyring", "spec_revisions"} // keyring: a data key that sealed something must stay to open it
	if !slices.Equal(got, want) {
		t.Fatalf("append-only tables = %v, want %v", got, want)
	}
}

// TestNoCommandChangesOrDeletesAppendOnlyRows writes one row to each
// append-only table through a real store and then tries every way a command
// can change or remove it.
func TestNoCommandChangesOrDeletesAppendOnlyRows(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	app := "app_01JQ0000000000000000000000"
	appID := &app
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

	entry := audit.Entry{ID: "aud_1", Time: now, Action: "app.create", PrincipalID: "usr_1", PrincipalKind: audit.PrincipalUser, AppID: appID}
	event := events.Event{ID: "evt_1", Type: "app.created", OccurredAt: now, Actor: events.Actor{Kind: "user"}, Data: map[string]any{"name": "a"}}
	rev := spec.Revision{ID: "spec_1", AppID: app, Number: 1, CreatedAt: now, Document: json.RawMessage(`{"workloads":{}}`)}
	head := spec.Head{AppID: app, Latest: 1}
	if _, err := s.Apply(ctx, audit.Entries.Insert(&entry), events.Events.Insert(&event), spec.Revisions.Insert(&rev), spec.Heads.Insert(&head)); err != nil {
		t.Fatalf("seed: %v", err)
	}
	before, _ := s.Digest()

	changed := entry
	changed.Action = "app.delete"
	changedEvent := event
	changedEvent.Type = "app.deleted"
	changedRev := rev
	changedRev.Document = json.RawMessage(`{"tampered":true}`)
	attempts := map[string][]raftstore.Op{
		"audit insert over":    {audit.Entries.Insert(&changed)},
		"audit put":            {audit.Entries.Put(&changed)},
		"audit put if":         {audit.Entries.PutIf(&changed, 1)},
		"audit delete":         {audit.Entries.Delete("aud_1")},
		"audit delete if":      {audit.Entries.DeleteIf("aud_1", 1)},
		"event insert over":    {events.Events.Insert(&changedEvent)},
		"event put":            {events.Events.Put(&changedEvent)},
		"event delete":         {events.Events.Delete("evt_1")},
		"revision insert over": {spec.Revisions.Insert(&changedRev)},
		"revision put":         {spec.Revisions.Put(&changedRev)},
		"revision delete":      {spec.Revisions.Delete("spec_1")},
		"revision delete in a txn with a valid write": {
			spec.Heads.Put(&spec.Head{AppID: app, Latest: 1, Pinned: 1, PinHistory: []uint64{1}}),
			spec.Revisions.Delete("spec_1"),
		},
	}
	for name, ops := range attempts {
		if _, err := s.Apply(ctx, ops...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, ret := range []struct {
		table raftstore.Def
		id    string
	}{{audit.Entries, "aud_1"}, {events.Events, "evt_1"}, {spec.Revisions, "spec_1"}} {
		if _, err := s.Retain(ctx, ret.table, ret.id); err == nil {
			t.Errorf("retention removed %s/%s, which its rule keeps", ret.table.TableName(), ret.id)
		}
	}
	if after, _ := s.Digest(); after != before {
		t.Fatalf("the store changed although every command was refused")
	}
	if _, _, ok := audit.Entries.Get(s.Read(), "aud_1"); !ok {
		t.Fatal("audit entry gone")
	}
}

func TestEventRetentionFollowsTheOutboxCursor(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	ev := func(id string) *events.Event {
		return &events.Event{ID: id, Type: "policy.updated", Actor: events.Actor{Kind: "system"}}
	}
	i1, err := s.Apply(ctx, events.Events.Insert(ev("evt_a")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, events.Events.Insert(ev("evt_b"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retain(ctx, events.Events, "evt_a"); !raftstore.IsReason(err, raftstore.ReasonRejected) {
		t.Fatalf("retention of an undispatched event = %v, want rejected", err)
	}
	if _, err := s.Apply(ctx, events.Cursors.Put(&events.Cursor{ID: events.CursorID, Through: i1})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retain(ctx, events.Events, "evt_a", "evt_b"); err == nil {
		t.Fatal("retention removed an event past the cursor")
	}
	if _, err := s.Retain(ctx, events.Events, "evt_a"); err != nil {
		t.Fatalf("retention of a dispatched event: %v", err)
	}
	if _, err := s.Apply(ctx, events.Cursors.Put(&events.Cursor{ID: events.CursorID, Through: i1 - 1})); err == nil {
		t.Fatal("the outbox cursor moved back")
	}
	if _, err := s.Apply(ctx, events.Cursors.Delete(events.CursorID)); err == nil {
		t.Fatal("the outbox cursor was deleted")
	}
}

func TestRevisionNumbersAndRetention(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	app := "app_x"
	rev := func(n uint64) *spec.Revision {
		return &spec.Revision{ID: "spec_" + string(rune('a'+n)), AppID: app, Number: n, Document: json.RawMessage(`{}`)}
	}
	head := spec.Head{AppID: app}
	// Revisions 1..14; pin each of 1..12 in turn, so 1 and 2 fall out of the
	// last ten pinned; 13 and 14 are never pinned.
	for n := uint64(1); n <= 14; n++ {
		head.Latest = n
		ops := []raftstore.Op{spec.Revisions.Insert(rev(n))}
		if n <= 12 {
			head = head.Pin(n)
		}
		ops = append(ops, spec.Heads.Put(&head))
		if _, err := s.Apply(ctx, ops...); err != nil {
			t.Fatalf("revision %d: %v", n, err)
		}
	}
	refused := map[string][]raftstore.Op{
		"a gap in numbers":           {spec.Revisions.Insert(rev(16)), spec.Heads.Put(&spec.Head{AppID: app, Latest: 16, Pinned: 12, PinHistory: head.PinHistory})},
		"a revision beyond the head": {spec.Revisions.Insert(rev(15))},
		"a duplicate number":         {spec.Revisions.Insert(&spec.Revision{ID: "spec_dup", AppID: app, Number: 3})},
		"the head going back":        {spec.Heads.Put(&spec.Head{AppID: app, Latest: 13, Pinned: 12, PinHistory: head.PinHistory})},
		"a pin beyond the latest":    {spec.Heads.Put(&spec.Head{AppID: app, Latest: 14, Pinned: 15})},
	}
	for name, ops := range refused {
		if _, err := s.Apply(ctx, ops...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, tt := range []struct {
		n  uint64
		ok bool
	}{{1, true}, {2, true}, {3, false}, {12, false}, {13, false}, {14, false}} {
		_, err := s.Retain(ctx, spec.Revisions, rev(tt.n).ID)
		if (err == nil) != tt.ok {
			t.Errorf("retention of revision %d: err %v, want removable %v", tt.n, err, tt.ok)
		}
	}
}
