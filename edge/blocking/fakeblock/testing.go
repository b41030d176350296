package fakeblock

import (
	"context"
	"testing"
	"time"
)

// WaitBlocked waits until blocked (a fake server's Blocked) reports n
// parked queries, and fails t after limit.
func WaitBlocked(t testing.TB, blocked func() (int, <-chan struct{}), n int, limit time.Duration) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		got, ch := blocked()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%d queries blocked, want %d", got, n)
		}
	}
}

// Start runs run (a route source's Run) until the test ends, and fails t
// if it returns an error.
func Start(t testing.TB, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// WaitFor waits until cond holds of what upstreams (a route source's
// Upstreams) reports, and returns the upstreams it held of; it fails t,
// saying it waited for what, after limit.
func WaitFor[U any](t testing.TB, upstreams func() (U, bool, <-chan struct{}), limit time.Duration, what string, cond func(ups U, synced bool) bool) U {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		ups, synced, changed := upstreams()
		if cond(ups, synced) {
			return ups
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %s; upstreams now %v (synced %v)", limit, what, ups, synced)
		}
	}
}

// WaitCheck waits until check (a route source's health check) answers as
// cond wants, looking again whenever upstreams reports a change (its
// failures show there), and returns the answer; it fails t after limit.
func WaitCheck[U any](t testing.TB, upstreams func() (U, bool, <-chan struct{}), check func(context.Context) error, limit time.Duration, cond func(error) bool) error {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		_, _, changed := upstreams()
		err := check(context.Background())
		if cond(err) {
			return err
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for the health check; it says %v", limit, err)
		}
	}
}
