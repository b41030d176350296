package subscriptions

import (
	"testing"

	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// TestWholeWrites: a page of the outbox that more events follow ends before
// the write its last event belongs to (its other events may come after the
// page); the last page is taken whole.
func TestWholeWrites(t *testing.T) {
	page := func(indexes ...uint64) []raftstore.Item[events.Event] {
		var out []raftstore.Item[events.Event]
		for _, i := range indexes {
			out = append(out, raftstore.Item[events.Event]{Meta: raftstore.Meta{CreateIndex: i, ModifyIndex: i}})
		}
		return out
	}
	for _, c := range []struct {
		name string
		evs  []raftstore.Item[events.Event]
		more bool
		want int
	}{
		{"empty", nil, false, 0},
		{"the last page", page(5, 6, 6), false, 3},
		{"one event a write, more after", page(5, 6, 7), true, 2},
		{"a write cut by the page", page(5, 6, 7, 7, 7), true, 2},
		{"one write fills the page", page(7, 7, 7), true, 0},
		{"one write, the last page", page(7, 7, 7), false, 3},
	} {
		if got := wholeWrites(c.evs, c.more); got != c.want {
			t.Errorf("%s: wholeWrites = %d; want %d", c.name, got, c.want)
		}
	}
}
