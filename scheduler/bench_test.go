package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// waitEnded waits on the store until a deployment ends.
func (f *fixture) waitEnded(tb testing.TB, appID, id string) scheduler.Deployment {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		r := f.store.Read()
		d, _, ok := scheduler.Deployments.Get(r, id)
		if ok && !d.Active() {
			return d
		}
		if err := r.Wait(ctx); err != nil {
			tb.Fatalf("deployment %s did not end: %v", id, err)
		}
	}
}

// BenchmarkDeployControlPlane measures what a deploy costs the control
// plane alone: from POST to succeeded on a runtime whose build and start
// take no time (plan, capacity, port, the writes of every state move,
// events, the deploy log, the release switch), one app after another.
func BenchmarkDeployControlPlane(b *testing.B) {
	f := newFixture(b, options{})
	appID := f.app(b, webSpec)
	b.ResetTimer()
	for b.Loop() {
		d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerSecretRotation)
		if err != nil {
			b.Fatal(err)
		}
		if d = f.waitEnded(b, appID, d.ID); d.State != scheduler.DepSucceeded {
			b.Fatalf("deployment %+v", d)
		}
	}
}

// BenchmarkReconcile200Apps measures one reconciler pass over 200 running
// apps (each: read its release, ask the runtime for its job's status,
// compare health, secret versions and restarts); apps/s is the throughput.
func BenchmarkReconcile200Apps(b *testing.B) {
	benchReconcile(b, newFixture(b, options{}), webSpec)
}

// BenchmarkReconcile200AppsProcess is the same pass over 200 static sites
// the real process runtime serves.
func BenchmarkReconcile200AppsProcess(b *testing.B) {
	rt, err := process.New(process.Config{WorkDir: b.TempDir(), StopGrace: time.Second, Isolation: "none"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	benchReconcile(b, newFixture(b, options{runtime: rt}), siteSpec)
}

// BenchmarkReconcile200AppsSlowRuntime is the pass over 200 apps on a
// runtime that takes a millisecond to answer each status (a round trip
// to a Nomad agent): the apps' calls overlap, up to the workers.
func BenchmarkReconcile200AppsSlowRuntime(b *testing.B) {
	benchReconcile(b, newFixture(b, options{runtime: slowStatus{newFakeRuntime(b)}}), webSpec)
}

// slowStatus answers each status a millisecond late.
type slowStatus struct{ *fakeRuntime }

func (s slowStatus) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	time.Sleep(time.Millisecond)
	return s.fakeRuntime.Status(ctx, jobID)
}

const siteSpec = `
workloads:
  web: {primary: true, build: {kind: static, context: .}, run: {port: 8080, health: {path: /}}}
`

// deployApps creates n apps of the spec doc and deploys each.
func deployApps(b *testing.B, f *fixture, n int, doc string) {
	for range n {
		appID := f.app(b, doc)
		d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
		if err != nil {
			b.Fatal(err)
		}
		if d = f.waitEnded(b, appID, d.ID); d.State != scheduler.DepSucceeded {
			b.Fatalf("deployment %+v", d)
		}
	}
}

func benchReconcile(b *testing.B, f *fixture, doc string) {
	deployApps(b, f, 200, doc)
	// Every app binds the one secret, whose version each app's creation
	// moved on: the first passes deploy the earlier apps again (a
	// rotation). Measure the passes after those deploys.
	ctx := context.Background()
	for settled := false; !settled; {
		f.sch.ReconcileOnce(ctx)
		active, _ := scheduler.Deployments.List(f.store.Read(), raftstore.Query{Index: "active", Prefix: true})
		settled = len(active) == 0
		for _, it := range active {
			f.waitEnded(b, it.Value.AppID, it.Value.ID)
		}
	}
	timePasses(b, 200, func() { f.sch.ReconcileOnce(ctx) })
}

// timePasses times passes over n apps in the benchmark's loop and reports
// apps/s.
func timePasses(b *testing.B, n int, pass func()) {
	b.ResetTimer()
	start := time.Now()
	passes := 0
	for b.Loop() {
		pass()
		passes++
	}
	b.ReportMetric(float64(n*passes)/time.Since(start).Seconds(), "apps/s")
}
