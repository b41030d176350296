package nomadsd

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

// The contract of the nomad route source, run against the fake Nomad
// always (TestContractFake) and against a real `nomad agent -dev` when
// nomad is on PATH (TestContractAgent). It is edge/consul's contract less
// what Nomad cannot do: its registrations carry no check results, so there
// is no "a failing check removes the instance" here (see the package
// documentation). Every step waits on the watcher's change channel; the
// only bound is waitLimit, far beyond what a working watcher needs (a real
// Nomad must also start the allocations).

const waitLimit = 60 * time.Second

// cluster is a Nomad the suite drives: the fake, or a real agent. ACLs are
// on and token is a management token.
type cluster interface {
	address() string
	token() string
	// run makes the app run n instances of its primary workload (and one
	// of a secondary workload, and a service not svc's), replacing what it
	// ran, and returns the primary's upstreams: the fake picks their
	// ports, a real Nomad's are read from the allocations it placed.
	run(t *testing.T, a app, n int) []string
	// stop removes every registration of the app.
	stop(t *testing.T, a app)
}

// app is an app as the job templates name its job and services.
type app struct {
	id, slug string
	job      string
	service  string // the primary workload's service
	worker   string // a secondary workload's service
}

func (a app) tags(primary bool) []string {
	tags := []string{edge.TagService, edge.TagApp + a.id, edge.TagSlug + a.slug}
	if primary {
		tags = append(tags, edge.TagPrimary)
	}
	return tags
}

var seq atomic.Int64

func newApp(slug string) app {
	n := seq.Add(1)
	job := fmt.Sprintf("svc-%s-%d", slug, n)
	return app{id: ids.New(ids.App), slug: slug, job: job, service: job + "-web", worker: job + "-worker"}
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

func waitFor(t *testing.T, w *Watcher, what string, cond func(ups edge.Upstreams, synced bool) bool) edge.Upstreams {
	t.Helper()
	return fakeblock.WaitFor(t, w.Upstreams, waitLimit, what, cond)
}

// waitInstances waits until the app is routed to n instances, exactly want
// when it is known.
func waitInstances(t *testing.T, w *Watcher, a app, n int, want []string) []string {
	t.Helper()
	slices.Sort(want)
	ups := waitFor(t, w, fmt.Sprintf("%s to have %d instances %v", a.id, n, want), func(ups edge.Upstreams, _ bool) bool {
		got, ok := ups[a.id]
		if n == 0 {
			return !ok
		}
		return len(got) == n && (want == nil || slices.Equal(got, want))
	})
	return ups[a.id]
}

func waitCheck(t *testing.T, w *Watcher, cond func(error) bool) error {
	t.Helper()
	return fakeblock.WaitCheck(t, w.Upstreams, w.Check, waitLimit, cond)
}

func runContract(t *testing.T, c cluster) {
	t.Run("services appear", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := newApp("notes")
		want := c.run(t, a, 1)
		got := waitInstances(t, w, a, 1, want)
		waitFor(t, w, "the watcher to sync", func(_ edge.Upstreams, synced bool) bool { return synced })
		if ups, _, _ := w.Upstreams(); !slices.Equal(ups[a.id], got) {
			t.Errorf("the secondary workload is routed too: %v", ups[a.id])
		}
		if err := w.Check(context.Background()); err != nil {
			t.Errorf("Check: %v", err)
		}
	})

	t.Run("two instances of one app", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := newApp("chat")
		waitInstances(t, w, a, 1, c.run(t, a, 1))
		waitInstances(t, w, a, 2, c.run(t, a, 2))
		waitInstances(t, w, a, 1, c.run(t, a, 1))
	})

	t.Run("stopping removes the instances", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := newApp("shop")
		waitInstances(t, w, a, 1, c.run(t, a, 1))
		c.stop(t, a)
		waitInstances(t, w, a, 0, nil)
	})

	t.Run("the ACL token is sent", func(t *testing.T) {
		a := newApp("docs")
		want := c.run(t, a, 1)
		with := startWatcher(t, c, c.token())
		waitInstances(t, with, a, 1, want)
		for _, tok := range []string{"", "00000000-0000-4000-8000-000000000000"} {
			w := startWatcher(t, c, tok)
			err := waitCheck(t, w, func(err error) bool { return err != nil })
			if !errcode.Has(err, errcode.AdapterFailed) {
				t.Errorf("token %q: Check = %v, want ADAPTER_FAILED", tok, err)
			}
			if ups, synced, _ := w.Upstreams(); len(ups) != 0 || synced {
				t.Errorf("token %q: %v (synced %v)", tok, ups, synced)
			}
		}
	})

	t.Run("a new instance is routable at once", func(t *testing.T) {
		w := startWatcher(t, c, c.token())
		a := newApp("live")
		waitInstances(t, w, a, 1, c.run(t, a, 1))
		start := time.Now()
		want := c.run(t, a, 2)
		waitInstances(t, w, a, 2, want)
		t.Logf("a new instance reached the watcher in %s (a real Nomad includes starting the allocation)", time.Since(start))
	})
}
