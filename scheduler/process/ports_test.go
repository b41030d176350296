package process

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// TestPortPool: ports come from the range, never a reserved one, never
// one something listens on, never one handed out within portHold; a range with none left is
// CAPACITY_NO_FREE_PORT; a held port returns once its hold has passed.
func TestPortPool(t *testing.T) {
	// Three ports of the test range; one of them taken by a listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	lo, hi := busy-1, busy+1
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p := newPortPool(lo-1, hi, []int{lo - 1}, func() time.Time { return now })

	got := map[int]bool{}
	for range 2 {
		port, err := p.take("127.0.0.1")
		if err != nil {
			// A neighbour of the ephemeral port may be taken by another
			// process: that is the refusal, not a failure of the pool.
			if e, ok := errcode.As(err); ok && e.Code == errcode.CapacityNoFreePort {
				t.Skipf("a neighbour of port %d is in use on this machine", busy)
			}
			t.Fatal(err)
		}
		if port < lo || port > hi || port == busy || got[port] { // lo-1 is reserved
			t.Fatalf("took port %d; want a free one of %d-%d other than %d and %v", port, lo, hi, busy, got)
		}
		got[port] = true
	}
	if port, err := p.take("127.0.0.1"); err == nil {
		t.Fatalf("took port %d from a range with none left", port)
	} else if e, ok := errcode.As(err); !ok || e.Code != errcode.CapacityNoFreePort {
		t.Fatalf("an exhausted range: %v; want CAPACITY_NO_FREE_PORT", err)
	}
	now = now.Add(portHold)
	if port, err := p.take("127.0.0.1"); err != nil || !got[port] {
		t.Fatalf("after the hold: port %d, %v; want one of %v again", port, err, got)
	}
}

// TestPortPoolListensFree: a port taken can be listened on by the
// workload (the pool's own check closed its listener).
func TestPortPoolListensFree(t *testing.T) {
	p := newPortPool(DefaultPortStart, DefaultPortEnd, nil, time.Now)
	port, err := p.take("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the port handed out: %v", err)
	}
	ln.Close()
}
