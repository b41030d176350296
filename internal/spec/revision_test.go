package spec

import (
	"slices"
	"testing"
)

func TestPinKeepsTheLastTenDistinctPins(t *testing.T) {
	var h Head
	for _, n := range []uint64{1, 2, 3, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12} {
		h = h.Pin(n)
	}
	// 1 and 3 fall out; re-pinning 2 moved it after 3.
	want := []uint64{2, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if h.Pinned != 12 || !slices.Equal(h.PinHistory, want) {
		t.Errorf("head = %+v, want pinned 12 and history %v", h, want)
	}
	before := slices.Clone(h.PinHistory)
	h2 := h.Pin(5)
	if !slices.Equal(h.PinHistory, before) {
		t.Error("Pin changed the history of the head it was called on")
	}
	if h2.Pinned != 5 || h2.PinHistory[len(h2.PinHistory)-1] != 5 || len(h2.PinHistory) != KeepPinned {
		t.Errorf("re-pinning 5: %+v", h2)
	}
}
