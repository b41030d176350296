package consul

import (
	"context"
	"math/rand/v2"
	"time"
)

// nextIndex is the index to wait on after an answer carrying index got to a
// query that waited on prev, by the rules of Consul's documentation on
// blocking queries: an index that went backwards (a snapshot restore, a
// new cluster at the same address) resets the watch to 0, a non-blocking
// read that starts it over; an index of 0, which Consul should never
// send, is waited on as 1, since waiting on 0 does not block and would
// spin.
func nextIndex(prev, got uint64) uint64 {
	switch {
	case got < prev:
		return 0
	case got == 0:
		return 1
	default:
		return got
	}
}

// backoff is the pause before retry n (1 for the first) of a failed query:
// lo doubled per failure up to hi, half of it random so that edge nodes
// that lost Consul together do not come back in step.
func backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// requestTimeout bounds one blocking query: Consul answers within wait
// plus up to a sixteenth of it (its jitter); the rest is slack for a slow
// network. A query on a connection that died silently fails after it.
func requestTimeout(wait time.Duration) time.Duration {
	return wait + wait/16 + 10*time.Second
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
