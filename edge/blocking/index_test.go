package blocking

import (
	"testing"
	"time"
)

func TestNextIndex(t *testing.T) {
	for _, tc := range []struct{ prev, got, want uint64 }{
		{0, 7, 7}, // the first answer
		{7, 9, 9}, // moved on
		{7, 7, 7}, // the wait elapsed
		{9, 4, 0}, // went backwards: start over without blocking
		{0, 0, 1}, // never wait on 0
		{5, 0, 0}, // backwards to 0: start over, then 1
		{0, 1, 1}, // the lowest real index
		{1, 1, 1}, // and again
		{12, 13, 13} /* plain */} {
		if got := NextIndex(tc.prev, tc.got); got != tc.want {
			t.Errorf("NextIndex(%d, %d) = %d, want %d", tc.prev, tc.got, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for n, ceiling := range map[int]time.Duration{1: lo, 2: 2 * lo, 3: 4 * lo, 5: 16 * lo, 6: hi, 40: hi} {
		for range 50 {
			d := Backoff(lo, hi, n)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", n, d, ceiling/2, ceiling)
			}
		}
	}
}
