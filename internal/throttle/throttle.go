// Package throttle owns in-memory rate limiting of guesses at a secret (a
// password, a passcode): it counts failures per key (an account and client
// address, a client address, an app) in a sliding window and refuses
// further attempts once a key has too many.
//
// # Reserve before the check
//
// An attempt is reserved before the secret is checked and settled after:
// Reserve counts the attempt as in flight, and refuses it when the key's
// failures within the window plus its attempts in flight already reach the
// limit; the caller then checks the secret only with a Reservation in hand
// and ends it with Failed (it counts as a failure) or Release (it does not:
// the secret was right, or it was never checked). So at most the limit is
// ever evaluated per key and window, however many requests arrive at once:
// a burst of 200 guesses against a limit of 10 has 10 checked and 190
// refused, the right secret among them included (a refusal says nothing
// about the guess). A refused attempt counts nothing, so hammering a key
// that is at its limit does not extend the wait.
//
// # Keys and lockout
//
// The caller picks the keys; internal/identity uses, for a sign-in, the
// account and client address together (ten failures in fifteen minutes),
// the client address alone (fifty, against spraying many accounts), and the
// account alone from any address (a hundred), which an address the account
// signed in from recently is exempt from (Recent remembers them). An
// attacker at one address therefore locks out only that address for that
// account; one with many addresses can hold an account at its global limit
// (at most a hundred guesses per fifteen minutes) but not keep its owner
// from signing in where they did before. Passcodes work the same way per
// app. A client address is IPv6 by its /64 (internal/clientip.Key).
//
// # Bounds
//
// State is per process and bounded: a Limiter tracks at most maxKeys keys,
// and per key only the newest maxFails failures within the window. When
// full, it forgets the key least recently reserved or failed that has no
// attempt in flight; keys whose failures have all left the window go first,
// so nothing that matters is lost unless more than maxKeys keys failed
// within one window. The trade-off: an attacker who makes failures on that
// many distinct keys within a window can flush a victim key's count, and so
// buy maxFails more guesses on it for every maxKeys failures. The
// alternative, refusing to track new keys when full, would let the same
// attacker switch throttling off for every key not yet tracked, which is
// worse. So size maxKeys well above the number of keys expected to fail per
// window, and throttle by client address as well as by account: the address
// limit stops a sprayer long before it could flush anything. When every
// tracked key has an attempt in flight, a new key is refused (for a second)
// rather than tracked beyond the bound.
//
// This package must not touch storage or HTTP.
package throttle

import (
	"container/list"
	"sync"
	"time"
)

// Limiter counts failures and attempts in flight per key within a sliding
// window. It is safe for concurrent use.
type Limiter struct {
	maxFails int
	window   time.Duration
	now      func() time.Time
	maxKeys  int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *entry
	order *list.List               // of *entry, least recently reserved or failed first
}

// entry is one key: its failures within the window, oldest first (at most
// maxFails of them), and its attempts in flight. An entry with attempts in
// flight is never forgotten, so a Reservation's element stays valid.
type entry struct {
	key      string
	fails    []time.Time
	inflight int
}

// New returns a Limiter refusing an attempt for a key once its failures
// within window and its attempts in flight reach maxFails, tracking at most
// maxKeys keys. now is the clock (time.Now if nil). It panics if maxFails,
// window or maxKeys is not positive.
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

// Reservation is one attempt that Reserve let through. The caller ends it
// exactly once, with Failed or Release; later calls do nothing. A nil
// Reservation's methods do nothing.
type Reservation struct {
	l    *Limiter
	el   *list.Element
	done bool // under l.mu
}

// Reserve takes an attempt for key. It is refused (ok false) when key's
// failures within the window plus its attempts in flight have reached the
// limit; retryAfter is then how long until enough failures leave the
// window (or one second when it is attempts in flight that fill it),
// rounded up to whole seconds and at least one second. A refusal counts
// nothing.
func (l *Limiter) Reserve(key string) (r *Reservation, ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now() // under the lock, so that calls see time in order
	el := l.keys[key]
	if el == nil {
		l.dropExpired(now)
		if !l.makeRoom() {
			return nil, false, time.Second
		}
		el = l.order.PushBack(&entry{key: key})
		l.keys[key] = el
	}
	e := el.Value.(*entry)
	l.expire(e, now)
	if len(e.fails)+e.inflight >= l.maxFails {
		return nil, false, l.wait(e, now)
	}
	e.inflight++
	l.order.MoveToBack(el)
	return &Reservation{l: l, el: el}, true, 0
}

// wait is how long until an attempt for e could be let through, assuming
// the attempts in flight end as failures.
func (l *Limiter) wait(e *entry, now time.Time) time.Duration {
	k := len(e.fails) + e.inflight - l.maxFails + 1 // failures that must leave the window
	if k > len(e.fails) {
		return time.Second // attempts in flight fill the limit; they end soon
	}
	wait := min(e.fails[k-1].Add(l.window).Sub(now), l.window) // min: the clock went back
	wait = (wait + time.Second - 1).Truncate(time.Second)
	return max(wait, time.Second)
}

// Failed ends the attempt as a failure, counted now.
func (r *Reservation) Failed() { r.end(true) }

// Release ends the attempt without counting it: the secret was right, or
// it was not checked.
func (r *Reservation) Release() { r.end(false) }

func (r *Reservation) end(failed bool) {
	if r == nil {
		return
	}
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	e := r.el.Value.(*entry)
	e.inflight--
	if failed {
		now := l.now()
		l.expire(e, now)
		if n := len(e.fails); n > 0 && now.Before(e.fails[n-1]) {
			now = e.fails[n-1] // the clock went back: keep the failures in order
		}
		if len(e.fails) == l.maxFails {
			e.fails = append(e.fails[:0], e.fails[1:]...)
		}
		e.fails = append(e.fails, now)
		l.order.MoveToBack(r.el)
	}
	if e.inflight == 0 && len(e.fails) == 0 {
		l.remove(r.el)
	}
}

// Reset forgets key's failures, as after a successful sign-in. Attempts in
// flight stay counted until they end.
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el := l.keys[key]
	if el == nil {
		return
	}
	if e := el.Value.(*entry); e.inflight > 0 {
		e.fails = e.fails[:0]
		return
	}
	l.remove(el)
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

// dropExpired forgets the least recently used keys with nothing in flight
// whose failures have all left the window, up to the first that still
// matters. Each key is dropped once, so the cost is amortised.
func (l *Limiter) dropExpired(now time.Time) {
	for el := l.order.Front(); el != nil; el = l.order.Front() {
		e := el.Value.(*entry)
		if e.inflight > 0 || (len(e.fails) > 0 && now.Before(e.fails[len(e.fails)-1].Add(l.window))) {
			return
		}
		l.remove(el)
	}
}

// makeRoom forgets the least recently used keys with nothing in flight
// until a new key fits; false when every tracked key has an attempt in
// flight.
func (l *Limiter) makeRoom() bool {
	for len(l.keys) >= l.maxKeys {
		el := l.order.Front()
		for el != nil && el.Value.(*entry).inflight > 0 {
			el = el.Next()
		}
		if el == nil {
			return false
		}
		l.remove(el)
	}
	return true
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
