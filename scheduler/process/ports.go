package process

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// Default workload ports: below Linux's ephemeral range (32768-60999), so
// that an outgoing connection's source port never takes a port between
// its pick and the workload's listen, as a port the kernel picked (":0")
// could be; and below Nomad's dynamic ports (20000-32000).
const (
	DefaultPortStart = 10000
	DefaultPortEnd   = 19999
)

// portHold is how long a port handed to a workload is not handed out
// again, though nothing listens on it yet: the workload's start.
const portHold = 10 * time.Minute

// portPool hands out the host ports of workloads that do not ask for one:
// a free one of the range (nothing listens on it), starting at a random
// place, never a reserved one, and none handed out within portHold.
type portPool struct {
	lo, hi   int
	reserved map[int]bool
	now      func() time.Time

	mu    sync.Mutex
	given map[int]time.Time
}

func newPortPool(lo, hi int, reserved []int, now func() time.Time) *portPool {
	p := &portPool{lo: lo, hi: hi, reserved: map[int]bool{}, now: now, given: map[int]time.Time{}}
	for _, port := range reserved {
		p.reserved[port] = true
	}
	return p
}

// take returns a free port of the range on host.
func (p *portPool) take(host string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for port, at := range p.given {
		if now.Sub(at) >= portHold {
			delete(p.given, port)
		}
	}
	n := p.hi - p.lo + 1
	first := rand.IntN(n)
	for i := range n {
		port := p.lo + (first+i)%n
		if _, held := p.given[port]; held || p.reserved[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // taken, or not ours to take
		}
		_ = ln.Close()
		p.given[port] = now
		return port, nil
	}
	return 0, errcode.New(errcode.CapacityNoFreePort, "no free port in %d-%d on %s for the workload", p.lo, p.hi, host).
		WithRemedy("widen runtime.workload_port_start..runtime.workload_port_end, or stop apps that are not needed")
}
