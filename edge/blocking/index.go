package blocking

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a watch's Timing.
const (
	// DefaultWait is how long one blocking query waits for a change before
	// the server answers with what it has (Consul's own default is 5
	// minutes and its maximum 10, Nomad's default and maximum 5): a
	// connection that died silently is noticed within about this long.
	DefaultWait     = time.Minute
	DefaultRetryMin = 250 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
)

// Timing is how long a watch's queries wait and how it backs off after a
// failed one.
type Timing struct {
	// Wait is the longest a blocking query waits (DefaultWait when 0).
	Wait time.Duration
	// RetryMin and RetryMax bound the backoff after a failed query
	// (DefaultRetryMin, DefaultRetryMax when 0; RetryMax is at least
	// RetryMin).
	RetryMin, RetryMax time.Duration
}

// WithDefaults returns t with the defaults in place of what is unset.
func (t Timing) WithDefaults() Timing {
	if t.Wait <= 0 {
		t.Wait = DefaultWait
	}
	if t.RetryMin <= 0 {
		t.RetryMin = DefaultRetryMin
	}
	if t.RetryMax < t.RetryMin {
		t.RetryMax = max(DefaultRetryMax, t.RetryMin)
	}
	return t
}

// NextIndex is the index to wait on after an answer carrying index got to
// a query that waited on prev, by the rules of Consul's documentation on
// blocking queries (Nomad's work the same): an index that went backwards
// (a snapshot restore, a new cluster at the same address) resets the
// watch to 0, a non-blocking read that starts it over; an index of 0,
// which the server should never send, is waited on as 1, since waiting on
// 0 does not block and would spin.
func NextIndex(prev, got uint64) uint64 {
	switch {
	case got < prev:
		return 0
	case got == 0:
		return 1
	default:
		return got
	}
}

// Backoff is the pause before retry n (1 for the first) of a failed
// query: lo doubled per failure up to hi, half of it random so that edge
// nodes that lost the server together do not come back in step.
func Backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// RequestTimeout bounds one blocking query: the server answers within
// wait plus up to a sixteenth of it (its jitter); the rest is slack for a
// slow network. A query on a connection that died silently fails after
// it.
func RequestTimeout(wait time.Duration) time.Duration {
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
