package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// Disk limits on a real store and the real process runtime: a workload
// that writes past resources.disk_bytes in its working directory.

// diskSpec: a site, and a worker limited to 100,000 bytes of disk that
// writes FILL bytes of ballast into its working directory (beside the
// 12-byte page its working copy holds), then sleeps.
func diskSpec(fill int) string {
	return fmt.Sprintf(`
workloads:
  web: {primary: true, build: {kind: static, context: .}, run: {port: 8080, health: {path: /}}}
  filler:
    build: {kind: command, command: "true"}
    run: {command: [sh, -c, "head -c %d /dev/zero > ballast && exec sleep 3600"]}
    resources: {disk_bytes: 100000}
`, fill)
}

const diskLimit = 100000

// diskFixture is a fixture on the process runtime (no sandbox: the
// scheduler's tests run where bubblewrap may not) with one app of
// diskSpec(fill) deployed and its ballast written.
func diskFixture(t *testing.T, fill int, o options) (*fixture, *process.Runtime, string, scheduler.Deployment) {
	t.Helper()
	for _, tool := range []string{"sh", "head", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	rt, err := process.New(process.Config{WorkDir: t.TempDir(), StopGrace: time.Second, Isolation: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	o.runtime = rt
	f := newFixture(t, o)
	appID := f.app(t, diskSpec(fill))
	d := f.deploy(t, appID)
	if d.State != scheduler.DepSucceeded {
		t.Fatalf("deploy: %+v", d)
	}
	ctx := context.Background()
	eventually(t, "the worker writes its ballast", func() bool {
		used, err := rt.DiskUsage(ctx, d.ID)
		return err == nil && used["filler"] >= int64(fill)
	})
	return f, rt, appID, d
}

// num reads a number of an event's or audit entry's data, however the
// store decoded it.
func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return -1
}

// diskEvents are the app's disk events of one name, oldest first.
func (f *fixture) diskEvents(t *testing.T, name, appID string) []events.Event {
	var out []events.Event
	for _, e := range f.events(t, name) {
		if e.App != nil && e.App.ID == appID {
			out = append(out, e)
		}
	}
	return out
}

// execIn runs a command in a workload of the app through the scheduler
// and returns its exit code.
func execIn(t *testing.T, f *fixture, appID, workload string, command ...string) int {
	t.Helper()
	s, err := f.sch.Exec(alice, appID, workload, command, 24, 80)
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	defer s.Close()
	_, _ = io.Copy(io.Discard, s)
	code, err := s.Wait()
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return code
}

// TestDiskLimitWarnsThenStopsUntilStarted is the whole story, one reading
// at a time: near the limit one warning (not one per reading); past it a
// warning saying so; past it at the second check in a row the app is
// stopped in one write (stopped and meant to stay so, app.disk_stopped,
// the system's audited app.stop), its job stopped and what it wrote
// dropped. The reconciler leaves it stopped, pass after pass. Started
// again by a person, it runs from its built files under its limit.
func TestDiskLimitWarnsThenStopsUntilStarted(t *testing.T) {
	f, rt, appID, d := diskFixture(t, 95000, options{})
	ctx := context.Background()

	f.sch.CheckDiskOnce(ctx)
	f.sch.CheckDiskOnce(ctx)
	warns := f.diskEvents(t, "app.disk_warning", appID)
	if len(warns) != 1 || warns[0].Data["over"] != false || num(warns[0].Data["limit_bytes"]) != diskLimit ||
		num(warns[0].Data["used_bytes"]) < 95000 || num(warns[0].Data["used_bytes"]) > diskLimit {
		t.Fatalf("after two checks near the limit: warnings %+v; want one, not over", warns)
	}
	if w := warns[0]; w.Actor.Kind != "system" || len(w.Data) != 3 {
		t.Errorf("warning = %+v; want the system's, with used_bytes, limit_bytes and over only", w)
	}

	// The workload writes past its limit.
	if code := execIn(t, f, appID, "filler", "sh", "-c", "head -c 10000 /dev/zero > more"); code != 0 {
		t.Fatalf("writing past the limit exited %d", code)
	}
	f.sch.CheckDiskOnce(ctx)
	warns = f.diskEvents(t, "app.disk_warning", appID)
	if len(warns) != 2 || warns[1].Data["over"] != true || num(warns[1].Data["used_bytes"]) <= diskLimit {
		t.Fatalf("after a check over the limit: warnings %+v; want a second one, over", warns)
	}
	if a, _ := f.apps.Get(appID); a.State != apps.StateRunning || a.DesiredState != apps.DesiredRunning || len(f.diskEvents(t, "app.disk_stopped", appID)) != 0 {
		t.Fatalf("after one check over the limit: %s/%s; want still running", a.State, a.DesiredState)
	}

	f.sch.CheckDiskOnce(ctx)
	stopped := f.diskEvents(t, "app.disk_stopped", appID)
	if len(stopped) != 1 || num(stopped[0].Data["used_bytes"]) <= diskLimit || num(stopped[0].Data["limit_bytes"]) != diskLimit ||
		len(stopped[0].Data) != 4 || stopped[0].Data["target_kind"] != "app" || stopped[0].Actor.Kind != "system" {
		t.Fatalf("after the second check over the limit: app.disk_stopped %+v; want one by the system, targeting the app", stopped)
	}
	if n := len(f.diskEvents(t, "app.disk_warning", appID)); n != 2 {
		t.Errorf("%d warnings; the stop warns no more", n)
	}
	a, _ := f.apps.Get(appID)
	if a.State != apps.StateStopped || a.DesiredState != apps.DesiredStopped {
		t.Fatalf("after the stop: %s/%s; want stopped/stopped", a.State, a.DesiredState)
	}
	if moves := stateMoves(f, appID); !strings.HasSuffix(moves, "running>stopped") {
		t.Errorf("state moves %s; want the last running>stopped", moves)
	}
	if e := stopAudit(t, f, appID); e == nil || e.PrincipalKind != "system" || e.Details["reason"] != "disk_limit" ||
		num(e.Details["limit_bytes"]) != diskLimit || e.Details["workload"] != "filler" {
		t.Errorf("audit entry of the stop = %+v; want the system's app.stop for the disk limit", e)
	}
	if _, err := rt.Status(ctx, d.ID); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("the job after the stop: %v; want it stopped", err)
	}

	// The reconciler does not bring it back.
	for range 3 {
		f.sch.ReconcileOnce(ctx)
		f.sch.CheckDiskOnce(ctx)
	}
	if a, _ := f.apps.Get(appID); a.State != apps.StateStopped || a.DesiredState != apps.DesiredStopped {
		t.Fatalf("after three passes: %s/%s; want it still stopped", a.State, a.DesiredState)
	}
	if _, err := rt.Status(ctx, d.ID); !errcode.Has(err, errcode.NotFound) {
		t.Fatalf("after three passes the job runs again (%v)", err)
	}

	// Somebody starts it: it runs from its built files again.
	if _, err := f.sch.Start(alice, appID); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("after the start: %s", s)
	}
	var used int64
	eventually(t, "the worker writes its ballast again", func() bool {
		u, err := f.sch.Usage(ctx, appID)
		used = u.Workloads["filler"].DiskBytes
		return err == nil && used >= 95000
	})
	if used > diskLimit {
		t.Fatalf("after the start the worker uses %d bytes: what it wrote before the stop was not dropped", used)
	}
	if code := execIn(t, f, appID, "filler", "test", "-e", "more"); code == 0 {
		t.Error("the file written past the limit is still in the working directory after the start")
	}
	for range 3 {
		f.sch.CheckDiskOnce(ctx)
		f.sch.ReconcileOnce(ctx)
	}
	if a, _ := f.apps.Get(appID); a.State != apps.StateRunning || a.DesiredState != apps.DesiredRunning || len(f.diskEvents(t, "app.disk_stopped", appID)) != 1 {
		t.Fatalf("after the start and three checks: %s/%s; want running, stopped once", a.State, a.DesiredState)
	}
	if n := len(f.diskEvents(t, "app.disk_warning", appID)); n != 3 {
		t.Errorf("%d warnings; want the first two and one for the new crossing near the limit", n)
	}
}

// TestDiskLimitStopsWithTheLoopsRunning: the leader's loops as they run,
// the disk check every 50ms and the reconciler beside it: a worker that
// writes past its limit at once is warned of and stopped, once; its job
// stays stopped while the reconciler passes again and again.
func TestDiskLimitStopsWithTheLoopsRunning(t *testing.T) {
	metrics := &observed{}
	f, rt, appID, d := diskFixture(t, 150000, options{diskInterval: 50 * time.Millisecond, metrics: metrics})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = f.sch.CheckDisk(ctx); done <- struct{}{} }()
	go func() { _ = f.sch.Reconcile(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()

	eventually(t, "the app is stopped and its job with it", func() bool {
		_, err := rt.Status(ctx, d.ID)
		return f.state(t, appID) == apps.StateStopped && errcode.Has(err, errcode.NotFound)
	})
	passes, _, _ := metrics.snapshot()
	eventually(t, "five more passes of the reconciler", func() bool { p, _, _ := metrics.snapshot(); return p >= passes+5 })
	a, _ := f.apps.Get(appID)
	if _, err := rt.Status(ctx, d.ID); a.State != apps.StateStopped || a.DesiredState != apps.DesiredStopped || !errcode.Has(err, errcode.NotFound) {
		t.Fatalf("after five passes: %s/%s, job %v; want it still stopped", a.State, a.DesiredState, err)
	}
	warns := f.diskEvents(t, "app.disk_warning", appID)
	if len(warns) != 1 || warns[0].Data["over"] != true {
		t.Errorf("warnings %+v; want one, over", warns)
	}
	if n := len(f.diskEvents(t, "app.disk_stopped", appID)); n != 1 {
		t.Errorf("%d app.disk_stopped; want 1", n)
	}
}

// TestDiskUsageReadingWarnsOnTheLeader: GET …/usage shows the worker's
// disk against its limit; on the leader (while CheckDisk runs) the reading
// warns at once, once, and however often it is read never stops the app.
// Elsewhere it warns of nothing.
func TestDiskUsageReadingWarnsOnTheLeader(t *testing.T) {
	f, _, appID, _ := diskFixture(t, 150000, options{diskInterval: time.Hour})
	ctx := context.Background()
	u, err := f.sch.Usage(ctx, appID)
	if w := u.Workloads["filler"]; err != nil || !u.Supported || w.DiskBytes < 150000 || w.Limits.DiskBytes != diskLimit {
		t.Fatalf("usage = %+v, %v; want the worker's disk beside its limit", u, err)
	}
	if n := len(f.diskEvents(t, "app.disk_warning", appID)); n != 0 {
		t.Fatalf("a reading on a node that runs no disk check warned %d times", n)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = f.sch.CheckDisk(lctx); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "a reading on the leader warns", func() bool {
		if _, err := f.sch.Usage(ctx, appID); err != nil {
			t.Fatal(err)
		}
		return len(f.diskEvents(t, "app.disk_warning", appID)) > 0
	})
	for range 3 {
		if _, err := f.sch.Usage(ctx, appID); err != nil {
			t.Fatal(err)
		}
	}
	warns := f.diskEvents(t, "app.disk_warning", appID)
	if len(warns) != 1 || warns[0].Data["over"] != true || num(warns[0].Data["used_bytes"]) < 150000 {
		t.Errorf("warnings %+v; want one, over", warns)
	}
	if a, _ := f.apps.Get(appID); a.State != apps.StateRunning || len(f.diskEvents(t, "app.disk_stopped", appID)) != 0 {
		t.Errorf("after four readings over the limit: %s; readings of GET …/usage must not stop an app", a.State)
	}
}

// stateMoves lists the app's app.state_changed events as from>to.
func stateMoves(f *fixture, appID string) string {
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	var out []string
	for _, it := range items {
		if e := it.Value; e.Type == "app.state_changed" && e.App != nil && e.App.ID == appID {
			out = append(out, fmt.Sprint(e.Data["from"], ">", e.Data["to"]))
		}
	}
	return strings.Join(out, " ")
}

// stopAudit is the app's newest app.stop audit entry (nil for none).
func stopAudit(t *testing.T, f *fixture, appID string) *audit.Entry {
	t.Helper()
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	var last *audit.Entry
	for _, it := range items {
		if e := it.Value; e.Action == "app.stop" && e.AppID != nil && *e.AppID == appID {
			last = &e
		}
	}
	return last
}

// BenchmarkDiskCheck200Apps measures one pass of the disk check over 200
// running static sites with a disk limit on the real process runtime
// (each: its release, its spec's limits, a walk of its working directory,
// the decision); apps/s is the throughput. Each site's 12-byte page is
// near its 13-byte limit: the pass before the timer warns of every app,
// and the timed passes, finding nothing new, write nothing.
func BenchmarkDiskCheck200Apps(b *testing.B) {
	rt, err := process.New(process.Config{WorkDir: b.TempDir(), StopGrace: time.Second, Isolation: "none"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	f := newFixture(b, options{runtime: rt})
	const n = 200
	const limitedSite = `
workloads:
  web: {primary: true, build: {kind: static, context: .}, run: {port: 8080, health: {path: /}}, resources: {disk_bytes: 13}}
`
	deployApps(b, f, n, limitedSite)
	ctx := context.Background()
	warnings := func() int {
		items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
		c := 0
		for _, it := range items {
			if it.Value.Type == "app.disk_warning" {
				c++
			}
		}
		return c
	}
	f.sch.CheckDiskOnce(ctx)
	if w := warnings(); w != n {
		b.Fatalf("the first pass warned %d times; want once for each of %d apps", w, n)
	}
	timePasses(b, n, func() { f.sch.CheckDiskOnce(ctx) })
	b.StopTimer()
	if w := warnings(); w != n {
		b.Fatalf("%d warnings after more passes; want still %d", w, n)
	}
}
