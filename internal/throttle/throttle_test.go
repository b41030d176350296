package throttle

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
		if n := len(e.fails); n > l.maxFails || e.inflight < 0 || n+e.inflight == 0 || n+e.inflight > l.maxFails {
			t.Errorf("key %q keeps %d failures and %d in flight, want 1 to %d in all", e.key, n, e.inflight, l.maxFails)
		}
		for i := 1; i < len(e.fails); i++ {
			if e.fails[i].Before(e.fails[i-1]) {
				t.Errorf("key %q: failures out of order: %v", e.key, e.fails)
			}
		}
	}
}

// fail reserves an attempt for key and ends it as a failure; false when
// the attempt was refused.
func fail(l *Limiter, key string) bool {
	r, ok, _ := l.Reserve(key)
	r.Failed()
	return ok
}

// check reserves an attempt and releases it at once.
func check(l *Limiter, key string) (bool, time.Duration) {
	r, ok, retry := l.Reserve(key)
	r.Release()
	return ok, retry
}

type step struct {
	advance   time.Duration // before the step
	fail      bool          // reserve and fail, instead of reserve and release
	ok        bool          // Reserve's want
	retryWant time.Duration
}

func TestReserve(t *testing.T) {
	const window = time.Minute
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"no failures", 3, []step{{ok: true}, {advance: time.Hour, ok: true}}},
		{"under the limit", 3, []step{
			{fail: true, ok: true}, {advance: 10 * time.Second, fail: true, ok: true},
			{ok: true}, {ok: true}, {ok: true}, // released attempts count nothing
		}},
		{"at the limit", 3, []step{
			{fail: true, ok: true}, {advance: 10 * time.Second, fail: true, ok: true}, {advance: 10 * time.Second, fail: true, ok: true},
			{ok: false, retryWant: 40 * time.Second},
			{advance: 5 * time.Second, ok: false, retryWant: 35 * time.Second},
		}},
		{"retryAfter rounds up", 1, []step{
			{fail: true, ok: true},
			{advance: 500 * time.Millisecond, ok: false, retryWant: 60 * time.Second},
			{advance: 29500 * time.Millisecond, ok: false, retryWant: 30 * time.Second},
			{advance: 1, ok: false, retryWant: 30 * time.Second},
			{advance: time.Second - 1, ok: false, retryWant: 29 * time.Second},
		}},
		{"retryAfter at least 1s", 1, []step{
			{fail: true, ok: true},
			{advance: window - time.Millisecond, ok: false, retryWant: time.Second},
			{advance: time.Millisecond, ok: true}, // exactly a window later: gone
		}},
		{"window slides", 2, []step{
			{fail: true, ok: true}, {advance: 30 * time.Second, fail: true, ok: true},
			{ok: false, retryWant: 30 * time.Second},
			{advance: 30 * time.Second, ok: true}, // the first left the window
			{fail: true, ok: true},
			{ok: false, retryWant: 30 * time.Second}, // the second leaves next
			{advance: 30 * time.Second, ok: true},
			{advance: 30 * time.Second, ok: true},
		}},
		{"a refused attempt counts nothing", 1, []step{
			{fail: true, ok: true},
			{advance: 50 * time.Second, fail: true, ok: false},
			{ok: false, retryWant: 10 * time.Second},
			{advance: 10 * time.Second, ok: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			l := New(tt.max, window, c.Now, 100)
			for i, s := range tt.steps {
				c.Advance(s.advance)
				if s.fail {
					if ok := fail(l, "k"); ok != s.ok {
						t.Errorf("step %d: Reserve ok = %v, want %v", i, ok, s.ok)
					}
					continue
				}
				ok, retry := check(l, "k")
				if ok != s.ok || retry != s.retryWant {
					t.Errorf("step %d: Reserve = %v, %v; want %v, %v", i, ok, retry, s.ok, s.retryWant)
				}
			}
			invariants(t, l)
		})
	}
}

// TestInFlightCounts: attempts in flight count against the limit, so that
// no more than the limit is ever checked at once or per window.
func TestInFlightCounts(t *testing.T) {
	c := newClock()
	l := New(3, time.Minute, c.Now, 100)
	var held []*Reservation
	for i := range 3 {
		r, ok, _ := l.Reserve("k")
		if !ok {
			t.Fatalf("attempt %d refused with nothing counted", i+1)
		}
		held = append(held, r)
	}
	if r, ok, retry := l.Reserve("k"); ok || r != nil || retry != time.Second {
		t.Fatalf("a fourth attempt with three in flight: %v, %v, %v; want refused for 1s", r, ok, retry)
	}
	invariants(t, l)
	held[0].Release() // the right secret: nothing counted
	held[0].Failed()  // a second end does nothing
	if ok, _ := check(l, "k"); !ok {
		t.Fatal("refused after an attempt was released")
	}
	held[1].Failed()
	held[2].Failed()
	if r, ok, _ := l.Reserve("k"); !ok {
		t.Fatal("refused with two failures of three")
	} else {
		r.Failed()
	}
	if ok, retry := check(l, "k"); ok || retry != time.Minute {
		t.Errorf("after three failures: %v, %v; want refused for 1m0s", ok, retry)
	}
	invariants(t, l)
	var nilRes *Reservation
	nilRes.Failed()
	nilRes.Release()
}

// TestBurst: however many attempts arrive at once, at most the limit is let
// through per window, and the limit's worth are.
func TestBurst(t *testing.T) {
	c := newClock()
	const limit = 10
	l := New(limit, time.Minute, c.Now, 100)
	var through atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			r, ok, retry := l.Reserve("k")
			if !ok {
				if retry < time.Second {
					t.Errorf("refused with retryAfter %v", retry)
				}
				return
			}
			through.Add(1)
			time.Sleep(time.Millisecond) // the check
			r.Failed()
		})
	}
	close(start)
	wg.Wait()
	if got := through.Load(); got != limit {
		t.Errorf("%d attempts let through, want %d", got, limit)
	}
	if ok, _ := check(l, "k"); ok {
		t.Error("an attempt after the burst was let through")
	}
	invariants(t, l)
}

func TestReset(t *testing.T) {
	c := newClock()
	l := New(2, time.Minute, c.Now, 10)
	fail(l, "alice")
	fail(l, "alice")
	fail(l, "bob")
	fail(l, "bob")
	if ok, _ := check(l, "alice"); ok {
		t.Fatalf("alice after 2 failures let through")
	}
	l.Reset("alice")
	if ok, retry := check(l, "alice"); !ok || retry != 0 {
		t.Errorf("alice after Reset = %v, %v; want true, 0", ok, retry)
	}
	if ok, _ := check(l, "bob"); ok {
		t.Errorf("bob after Reset(alice) let through")
	}
	l.Reset("nobody") // no effect
	if got, want := l.size(), 1; got != want {
		t.Errorf("size = %d, want %d", got, want)
	}
	// Reset with an attempt in flight keeps that attempt counted.
	r, _, _ := l.Reserve("carol")
	fail(l, "carol")
	l.Reset("carol")
	r2, ok, _ := l.Reserve("carol")
	if !ok {
		t.Fatal("carol after Reset refused with one attempt in flight of two")
	}
	if ok, _ := check(l, "carol"); ok {
		t.Error("carol let through a third attempt with two in flight")
	}
	r.Failed()
	r2.Release()
	invariants(t, l)
}

func TestKeysIndependent(t *testing.T) {
	c := newClock()
	l := New(3, time.Minute, c.Now, 10)
	for range 3 {
		fail(l, "203.0.113.7")
	}
	fail(l, "alice")
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
			if got, _ := check(l, tt.key); got != tt.ok {
				t.Errorf("Reserve(%q) ok = %v, want %v", tt.key, got, tt.ok)
			}
		})
	}
}

// keys returns the tracked keys, least recently used first.
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
			fail(l, k)
			c.Advance(time.Second)
		}
		c.Advance(time.Second)
		fail(l, "d")
		if diff := cmp.Diff([]string{"b", "c", "d"}, keys(l)); diff != "" {
			t.Errorf("keys after eviction (-want +got):\n%s", diff)
		}
		for _, k := range []string{"b", "c", "d"} {
			if ok, _ := check(l, k); ok {
				t.Errorf("%s let through", k)
			}
		}
		// (An attempt on a new key takes room too while it is in flight:
		// checking a forgets b.)
		if ok, _ := check(l, "a"); !ok {
			t.Errorf("a after its eviction refused")
		}
		invariants(t, l)
	})
	t.Run("expired keys go first and are freed", func(t *testing.T) {
		c := newClock()
		l := New(1, time.Minute, c.Now, 3)
		fail(l, "a")
		fail(l, "b")
		c.Advance(30 * time.Second)
		fail(l, "c")
		c.Advance(30 * time.Second) // a and b have expired, c has not
		fail(l, "d")
		if diff := cmp.Diff([]string{"c", "d"}, keys(l)); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
		c.Advance(time.Hour)
		if ok, _ := check(l, "c"); !ok {
			t.Errorf("c an hour later refused")
		}
		if diff := cmp.Diff([]string{"d"}, keys(l)); diff != "" {
			t.Errorf("keys after an expired key's attempt (-want +got):\n%s", diff)
		}
	})
	t.Run("keys in flight are kept; full of them, a new key waits", func(t *testing.T) {
		c := newClock()
		l := New(2, time.Minute, c.Now, 2)
		ra, _, _ := l.Reserve("a")
		rb, _, _ := l.Reserve("b")
		if r, ok, retry := l.Reserve("c"); ok || r != nil || retry != time.Second {
			t.Errorf("a third key with two in flight: %v, %v; want refused for 1s", ok, retry)
		}
		ra.Failed()
		if ok := fail(l, "c"); !ok {
			t.Error("c refused once a had nothing in flight")
		}
		if diff := cmp.Diff([]string{"b", "c"}, keys(l)); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
		rb.Failed()
		invariants(t, l)
	})
	t.Run("spraying keeps the bound", func(t *testing.T) {
		c := newClock()
		const maxKeys = 100
		l := New(5, time.Minute, c.Now, maxKeys)
		for i := range 10 * maxKeys {
			for range 7 {
				fail(l, fmt.Sprint("k", i))
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
	t.Run("successes leave nothing behind", func(t *testing.T) {
		l := New(5, time.Minute, nil, 10)
		for i := range 100 {
			check(l, fmt.Sprint("k", i))
		}
		if got := l.size(); got != 0 {
			t.Errorf("size after released attempts = %d, want 0", got)
		}
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
					fail(l, k)
				default:
					if ok, retry := check(l, k); ok != (retry == 0) || retry < 0 || retry > time.Minute {
						t.Errorf("Reserve(%s) = %v, %v", k, ok, retry)
					}
				}
			}
		})
	}
	wg.Wait()
	invariants(t, l)
	if got := l.size(); got > 20 {
		t.Errorf("size %d over the bound", got)
	}
}

func TestClockGoingBack(t *testing.T) {
	c := newClock()
	l := New(2, time.Minute, c.Now, 10)
	fail(l, "k")
	c.Advance(-time.Hour)
	fail(l, "k")
	if ok, retry := check(l, "k"); ok || retry != time.Minute {
		t.Errorf("Reserve = %v, %v; want false, 1m0s", ok, retry)
	}
	invariants(t, l)
	c.Advance(time.Hour + time.Minute)
	if ok, retry := check(l, "k"); !ok || retry != 0 {
		t.Errorf("Reserve a window after the newest failure = %v, %v; want true, 0", ok, retry)
	}
}

func TestDefaultClock(t *testing.T) {
	l := New(1, time.Minute, nil, 10)
	fail(l, "k")
	// A minute, less the (real) time since the failure, rounded up.
	if ok, retry := check(l, "k"); ok || retry < 59*time.Second || retry > time.Minute {
		t.Errorf("Reserve = %v, %v; want false, 59s to 1m0s", ok, retry)
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

func TestRecent(t *testing.T) {
	c := newClock()
	r := NewRecent(time.Hour, c.Now, 3)
	r.Add("a")
	c.Advance(time.Minute)
	r.Add("b")
	r.Add("c")
	if !r.Has("a") || !r.Has("b") || r.Has("x") {
		t.Errorf("Has a, b, x = %v, %v, %v", r.Has("a"), r.Has("b"), r.Has("x"))
	}
	r.Add("a") // a is now the most recent
	r.Add("d") // full: b goes
	if r.Has("b") || !r.Has("a") || !r.Has("c") || !r.Has("d") {
		t.Errorf("after eviction: a %v b %v c %v d %v", r.Has("a"), r.Has("b"), r.Has("c"), r.Has("d"))
	}
	c.Advance(time.Hour)
	if r.Has("a") || r.Has("d") {
		t.Error("keys kept past their ttl")
	}
	r.Add("e") // the expired ones are freed
	r.mu.Lock()
	n := len(r.keys)
	r.mu.Unlock()
	if n != 1 {
		t.Errorf("%d keys kept after every other expired, want 1", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRecent(0, …) did not panic")
		}
	}()
	NewRecent(0, nil, 1)
}

// BenchmarkReserve measures the reserve path: a reservation and its end,
// serially and from every core, over more keys than the limiter tracks
// (so eviction is part of the cost), and on one hot key at its limit (the
// refusals of a burst).
func BenchmarkReserve(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.100.%d/%d", i%256, i)
	}
	for _, end := range []struct {
		name string
		end  func(*Reservation)
	}{{"fail", (*Reservation).Failed}, {"release", (*Reservation).Release}} {
		b.Run(end.name+"/serial", func(b *testing.B) {
			l := New(5, time.Minute, nil, 1024)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				r, _, _ := l.Reserve(keys[i%len(keys)])
				end.end(r)
				i++
			}
		})
		b.Run(end.name+"/parallel", func(b *testing.B) {
			l := New(5, time.Minute, nil, 1024)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(keys))
				for pb.Next() {
					r, _, _ := l.Reserve(keys[i%len(keys)])
					end.end(r)
					i++
				}
			})
		})
	}
	b.Run("refused/parallel", func(b *testing.B) {
		l := New(5, time.Minute, nil, 1024)
		for range 5 {
			r, _, _ := l.Reserve("hot")
			r.Failed()
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok, _ := l.Reserve("hot"); ok {
					b.Error("an attempt at the limit was let through")
				}
			}
		})
	})
}
