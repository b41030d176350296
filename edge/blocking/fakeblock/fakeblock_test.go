package fakeblock

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

func TestParseQuery(t *testing.T) {
	def, most := 5*time.Minute, 10*time.Minute
	for _, tc := range []struct {
		q      string
		index  uint64
		wait   time.Duration
		status int
	}{
		{"", 0, def, 0},
		{"index=7&wait=30s", 7, 30 * time.Second, 0},
		{"wait=1h", 0, most, 0},
		{"wait=-1s", 0, def, 0},
		{"wait=soon", 0, def, http.StatusBadRequest},
		{"index=x&wait=1s", 0, time.Second, http.StatusBadRequest},
	} {
		v, _ := url.ParseQuery(tc.q)
		index, wait, status, _ := ParseQuery(v, def, most)
		if index != tc.index || wait != tc.wait || status != tc.status {
			t.Errorf("ParseQuery(%q) = %d, %s, %d; want %d, %s, %d", tc.q, index, wait, status, tc.index, tc.wait, tc.status)
		}
	}
}

func TestBlock(t *testing.T) {
	var mu sync.Mutex
	h := New(&mu)
	n := 0 // guarded by mu
	ready := func(bool) (bool, bool) { return n > 0, false }

	out := make(chan Outcome, 1)
	go func() { out <- h.Block(context.Background(), time.Minute, ready) }()
	WaitBlocked(t, h.Blocked, 1, 10*time.Second)
	mu.Lock()
	n++
	h.WakeLocked()
	mu.Unlock()
	if o := <-out; o != Ready {
		t.Errorf("woken and ready: %d, want Ready", o)
	}
	WaitBlocked(t, h.Blocked, 0, 10*time.Second)

	mu.Lock()
	n = 0
	mu.Unlock()
	go func() { out <- h.Block(context.Background(), time.Minute, ready) }()
	WaitBlocked(t, h.Blocked, 1, 10*time.Second)
	mu.Lock()
	h.AbandonLocked()
	mu.Unlock()
	if o := <-out; o != Expired {
		t.Errorf("abandoned: %d, want Expired", o)
	}

	if o := h.Block(context.Background(), time.Millisecond, ready); o != Expired {
		t.Errorf("timed out: %d, want Expired", o)
	}
	if o := h.Block(context.Background(), time.Minute, func(bool) (bool, bool) { return false, true }); o != Stopped {
		t.Errorf("refused: %d, want Stopped", o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o := h.Block(ctx, time.Minute, ready); o != Gone {
		t.Errorf("client gone: %d, want Gone", o)
	}
	h.Close()
	if o := h.Block(context.Background(), time.Minute, ready); o != Expired {
		t.Errorf("closed: %d, want Expired", o)
	}
	WaitBlocked(t, h.Blocked, 0, 10*time.Second)
}
