package nomad_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svchost/svc/scheduler"
)

// BenchmarkRunToReady measures a whole Run against the fake Nomad until
// the workload is healthy, and its Stop: render, plan, register, the
// client's artifact download and start, and the blocking queries that
// see it (min_healthy_time 100ms is part of every run).
func BenchmarkRunToReady(b *testing.B) {
	e := newEnv(b, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := b.TempDir()
	art, err := e.rt.Build(ctx, scheduler.BuildRequest{Source: src, Build: buildCommandTrue})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("job-bench-%d", i)
		if _, err := e.rt.Run(ctx, scheduler.Job{ID: id, Workloads: map[string]scheduler.Task{"web": {
			Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		}}}); err != nil {
			b.Fatal(err)
		}
		if err := e.rt.Stop(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
