// Package throttle owns in-memory rate limiting of attempts: it counts the
// failures per key (an account, a client address, later a passcode) in a
// sliding window and refuses further attempts once a key has too many.
//
// State is per process and bounded: a Limiter tracks at most maxKeys keys,
// and per key only the newest maxFails failures within the window.
//
// When full, a Limiter forgets the key whose newest failure is the oldest.
// Keys whose failures have all left the window go first, so nothing that
// matters is lost unless more than maxKeys keys failed within one window.
// The trade-off: an attacker who makes failures on that many distinct keys
// within a window can flush a victim key's count, and so buy maxFails more
// guesses on it for every maxKeys failures. The alternative, refusing to
// track new keys when full, would let the same attacker switch throttling off
// for every key not yet tracked, which is worse. So size maxKeys well above
// the number of keys expected to fail per window, and throttle by client
// address as well as by account: the address limit stops a sprayer long
// before it could flush anything.
//
// This package must not touch storage or HTTP.
package throttle

import (
	"container/list"
	"sync"
	"time"
)

// Limiter counts failures per key within a sliding window. It is safe for
// concurrent use.
type Limiter struct {
	maxFails int
	window   time.Duration
	now      func() time.Time
	maxKeys  int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *entry
	order *list.List               // of *entry, least recent failure first
}

// entry is the failures of one key within the window, oldest first; at most
// maxFails of them are kept, since only the newest maxFails can matter.
type entry struct {
	key   string
	fails []time.Time
}

// New returns a Limiter refusing a key once it has maxFails failures within
// window, tracking at most maxKeys keys. now is the clock (time.Now if nil).
// It panics if maxFails, window or maxKeys is not positive.
func New(maxFails int, window time.Duration, now func() time.Time, maxKeys int) *Limiter {
	if maxFails < 1 || window <= 0 || maxKeys < 1 {
		panic("throttle: maxFails, window and maxKeys must be positive")
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{
		maxFails: maxFails,
		window:   window,
		now:      now,
		maxKeys:  maxKeys,
		keys:     make(map[string]*list.Element),
		order:    list.New(),
	}
}

// Allow reports whether an attempt for key may go ahead: it may not when key
// has maxFails or more failures within the window. retryAfter is then how long
// until the oldest of them leaves the window, rounded up to whole seconds
// and at least one second; it is zero when ok.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now() // under the lock, so that calls see time in order
	el := l.keys[key]
	if el == nil {
		return true, 0
	}
	e := el.Value.(*entry)
	l.expire(e, now)
	if len(e.fails) == 0 {
		l.remove(el)
		return true, 0
	}
	if len(e.fails) < l.maxFails {
		return true, 0
	}
	wait := min(e.fails[0].Add(l.window).Sub(now), l.window) // min: the clock went back
	wait = (wait + time.Second - 1).Truncate(time.Second)
	return false, max(wait, time.Second)
}

// Fail records a failure for key now.
func (l *Limiter) Fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.dropExpired(now)
	el := l.keys[key]
	if el == nil {
		for len(l.keys) >= l.maxKeys {
			l.remove(l.order.Front())
		}
		el = l.order.PushBack(&entry{key: key, fails: make([]time.Time, 0, min(l.maxFails, 4))})
		l.keys[key] = el
	} else {
		l.order.MoveToBack(el)
	}
	e := el.Value.(*entry)
	l.expire(e, now)
	if n := len(e.fails); n > 0 && now.Before(e.fails[n-1]) {
		now = e.fails[n-1] // the clock went back: keep the failures in order
	}
	if len(e.fails) == l.maxFails {
		e.fails = append(e.fails[:0], e.fails[1:]...)
	}
	e.fails = append(e.fails, now)
}

// Reset forgets key, as after a successful sign-in.
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el := l.keys[key]; el != nil {
		l.remove(el)
	}
}

// expire drops e's failures that have left the window.
func (l *Limiter) expire(e *entry, now time.Time) {
	i := 0
	for i < len(e.fails) && !now.Before(e.fails[i].Add(l.window)) {
		i++
	}
	if i > 0 {
		e.fails = append(e.fails[:0], e.fails[i:]...)
	}
}

// dropExpired forgets the least recently failed keys whose failures have all
// left the window. Each key is dropped once, so the cost is amortised.
func (l *Limiter) dropExpired(now time.Time) {
	for el := l.order.Front(); el != nil; el = l.order.Front() {
		e := el.Value.(*entry)
		if now.Before(e.fails[len(e.fails)-1].Add(l.window)) {
			return
		}
		l.remove(el)
	}
}

func (l *Limiter) remove(el *list.Element) {
	delete(l.keys, el.Value.(*entry).key)
	l.order.Remove(el)
}

// size returns the number of keys tracked, for tests.
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
