package nomadsd

import (
	"fmt"
	"testing"

	"github.com/svchost/svc/edge/nomadsd/fakenomadsd"
)

// fakeCluster is the fake Nomad as the contract suite drives it.
type fakeCluster struct {
	s   *fakenomadsd.Server
	tok string
	// ran counts each app's instances; base is the port of its first.
	ran, base map[string]int
}

var _ cluster = (*fakeCluster)(nil)

func newFakeCluster(t testing.TB) *fakeCluster {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	const tok = "3b1f5c9e-2f5d-4e7a-9b0c-5d6e7f8a9b0c"
	s.EnableACL(tok)
	return &fakeCluster{s: s, tok: tok, ran: map[string]int{}, base: map[string]int{}}
}

func (c *fakeCluster) address() string { return c.s.URL() }
func (c *fakeCluster) token() string   { return c.tok }

func (c *fakeCluster) run(_ *testing.T, a app, n int) []string {
	if _, ok := c.base[a.job]; !ok {
		c.base[a.job] = 20000 + 10*len(c.base)
	}
	var want []string
	for i := range n {
		alloc := fmt.Sprintf("%s-alloc-%d", a.job, i)
		port := c.base[a.job] + i
		c.s.Register(fakenomadsd.Registration{ID: "_nomad-task-" + alloc + "-web", ServiceName: a.service, JobID: a.job, AllocID: alloc,
			Tags: a.tags(true), Port: port})
		want = append(want, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for i := n; i < c.ran[a.job]; i++ {
		c.s.Deregister(fmt.Sprintf("_nomad-task-%s-alloc-%d-web", a.job, i))
	}
	if _, ok := c.ran[a.job]; !ok {
		c.s.Register(fakenomadsd.Registration{ID: "_nomad-task-" + a.job + "-worker", ServiceName: a.worker, JobID: a.job, AllocID: a.job + "-alloc-0",
			Tags: a.tags(false), Port: c.base[a.job] + 9})
		c.s.Register(fakenomadsd.Registration{ID: "_nomad-task-" + a.job + "-redis", ServiceName: "redis", JobID: "cache", Tags: []string{"cache"}, Port: 6379})
	}
	c.ran[a.job] = n
	return want
}

func (c *fakeCluster) stop(_ *testing.T, a app) {
	for i := range c.ran[a.job] {
		c.s.Deregister(fmt.Sprintf("_nomad-task-%s-alloc-%d-web", a.job, i))
	}
	c.s.Deregister("_nomad-task-" + a.job + "-worker")
	c.ran[a.job] = 0
}

func TestContractFake(t *testing.T) { runContract(t, newFakeCluster(t)) }
