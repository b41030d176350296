package nomadsd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/nomadsd/fakenomadsd"
	"github.com/svchost/svc/internal/ids"
)

// BenchmarkRoutePropagation measures route propagation from Nomad's
// service discovery: the time from Nomad registering a new instance of a
// routed app to the edge's route table routing to it, through the
// watcher's blocking query, edge.Merge and Table.Replace. Nomad is the
// fake on loopback; against a real cluster add the network and the time
// Nomad takes to start the allocation and register it. max-ms is the
// slowest iteration.
func BenchmarkRoutePropagation(b *testing.B) {
	s := fakenomadsd.New()
	defer s.Close()
	app := ids.New(ids.App)
	s.Register(reg("web-1", "svc-bench-web", app, 10000))
	w, err := New(Config{Address: s.URL(), Wait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	table := edge.NewTable()
	base := []edge.Route{{AppID: app, Slug: "bench", Port: 9001}}
	ctx, cancel := context.WithCancel(context.Background())
	ran, fed := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); _ = w.Run(ctx) }()
	go func() {
		defer close(fed)
		for {
			ups, _, changed := w.Upstreams()
			table.Replace(edge.Merge(base, ups))
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-ran; <-fed }()
	waitRoute := func(upstream string) {
		deadline := time.NewTimer(waitLimit)
		defer deadline.Stop()
		for {
			changed := table.Changed()
			if r, ok := table.BySlug("bench"); ok && r.Upstream == upstream {
				return
			}
			select {
			case <-changed:
			case <-deadline.C:
				b.Fatalf("not routed to %s: %v", upstream, table.All())
			}
		}
	}
	waitRoute("127.0.0.1:10000")
	var slowest time.Duration
	b.ResetTimer()
	for i := range b.N {
		port := 10001 + i%50000
		start := time.Now()
		s.Register(reg("web-1", "svc-bench-web", app, port))
		waitRoute(fmt.Sprintf("127.0.0.1:%d", port))
		slowest = max(slowest, time.Since(start))
	}
	b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
}
