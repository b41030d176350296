// Package fakeblock owns what the in-repo fakes of the route sources'
// servers (edge/consul/fakeconsul, edge/nomadsd/fakenomadsd) share of
// blocking-query semantics: parking a query until what it reads changes,
// its wait elapses (plus up to a sixteenth of jitter), a restore abandons
// it or the server closes; counting the queries parked, for tests to wait
// on; and parsing the index and wait parameters as both servers do.
//
// It is for tests only: production code never links it (internal/archtest
// checks). It must not import svc's route sources, whose tests use the
// fakes, nor any vendor's client; each fake keeps its vendor's paths,
// headers, JSON shapes, ACL behaviour and when an answer is ready.
package fakeblock

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Hub is the blocking-query state of one fake server. Its channels are
// guarded by the server's own lock, so that a query reads what it reads
// and the channel that wakes it on the next write in one critical section.
type Hub struct {
	mu        sync.Locker
	wake      chan struct{} // closed and replaced on every write
	abandon   chan struct{} // closed and replaced on a restore
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	blocked   int
	blockedCh chan struct{} // closed and replaced when blocked changes
}

// New returns the hub of a server whose state mu guards.
func New(mu sync.Locker) *Hub {
	return &Hub{mu: mu, wake: make(chan struct{}), abandon: make(chan struct{}), closed: make(chan struct{}), blockedCh: make(chan struct{})}
}

// WakeLocked makes every parked query look again. Callers hold the lock.
func (h *Hub) WakeLocked() {
	close(h.wake)
	h.wake = make(chan struct{})
}

// AbandonLocked answers every query in flight with what there is, as a
// server does on a snapshot restore. Callers hold the lock.
func (h *Hub) AbandonLocked() {
	close(h.abandon)
	h.abandon = make(chan struct{})
}

// Close answers every parked query, now and later, once it would park.
func (h *Hub) Close() { h.closeOnce.Do(func() { close(h.closed) }) }

// Blocked returns how many queries are parked now, and a channel closed
// when that number next changes: tests wait for a watcher to be parked
// in its queries before they change something, without sleeping.
func (h *Hub) Blocked() (int, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blocked, h.blockedCh
}

func (h *Hub) setBlocked(delta int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blocked += delta
	close(h.blockedCh)
	h.blockedCh = make(chan struct{})
}

// Outcome is how Block ended.
type Outcome int

const (
	// Ready: poll found the answer ready; answer with what it read.
	Ready Outcome = iota
	// Expired: the wait elapsed, a restore abandoned the query or the
	// server is closing; answer with what there is now.
	Expired
	// Stopped: poll refused the query; answer with its error.
	Stopped
	// Gone: the client went away; answer nothing.
	Gone
)

// Block parks one blocking query for at most wait plus up to a sixteenth
// of it. poll runs with the lock held, first and after every write; it
// reads what the query asks for, and reports whether the answer is ready
// or the query is refused; blocked says whether the query was parked
// before. A query counts as blocked (Blocked) while it is parked.
func (h *Hub) Block(ctx context.Context, wait time.Duration, poll func(blocked bool) (ready, stop bool)) Outcome {
	timeout := time.NewTimer(wait + rand.N(wait/16+1))
	defer timeout.Stop()
	counted := false
	defer func() {
		if counted {
			h.setBlocked(-1)
		}
	}()
	// A restore abandons the queries in flight when it happens.
	h.mu.Lock()
	abandon := h.abandon
	h.mu.Unlock()
	for {
		h.mu.Lock()
		wake := h.wake
		ready, stop := poll(counted)
		h.mu.Unlock()
		if stop {
			return Stopped
		}
		if ready {
			if counted {
				h.setBlocked(-1)
				counted = false
			}
			return Ready
		}
		if !counted {
			counted = true
			h.setBlocked(+1)
		}
		select {
		case <-wake:
			continue
		case <-ctx.Done():
			return Gone
		case <-abandon:
		case <-h.closed:
		case <-timeout.C:
		}
		// Abandoned, closing or timed out: no longer counted as blocked by
		// the time the client reads the answer.
		h.setBlocked(-1)
		counted = false
		return Expired
	}
}

// ParseQuery reads the blocking-query parameters as Consul and Nomad do:
// wait is a Go duration (400 "Invalid wait time"), def when absent or not
// positive and capped at most; index an unsigned integer (400 "Invalid
// index"). A status of 0 means the parameters are good.
func ParseQuery(v url.Values, def, most time.Duration) (index uint64, wait time.Duration, status int, msg string) {
	wait = def
	if s := v.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, def, http.StatusBadRequest, "Invalid wait time"
		}
		wait = d
	}
	if wait > most {
		wait = most
	}
	if wait <= 0 {
		wait = def
	}
	if s := v.Get("index"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, wait, http.StatusBadRequest, "Invalid index"
		}
		index = n
	}
	return index, wait, 0, ""
}
