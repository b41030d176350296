package throttle

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clock is a controllable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// invariants checks the internal bounds and consistency of l.
func invariants(t *testing.T, l *Limiter) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := len(l.keys); got > l.maxKeys {
		t.Errorf("tracking %d keys, want at most %d", got, l.maxKeys)
	}
	if got, want := l.order.Len(), len(l.keys); got != want {
		t.Errorf("order list has %d keys, map %d", got, want)
	}
	for el := l.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		if l.keys[e.key] != el {
			t.Errorf("key %q: map and list disagree", e.key)
		}
		if n := len(e.fails); n == 0 || n > l.maxFails {
			t.Errorf("key %q keeps %d failures, want 1 to %d", e.key, n, l.maxFails)
		}
		for i := 1; i < len(e.fails); i++ {
			if e.fails[i].Before(e.fails[i-1]) {
				t.Errorf("key %q: failures out of order: %v", e.key, e.fails)
			}
		}
	}
}

type step struct {
	advance   time.Duration // before the step
	fail      bool          // Fail instead of Allow
	ok        bool          // Allow's want
	retryWant time.Duration
}

func TestAllow(t *testing.T) {
	const window = time.Minute
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"no failures", 3, []step{{ok: true}, {advance: time.Hour, ok: true}}},
		{"under the limit", 3, []step{
			{fail: true}, {advance: 10 * time.Second, fail: true},
			{ok: true}, {ok: true}, {ok: true}, // Allow itself counts nothing
		}},
		{"at the limit", 3, []step{
			{fail: true}, {advance: 10 * time.Second, fail: true}, {advance: 10 * time.Second, fail: true},
			{ok: false, retryWant: 40 * time.Second},
			{advance: 5 * time.Second, ok: false, retryWant: 35 * time.Second},
		}},
		{"retryAfter rounds up", 1, []step{
			{fail: true},
			{advance: 500 * time.Millisecond, ok: false, retryWant: 60 * time.Second},
			{advance: 29500 * time.Millisecond, ok: false, retryWant: 30 * time.Second},
			{advance: 1, ok: false, retryWant: 30 * time.Second},
			{advance: time.Second - 1, ok: false, retryWant: 29 * time.Second},
		}},
		{"retryAfter at least 1s", 1, []step{
			{fail: true},
			{advance: window - time.Millisecond, ok: false, retryWant: time.Second},
			{advance: time.Millisecond, ok: true}, // exactly a window later: gone
		}},
		{"window slides", 2, []step{
			{fail: true}, {advance: 30 * time.Second, fail: true},
			{ok: false, retryWant: 30 * time.Second},
			{advance: 30 * time.Second, ok: true}, // the first left the window
			{fail: true},
			{ok: false, retryWant: 30 * time.Second}, // the second leaves next
			{advance: 30 * time.Second, ok: true},
			{advance: 30 * time.Second, ok: true},
		}},
		{"only the newest max count", 3, []step{
			{fail: true}, {advance: time.Second, fail: true}, {advance: time.Second, fail: true},
			{advance: time.Second, fail: true}, {advance: time.Second, fail: true}, // at 0..4s
			{advance: time.Second, ok: false, retryWant: 57 * time.Second}, // until 2s+window
			{advance: 56 * time.Second, ok: false, retryWant: time.Second},
			{advance: time.Second, ok: true},
		}},
		{"failing while refused extends", 1, []step{
			{fail: true},
			{advance: 50 * time.Second, fail: true},
			{ok: false, retryWant: 60 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			l := New(tt.max, window, c.Now, 100)
			for i, s := range tt.steps {
				c.Advance(s.advance)
				if s.fail {
					l.Fail("k")
					continue
				}
				ok, retry := l.Allow("k")
				if ok != s.ok || retry != s.retryWant {
					t.Errorf("step %d: Allow = %v, %v; want %v, %v", i, ok, retry, s.ok, s.retryWant)
				}
			}
			invariants(t, l)
		})
	}
}

func TestReset(t *testing.T) {
	c := newClock()
	l := New(2, time.Minute, c.Now, 10)
	l.Fail("alice")
	l.Fail("alice")
	l.Fail("bob")
	l.Fail("bob")
	if ok, _ := l.Allow("alice"); ok {
		t.Fatalf("Allow(alice) after 2 failures = true, want false")
	}
	l.Reset("alice")
	if ok, retry := l.Allow("alice"); !ok || retry != 0 {
		t.Errorf("Allow(alice) after Reset = %v, %v; want true, 0", ok, retry)
	}
	if ok, _ := l.Allow("bob"); ok {
		t.Errorf("Allow(bob) after Reset(alice) = true, want false")
	}
	l.Reset("nobody") // no effect
	if got, want := l.size(), 1; got != want {
		t.Errorf("size = %d, want %d", got, want)
	}
	invariants(t, l)
}

func TestKeysIndependent(t *testing.T) {
	c := newClock()
	l := New(3, time.Minute, c.Now, 10)
	for range 3 {
		l.Fail("203.0.113.7")
	}
	l.Fail("alice")
	tests := []struct {
		key string
		ok  bool
	}{
		{"203.0.113.7", false},
		{"203.0.113.8", true},
		{"alice", true},
		{"", true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got, _ := l.Allow(tt.key); got != tt.ok {
				t.Errorf("Allow(%q) = %v, want %v", tt.key, got, tt.ok)
			}
		})
	}
}

// keys returns the tracked keys, least recent failure first.
func keys(l *Limiter) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []string
	for el := l.order.Front(); el != nil; el = el.Next() {
		ks = append(ks, el.Value.(*entry).key)
	}
	return ks
}

func TestEviction(t *testing.T) {
	t.Run("least recent failure goes", func(t *testing.T) {
		c := newClock()
		l := New(1, time.Minute, c.Now, 3)
		for _, k := range []string{"a", "b", "c"} {
			l.Fail(k)
			c.Advance(time.Second)
		}
		l.Fail("a") // a is now the most recent
		c.Advance(time.Second)
		l.Fail("d")
		if diff := cmp.Diff([]string{"c", "a", "d"}, keys(l)); diff != "" {
			t.Errorf("keys after eviction (-want +got):\n%s", diff)
		}
		if ok, _ := l.Allow("b"); !ok {
			t.Errorf("Allow(b) after its eviction = false, want true")
		}
		for _, k := range []string{"a", "c", "d"} {
			if ok, _ := l.Allow(k); ok {
				t.Errorf("Allow(%s) = true, want false", k)
			}
		}
		invariants(t, l)
	})
	t.Run("expired keys go first and are freed", func(t *testing.T) {
		c := newClock()
		l := New(1, time.Minute, c.Now, 3)
		l.Fail("a")
		l.Fail("b")
		c.Advance(30 * time.Second)
		l.Fail("c")
		c.Advance(30 * time.Second) // a and b have expired, c has not
		l.Fail("d")
		if diff := cmp.Diff([]string{"c", "d"}, keys(l)); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
		c.Advance(time.Hour)
		if ok, _ := l.Allow("c"); !ok {
			t.Errorf("Allow(c) an hour later = false, want true")
		}
		if diff := cmp.Diff([]string{"d"}, keys(l)); diff != "" {
			t.Errorf("keys after Allow of an expired key (-want +got):\n%s", diff)
		}
	})
	t.Run("spraying keeps the bound", func(t *testing.T) {
		c := newClock()
		const maxKeys = 100
		l := New(5, time.Minute, c.Now, maxKeys)
		for i := range 10 * maxKeys {
			for range 7 {
				l.Fail(fmt.Sprint("k", i))
			}
			if got := l.size(); got > maxKeys {
				t.Fatalf("after %d keys: size %d, want at most %d", i+1, got, maxKeys)
			}
		}
		if got := l.size(); got != maxKeys {
			t.Errorf("size = %d, want %d", got, maxKeys)
		}
		invariants(t, l)
	})
}

func TestConcurrentUse(t *testing.T) {
	c := newClock()
	l := New(3, time.Minute, c.Now, 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				k := fmt.Sprint("k", r.IntN(50))
				switch r.IntN(10) {
				case 0:
					l.Reset(k)
				case 1:
					c.Advance(time.Second)
				case 2, 3, 4:
					l.Fail(k)
				default:
					if ok, retry := l.Allow(k); ok != (retry == 0) || retry < 0 || retry > time.Minute {
						t.Errorf("Allow(%s) = %v, %v", k, ok, retry)
					}
				}
			}
		})
	}
	wg.Wait()
	invariants(t, l)
}

func TestClockGoingBack(t *testing.T) {
	c := newClock()
	l := New(2, time.Minute, c.Now, 10)
	l.Fail("k")
	c.Advance(-time.Hour)
	l.Fail("k")
	if ok, retry := l.Allow("k"); ok || retry != time.Minute {
		t.Errorf("Allow = %v, %v; want false, 1m0s", ok, retry)
	}
	invariants(t, l)
	c.Advance(time.Hour + time.Minute)
	if ok, retry := l.Allow("k"); !ok || retry != 0 {
		t.Errorf("Allow a window after the newest failure = %v, %v; want true, 0", ok, retry)
	}
}

func TestDefaultClock(t *testing.T) {
	l := New(1, time.Minute, nil, 10)
	l.Fail("k")
	// A minute, less the (real) time since the failure, rounded up.
	if ok, retry := l.Allow("k"); ok || retry < 59*time.Second || retry > time.Minute {
		t.Errorf("Allow = %v, %v; want false, 59s to 1m0s", ok, retry)
	}
}

func TestNewPanics(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		window  time.Duration
		maxKeys int
	}{
		{"max 0", 0, time.Minute, 10},
		{"window 0", 1, 0, 10},
		{"window negative", 1, -time.Second, 10},
		{"maxKeys 0", 1, time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, %v, nil, %d) did not panic", tt.max, tt.window, tt.maxKeys)
				}
			}()
			New(tt.max, tt.window, nil, tt.maxKeys)
		})
	}
}

func BenchmarkAllowFail(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.100.%d/%d", i%256, i)
	}
	// maxKeys below the number of keys, so eviction is part of the cost.
	b.Run("serial", func(b *testing.B) {
		l := New(5, time.Minute, nil, 1024)
		i := 0
		for b.Loop() {
			k := keys[i%len(keys)]
			l.Allow(k)
			l.Fail(k)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := New(5, time.Minute, nil, 1024)
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(keys))
			for pb.Next() {
				k := keys[i%len(keys)]
				l.Allow(k)
				l.Fail(k)
				i++
			}
		})
	})
}
