package consul

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/consul/fakeconsul"
	"github.com/svchost/svc/internal/ids"
)

// BenchmarkRoutePropagation measures route propagation: the time from
// Consul reporting a new passing instance to the edge's route table
// routing to it, through the watcher's blocking queries, edge.Merge with
// the routes svc's store gives, and Table.Replace, as cmd/svc wires them.
// Consul is the fake on loopback, so the figure is the watcher's own
// latency plus one local round trip; against a real cluster add the
// network and Consul's own apply time. The bound is one second.
//
//	instance: an app that is routed gets a new passing instance
//	          (one blocking health query returns);
//	app:      a new app's primary service appears in the catalog (the
//	          catalog query returns, then the new service's first read).
//
// max-ms is the slowest iteration.
func BenchmarkRoutePropagation(b *testing.B) {
	b.Run("instance", func(b *testing.B) {
		s := fakeconsul.New()
		defer s.Close()
		app := ids.New(ids.App)
		s.Register(primaryInstance("web-1", "svc-bench-web", app, 10000))
		f := startFeed(b, s, []edge.Route{{AppID: app, Slug: "bench", Port: 9001}})
		f.waitRoute(b, app, "127.0.0.1:10000")
		var slowest time.Duration
		b.ResetTimer()
		for i := range b.N {
			// Re-registering the instance on a new port: the route must
			// move to it.
			want := fmt.Sprintf("127.0.0.1:%d", 10001+i%50000)
			start := time.Now()
			s.Register(primaryInstance("web-1", "svc-bench-web", app, 10001+i%50000))
			f.waitRoute(b, app, want)
			slowest = max(slowest, time.Since(start))
		}
		b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
	})
	b.Run("app", func(b *testing.B) {
		s := fakeconsul.New()
		defer s.Close()
		f := startFeed(b, s, nil)
		var slowest time.Duration
		prev := ""
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			if prev != "" {
				s.Deregister(prev)
			}
			app := ids.New(ids.App)
			f.base.Store(&[]edge.Route{{AppID: app, Slug: "bench", Port: 9001}})
			id := fmt.Sprintf("svc-bench-%d-web-1", i)
			want := fmt.Sprintf("127.0.0.1:%d", 10000+i%50000)
			b.StartTimer()
			start := time.Now()
			s.Register(primaryInstance(id, fmt.Sprintf("svc-bench-%d-web", i), app, 10000+i%50000))
			f.waitRoute(b, app, want)
			slowest = max(slowest, time.Since(start))
			prev = id
		}
		b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
	})
}

// feed is the route feeding of cmd/svc in small: the watcher's upstreams
// merged with base into a table whenever they change.
type feed struct {
	w     *Watcher
	table *edge.Table
	base  atomic.Pointer[[]edge.Route]
}

func startFeed(b *testing.B, s *fakeconsul.Server, base []edge.Route) *feed {
	b.Helper()
	w, err := New(Config{Address: s.URL(), Wait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	f := &feed{w: w, table: edge.NewTable()}
	f.base.Store(&base)
	ctx, cancel := context.WithCancel(context.Background())
	ran, fed := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); _ = w.Run(ctx) }()
	go func() {
		defer close(fed)
		for {
			ups, _, changed := w.Upstreams()
			f.table.Replace(edge.Merge(*f.base.Load(), ups))
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-ran; <-fed })
	return f
}

// waitRoute waits until the table routes app to upstream.
func (f *feed) waitRoute(b *testing.B, app, upstream string) {
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		changed := f.table.Changed()
		for _, r := range f.table.All() {
			if r.AppID == app && r.Upstream == upstream {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			b.Fatalf("%s was not routed to %s within %s: %v", app, upstream, waitLimit, f.table.All())
		}
	}
}
