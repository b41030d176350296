package consul

import (
	"fmt"
	"testing"

	"github.com/svchost/svc/edge/consul/fakeconsul"
)

// fakeCluster is the fake Consul as the contract suite drives it.
type fakeCluster struct {
	s   *fakeconsul.Server
	tok string
}

var _ cluster = (*fakeCluster)(nil)

func newFakeCluster(t testing.TB) *fakeCluster {
	s := fakeconsul.New()
	t.Cleanup(s.Close)
	const tok = "6f1b2a52-7d0c-4c55-9d55-3f0c3b0b4d1e"
	s.EnableACL(tok)
	return &fakeCluster{s: s, tok: tok}
}

func (c *fakeCluster) address() string { return c.s.URL() }
func (c *fakeCluster) token() string   { return c.tok }

func (c *fakeCluster) readToken(_ *testing.T, services, nodes []string) string {
	tok := fmt.Sprintf("read-%d", seq.Add(1))
	c.s.AddToken(tok, fakeconsul.Policy{Services: services, Nodes: nodes})
	return tok
}

func (c *fakeCluster) register(_ *testing.T, in instance) {
	status := fakeconsul.Passing
	if !in.passing {
		status = fakeconsul.Critical
	}
	c.s.Register(fakeconsul.Instance{ID: in.id, Name: in.service, Address: in.addr, Port: in.port, Tags: in.tags(), Status: status})
}

func (c *fakeCluster) setPassing(t *testing.T, id string, passing bool) {
	status := fakeconsul.Passing
	if !passing {
		status = fakeconsul.Critical
	}
	if !c.s.SetStatus(id, status) {
		t.Fatalf("no instance %s", id)
	}
}

func (c *fakeCluster) deregister(t *testing.T, id string) {
	if !c.s.Deregister(id) {
		t.Fatalf("no instance %s", id)
	}
}

func TestContractFake(t *testing.T) { runContract(t, newFakeCluster(t)) }
