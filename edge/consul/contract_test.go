package consul

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/blocking/fakeblock"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

// The contract of the consul route source, run against the fake Consul
// always (TestContractFake) and against a real `consul agent -dev` when
// consul is on PATH (TestContractAgent). Every step waits on the watcher's
// change channel, never on a clock; the only bound is waitLimit, far
// beyond anything a working watcher needs.

// waitLimit bounds every wait of the suite.
const waitLimit = 20 * time.Second

// cluster is a Consul the suite drives: the fake, or a real agent. ACLs
// are on, deny by default, and token is the management token.
type cluster interface {
	address() string
	token() string
	// readToken returns a new token whose policy grants read on the
	// services, and on the nodes, whose names start with one of the
	// prefixes ("" is every name): service_prefix and node_prefix rules.
	readToken(t *testing.T, services, nodes []string) string
	register(t *testing.T, in instance)
	setPassing(t *testing.T, id string, passing bool)
	deregister(t *testing.T, id string)
}

// instance is a service instance as svc's job templates register it.
type instance struct {
	id, service string
	appID, slug string
	primary     bool
	addr        string
	port        int
	passing     bool
	extraTags   []string
}

func (in instance) tags() []string {
	if in.appID == "" {
		return slices.Clone(in.extraTags)
	}
	tags := append([]string{edge.TagService, edge.TagApp + in.appID, edge.TagSlug + in.slug}, in.extraTags...)
	if in.primary {
		tags = append(tags, edge.TagPrimary)
	}
	return tags
}

func (in instance) upstream() string { return fmt.Sprintf("%s:%d", in.addr, in.port) }

var seq atomic.Int64

// app returns a fresh app and its primary instance's first registration;
// names are unique across the subtests, which share one cluster.
func app(slug string) instance {
	n := seq.Add(1)
	return instance{
		id: fmt.Sprintf("svc-%s-%d-web-1", slug, n), service: fmt.Sprintf("svc-%s-%d-web", slug, n),
		appID: ids.New(ids.App), slug: slug, primary: true,
		addr: "127.0.0.1", port: 20000 + int(n), passing: true,
	}
}

// another returns a second instance of the same service.
func (in instance) another(k int) instance {
	in.id = fmt.Sprintf("%s-%d", in.id, k)
	in.port += 1000 * k
	return in
}

func startWatcher(t *testing.T, c cluster, token string) *Watcher {
	t.Helper()
	w, err := New(Config{Address: c.address(), Token: token, Wait: 30 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() }) // after Run returned
	fakeblock.Start(t, w.Run)
	return w
}

// waitFor waits until cond holds of what the watcher knows.
func waitFor(t *testing.T, w *Watcher, what string, cond func(ups edge.Upstreams, synced bool) bool) {
	t.Helper()
	fakeblock.WaitFor(t, w.Upstreams, waitLimit, what, cond)
}

// waitCheck waits until the watcher's health check answers as cond wants
// (its failures show in Upstreams' change channel) and returns the answer.
func waitCheck(t *testing.T, w *Watcher, cond func(error) bool) error {
	t.Helper()
	return fakeblock.WaitCheck(t, w.Upstreams, w.Check, waitLimit, cond)
}

func waitUpstreams(t *testing.T, w *Watcher, appID string, want ...string) {
	t.Helper()
	slices.Sort(want)
	waitFor(t, w, fmt.Sprintf("%s to be routed to %v", appID, want), func(ups edge.Upstreams, _ bool) bool {
		return slices.Equal(ups[appID], want) && (len(want) > 0 || !hasKey(ups, appID))
	})
}

func hasKey(ups edge.Upstreams, id string) bool { _, ok := ups[id]; return ok }

// runContract runs the contract against one cluster.
func runContract(t *testing.T, c cluster) {
	t.Run("services appear", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("notes")
		c.register(t, a)
		// A secondary workload of the app, and a service not svc's, are not
		// routed.
		worker := a
		worker.id, worker.service, worker.primary, worker.port = a.id+"-worker", a.service+"-worker", false, a.port+500
		c.register(t, worker)
		c.register(t, instance{id: fmt.Sprintf("redis-%d", seq.Add(1)), service: "redis", addr: "127.0.0.1", port: 6379, passing: true, extraTags: []string{"cache"}})
		waitUpstreams(t, w, a.appID, a.upstream())
		waitFor(t, w, "the watcher to sync", func(_ edge.Upstreams, synced bool) bool { return synced })
		if got, _, _ := w.Upstreams(); !slices.Equal(got[a.appID], []string{a.upstream()}) {
			t.Errorf("upstreams of the app = %v, want only its primary instance", got[a.appID])
		}
		if err := w.Check(context.Background()); err != nil {
			t.Errorf("Check: %v", err)
		}
	})

	t.Run("a failing check removes the instance and a recovery brings it back", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("wiki")
		c.register(t, a)
		waitUpstreams(t, w, a.appID, a.upstream())
		c.setPassing(t, a.id, false)
		waitUpstreams(t, w, a.appID)
		c.setPassing(t, a.id, true)
		waitUpstreams(t, w, a.appID, a.upstream())
	})

	t.Run("an instance registered failing is not routed until it passes", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("blog")
		first := a
		c.register(t, first)
		waitUpstreams(t, w, a.appID, first.upstream())
		second := a.another(1)
		second.passing = false
		c.register(t, second)
		// Only a change of the first instance shows the second's absence is
		// not a lag: flip the first and wait for both changes in order.
		c.setPassing(t, first.id, false)
		waitUpstreams(t, w, a.appID)
		c.setPassing(t, second.id, true)
		waitUpstreams(t, w, a.appID, second.upstream())
	})

	t.Run("deregistration removes the instance", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("shop")
		c.register(t, a)
		waitUpstreams(t, w, a.appID, a.upstream())
		c.deregister(t, a.id)
		waitUpstreams(t, w, a.appID)
	})

	t.Run("two instances of one app", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("chat")
		b := a.another(1)
		c.register(t, a)
		c.register(t, b)
		waitUpstreams(t, w, a.appID, a.upstream(), b.upstream())
		c.deregister(t, a.id)
		waitUpstreams(t, w, a.appID, b.upstream())
	})

	t.Run("the ACL token is sent", func(t *testing.T) {
		a := app("docs")
		c.register(t, a)
		with := startWatcher(t, c, c.token())
		waitUpstreams(t, with, a.appID, a.upstream())

		// Without a token, Consul filters everything out: synced, nothing.
		anonymous := startWatcher(t, c, "")
		waitFor(t, anonymous, "the anonymous watcher to sync", func(_ edge.Upstreams, synced bool) bool { return synced })
		if ups, _, _ := anonymous.Upstreams(); len(ups) != 0 {
			t.Errorf("without a token the watcher routes %v", ups)
		}

		// With a token consul does not know, every query is refused and the
		// health check says why.
		wrong := startWatcher(t, c, "00000000-0000-4000-8000-000000000000")
		err := waitCheck(t, wrong, func(err error) bool { return err != nil })
		if !errcode.Has(err, errcode.AdapterFailed) {
			t.Errorf("Check with an unknown token = %v, want ADAPTER_FAILED", err)
		}
		if ups, synced, _ := wrong.Upstreams(); len(ups) != 0 || synced {
			t.Errorf("with an unknown token: %v (synced %v)", ups, synced)
		}
	})

	t.Run("a token with only service:read and node:read", func(t *testing.T) {
		// The adapter's documented token: read on svc's services and on
		// their nodes, nothing else. It routes what it may read, is not
		// refused anything (Consul filters, it does not refuse), and the
		// health check, which asks Consul's leader, passes.
		a, b := app("reader"), app("hidden")
		c.register(t, a)
		c.register(t, b)
		reader := startWatcher(t, c, c.readToken(t, []string{a.service}, []string{""}))
		waitUpstreams(t, reader, a.appID, a.upstream())
		waitFor(t, reader, "the read-only watcher to sync", func(_ edge.Upstreams, synced bool) bool { return synced })
		if ups, _, _ := reader.Upstreams(); hasKey(ups, b.appID) {
			t.Errorf("a service outside the token's policy is routed: %v", ups[b.appID])
		}
		if err := reader.Check(context.Background()); err != nil {
			t.Errorf("Check with a read-only token: %v", err)
		}

		// Without node:read Consul hides every instance, though it lists
		// the service: the app is not routed.
		blind := startWatcher(t, c, c.readToken(t, []string{a.service}, nil))
		waitFor(t, blind, "the watcher without node:read to sync", func(_ edge.Upstreams, synced bool) bool { return synced })
		if ups, _, _ := blind.Upstreams(); len(ups) != 0 {
			t.Errorf("without node:read the watcher routes %v", ups)
		}
	})

	t.Run("a new healthy instance is routable at once", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := app("live")
		c.register(t, a)
		waitUpstreams(t, w, a.appID, a.upstream())
		b := a.another(1)
		start := time.Now()
		c.register(t, b)
		waitUpstreams(t, w, a.appID, a.upstream(), b.upstream())
		// The figure is for the log; BenchmarkRoutePropagation measures it.
		t.Logf("a new passing instance reached the watcher in %s", time.Since(start))
	})
}
