package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	healthy := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: true, Health: HealthPassing}}}
	unknown := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: true, Health: HealthUnknown}}}
	failing := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: true, Health: HealthFailing}}}
	exited := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: false}}}
	code := 3
	dead := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Dead: true, ExitCode: &code, Restarts: 2}}}
	run := observation{desired: apps.DesiredRunning, state: apps.StateRunning, known: true, status: healthy, workloads: []string{"web"}}
	with := func(change func(*observation)) observation {
		o := run
		change(&o)
		return o
	}
	waiting := track{failures: 1, nextTry: now.Add(time.Minute), lastReason: "boom", firstFailure: now.Add(-time.Minute)}
	for _, c := range []struct {
		name      string
		o         observation
		t         track
		action    string
		state     string
		whyHas    string // in the action's why, or the state's when there is no action
		wantTrack func(track) bool
	}{
		{name: "healthy: running, nothing to do", o: run, state: apps.StateRunning,
			wantTrack: func(t track) bool { return t.healthySince.Equal(now) }},
		{name: "health unknown yet is no failure", o: with(func(o *observation) { o.status = unknown }), state: apps.StateRunning},
		{name: "failing health: degraded, naming it", o: with(func(o *observation) { o.status = failing }),
			state: apps.StateDegraded, whyHas: "web fails its health check"},
		{name: "workload not running: degraded", o: with(func(o *observation) { o.status = exited }),
			state: apps.StateDegraded, whyHas: "web is not running"},
		{name: "workload missing from the job: degraded", o: with(func(o *observation) { o.workloads = []string{"web", "worker"} }),
			state: apps.StateDegraded, whyHas: "worker is not in the job"},
		{name: "a job with no workload: degraded", o: with(func(o *observation) { o.status, o.workloads = JobStatus{}, nil }),
			state: apps.StateDegraded, whyHas: "no workload"},
		{name: "dead workload: recover", o: with(func(o *observation) { o.status = dead }),
			action: actionRecover, whyHas: "last exit code 3, 2 restarts"},
		{name: "job lost: start, restarting meanwhile", o: with(func(o *observation) { o.known, o.status = false, JobStatus{} }),
			action: actionStart, state: StateRestarting, whyHas: "does not have the app's job"},
		{name: "job lost during the backoff: restarting, no start", o: with(func(o *observation) { o.known = false }), t: waiting,
			state: StateRestarting, whyHas: "boom"},
		{name: "backoff over: start again, saying why", o: with(func(o *observation) { o.known = false }),
			t: track{failures: 1, nextTry: now.Add(-time.Second), lastReason: "boom"}, action: actionStart, state: StateRestarting, whyHas: "retry 1 after: boom"},
		{name: "meant to be stopped: stop, stopped, failures forgotten", o: with(func(o *observation) { o.desired = apps.DesiredStopped }), t: waiting,
			action: actionStop, state: apps.StateStopped, wantTrack: func(t track) bool { return t == track{} }},
		{name: "meant to be stopped, job gone: stopped only", o: with(func(o *observation) { o.desired, o.known = apps.DesiredStopped, false }),
			state: apps.StateStopped},
		{name: "failed and meant to be stopped stays failed", o: with(func(o *observation) { o.desired, o.state = apps.DesiredStopped, apps.StateFailed }),
			action: actionStop},
		{name: "failed: its job stops, it stays failed", o: with(func(o *observation) { o.state = apps.StateFailed }), action: actionStop, whyHas: "until somebody deploys"},
		{name: "failed, job gone: nothing", o: with(func(o *observation) { o.state, o.known = apps.StateFailed, false })},
		{name: "restart asked", o: with(func(o *observation) { o.restartAsked = true }), action: actionRestart, state: apps.StateRunning},
		{name: "restart asked while degraded", o: with(func(o *observation) { o.restartAsked, o.status = true, failing }),
			action: actionRestart, state: apps.StateDegraded},
		{name: "secret rotated: redeploy", o: with(func(o *observation) { o.secretsRotated = true }), action: actionRedeploy, state: apps.StateRunning},
		{name: "secret rotated during a deploy: wait", o: with(func(o *observation) { o.secretsRotated, o.deploying = true, true }), state: apps.StateRunning},
		{name: "secret rotated while degraded: no redeploy", o: with(func(o *observation) { o.secretsRotated, o.status = true, failing }), state: apps.StateDegraded},
		{name: "stable long enough: failures forgotten", o: run,
			t:     track{failures: 2, healthySince: now.Add(-2 * time.Hour)},
			state: apps.StateRunning, wantTrack: func(t track) bool { return t.failures == 0 && t.healthySince.Equal(now.Add(-2*time.Hour)) }},
		{name: "not stable long enough: failures kept", o: run,
			t:     track{failures: 2, healthySince: now.Add(-time.Minute)},
			state: apps.StateRunning, wantTrack: func(t track) bool { return t.failures == 2 }},
		{name: "degraded resets healthy since", o: with(func(o *observation) { o.status = failing }), t: track{healthySince: now.Add(-time.Hour)},
			state: apps.StateDegraded, wantTrack: func(t track) bool { return t.healthySince.IsZero() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, next := decide(c.o, c.t, now, time.Hour)
			if d.action != c.action || d.state != c.state {
				t.Fatalf("decide = %+v; want action %q, state %q", d, c.action, c.state)
			}
			why := d.why
			if d.action == "" {
				why = d.stateWhy
			}
			if c.whyHas != "" && !strings.Contains(why, c.whyHas) {
				t.Errorf("why = %q; want it to say %q", why, c.whyHas)
			}
			if d.action != "" && d.why == "" || d.state != "" && d.stateWhy == "" {
				t.Errorf("decision %+v does not say why", d)
			}
			if c.wantTrack != nil && !c.wantTrack(next) {
				t.Errorf("track after = %+v", next)
			}
		})
	}
}

func TestFailRetriesOnTheScheduleThenGivesUp(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	backoff := []time.Duration{time.Second, time.Minute}
	var tr track
	for i, c := range []struct {
		wait   time.Duration
		giveUp bool
	}{{time.Second, false}, {time.Minute, false}, {0, true}} {
		at := now.Add(time.Duration(i) * time.Hour)
		next, wait, giveUp := tr.fail(at, "boom", backoff)
		if wait != c.wait || giveUp != c.giveUp || next.failures != i+1 || !next.firstFailure.Equal(now) || next.lastReason != "boom" {
			t.Fatalf("failure %d: wait %s, give up %t, track %+v", i+1, wait, giveUp, next)
		}
		if !giveUp && !next.nextTry.Equal(at.Add(wait)) {
			t.Errorf("failure %d: next try %s", i+1, next.nextTry)
		}
		tr = next
	}
}

func TestShownState(t *testing.T) {
	healthy := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: true, Health: HealthPassing}}}
	down := JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: false}}}
	for _, c := range []struct {
		stored string
		known  bool
		st     JobStatus
		want   string
	}{
		{apps.StateRunning, true, healthy, apps.StateRunning},
		{apps.StateRunning, true, down, apps.StateDegraded},
		{apps.StateRunning, false, JobStatus{}, StateRestarting},
		{apps.StateDegraded, true, healthy, apps.StateDegraded}, // the reconciler moves it back
		{apps.StateStopped, false, JobStatus{}, apps.StateStopped},
		{apps.StateDeploying, false, JobStatus{}, apps.StateDeploying},
		{apps.StateFailed, false, JobStatus{}, apps.StateFailed},
	} {
		if got := shown(c.stored, c.known, c.st, []string{"web"}); got != c.want {
			t.Errorf("shown(%s, known %t, %+v) = %s, want %s", c.stored, c.known, c.st, got, c.want)
		}
	}
}

func TestProblemOf(t *testing.T) {
	code, msg, remedy := "ADAPTER_FAILED", "template cannot read secret/data/x", "set the secret again"
	failed := &Deployment{ID: "dep_2", State: DepFailed, ErrorCode: &code, ErrorMessage: &msg, ErrorRemedy: &remedy}
	good := &Deployment{ID: "dep_1", State: DepSucceeded}
	exit := 2
	placement := &Problem{Code: "CAPACITY_WOULD_OVERSUBSCRIBE", Message: "no room for web"}
	tests := []struct {
		name string
		last *Deployment
		rel  *Release
		st   JobStatus
		want *Problem
	}{
		{"nothing wrong", good, &Release{DeploymentID: "dep_1"}, JobStatus{Workloads: map[string]WorkloadStatus{"web": {Running: true}}}, nil},
		{"never deployed", nil, nil, JobStatus{}, nil},
		{"the newest deploy failed, the previous release serves", failed, &Release{DeploymentID: "dep_1"}, JobStatus{},
			&Problem{Code: code, Message: msg, Remedy: remedy, DeploymentID: "dep_2"}},
		{"the first deploy failed", failed, nil, JobStatus{}, &Problem{Code: code, Message: msg, Remedy: remedy, DeploymentID: "dep_2"}},
		{"the runtime's reason, first workload by name", good, &Release{DeploymentID: "dep_1"},
			JobStatus{Workloads: map[string]WorkloadStatus{"web": {Problem: placement}, "api": {Problem: &Problem{Code: "STATE_APP_EXITED", Message: "driver"}}}},
			&Problem{Code: "STATE_APP_EXITED", Message: "driver", Workload: "api"}},
		{"a workload the runtime gave up on", good, &Release{DeploymentID: "dep_1"},
			JobStatus{Workloads: map[string]WorkloadStatus{"web": {Dead: true, ExitCode: &exit, Restarts: 3}}},
			&Problem{Code: "STATE_APP_EXITED", Message: "workload web kept exiting (last exit code 2, 3 restarts)", Remedy: "read its logs (GET /api/v1/apps/app_1/logs), fix the app, and deploy it again"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemOf("app_1", tt.last, tt.rel, tt.st)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Fatalf("problemOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
