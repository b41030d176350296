package scheduler

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// The reconciler's shell: it watches the store, reconciles each app in a
// worker of its own (at most Config.Workers at once, never one app twice
// at once), reads what the runtime reports, asks decide (decide.go) what
// to do, does it, and logs every action it takes with why. A pass that
// changes nothing logs nothing.

// StateRestarting is the state of an app whose job the reconciler is
// bringing back (after a failure, or lost): nothing of it serves
// meanwhile. The specification's set of states is open-ended.
const StateRestarting = "restarting"

// track is what the reconciler remembers of an app between passes: its
// failures in a row and when it may try again, since when it runs
// healthy, and the trouble last logged (so that it is logged once). It
// lives on the leader only; a new leader starts counting afresh, never
// reviving a failed app. Only the app's own worker touches it.
type track struct {
	failures     int
	firstFailure time.Time
	nextTry      time.Time
	healthySince time.Time
	lastReason   string
	trouble      string
}

func (s *Service) trackOf(appID string) *track {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tracks[appID]
	if t == nil {
		t = &track{}
		s.tracks[appID] = t
	}
	return t
}

// forget drops what the reconciler remembers of an app (after a deploy).
func (s *Service) forget(appID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tracks, appID)
}

// Observer receives the reconciler's measurements (internal/telemetry
// implements it for /metrics).
type Observer interface {
	// ObservePass records a pass: how long until every app it took up was
	// done, how many it took up, and how many it left alone because a
	// reconcile of theirs was still under way.
	ObservePass(d time.Duration, apps, busy int)
	// ObserveApp records how long one app's reconcile took.
	ObserveApp(d time.Duration)
	// ObserveAction records an action taken (start, stop, restart,
	// recover, redeploy, state, give_up) and its outcome (ok, failed).
	ObserveAction(action, outcome string)
}

type noMetrics struct{}

func (noMetrics) ObservePass(time.Duration, int, int) {}
func (noMetrics) ObserveApp(time.Duration)            {}
func (noMetrics) ObserveAction(string, string)        {}

// Reconcile is the leader-only reconciler: it converges every deployed app
// on its desired state, on every change of the apps or releases and every
// Interval. Apps are reconciled concurrently: a pass normally ends before
// the next begins, but one that a slow runtime call holds up lets the
// next begin after Interval, which leaves the app still under way alone.
// It returns when ctx ends, once its apps under way have returned.
func (s *Service) Reconcile(ctx context.Context) error {
	ctx = s.reconcileContext(ctx)
	var all sync.WaitGroup
	defer all.Wait()
	for {
		// Watch the apps and releases: a start, a stop, a restart or a
		// deploy wakes the reconciler at once.
		r := s.d.Store.Read()
		_, _ = apps.Apps.List(r, raftstore.Query{})
		_, _ = Releases.List(r, raftstore.Query{})
		done := s.pass(ctx, &all)
		timer := time.NewTimer(s.cfg.Interval)
		select {
		case <-done:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		wctx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
		_ = r.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// ReconcileOnce makes one pass over every deployed app and returns when
// each it took up is done (an app a reconcile of which is under way is
// left alone).
func (s *Service) ReconcileOnce(ctx context.Context) {
	var all sync.WaitGroup
	<-s.pass(s.reconcileContext(ctx), &all)
}

// reconcileContext is the reconciler's context: the system acts, and
// runtimes wait for readiness up to the configured start timeout.
func (s *Service) reconcileContext(ctx context.Context) context.Context {
	return WithStartTimeout(actor.With(ctx, actor.System), s.cfg.StartTimeout)
}

// pass takes up every app with a release that neither a deploy (building
// or starting it) nor a reconcile under way holds, and reconciles them in
// up to Workers goroutines, each taking the next app as it is done with
// one, and each app in a worker's slot (at most Workers at once, across
// passes). An app held up leaves the others to the pass's other
// goroutines. The channel closes once every app taken up is done; all
// counts the goroutines too.
func (s *Service) pass(ctx context.Context, all *sync.WaitGroup) <-chan struct{} {
	start := time.Now()
	r := s.d.Store.Read()
	rels, _ := Releases.List(r, raftstore.Query{})
	active, _ := Deployments.List(r, raftstore.Query{Index: "active", Prefix: true})
	held := map[string]bool{}
	for _, it := range active {
		if it.Value.State == DepBuilding || it.Value.State == DepStarting {
			held[it.Value.AppID] = true
		}
	}
	deploying := len(active) > 0
	todo := make([]string, 0, len(rels))
	busy := 0
	for _, it := range rels {
		switch appID := it.Value.AppID; {
		case held[appID]:
		case !s.claim(appID):
			busy++
		default:
			todo = append(todo, appID)
		}
	}
	var this sync.WaitGroup
	var next atomic.Int64
	n := min(s.cfg.Workers, len(todo))
	this.Add(n)
	all.Add(n)
	for range n {
		go func() {
			defer all.Done()
			defer this.Done()
			for i := int(next.Add(1)) - 1; i < len(todo); i = int(next.Add(1)) - 1 {
				s.work(ctx, todo[i], deploying)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		this.Wait()
		s.d.Metrics.ObservePass(time.Since(start), len(todo), busy)
		close(done)
	}()
	return done
}

// work reconciles an app the pass claimed, in a worker's slot, and
// releases it.
func (s *Service) work(ctx context.Context, appID string, deploying bool) {
	defer s.unclaim(appID)
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-s.slots }()
	if ctx.Err() == nil {
		s.reconcileApp(ctx, appID, deploying)
	}
}

// claim marks an app as being reconciled; false if it is already.
func (s *Service) claim(appID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[appID] {
		return false
	}
	s.inflight[appID] = true
	return true
}

func (s *Service) unclaim(appID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, appID)
}

// reconcileApp reconciles one app: read, observe, decide, act.
func (s *Service) reconcileApp(ctx context.Context, appID string, deploying bool) {
	start := time.Now()
	defer func() { s.d.Metrics.ObserveApp(time.Since(start)) }()
	r := s.d.Store.Read()
	rel, _, ok := Releases.Get(r, appID)
	if !ok {
		return
	}
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		// Deleted: its workloads stop now, not at the next sweep.
		s.explain(rel, actionStop, "the app was deleted", nil)
		s.dropRelease(ctx, rel)
		return
	}
	t := s.trackOf(appID)
	rt, err := s.runtime(rel.Runtime)
	if err != nil {
		s.trouble(rel, t, "its runtime is not available", err)
		return
	}
	o := observation{desired: app.DesiredState, state: app.State, workloads: slices.Sorted(maps.Keys(rel.Artifacts)),
		restartAsked: rel.RestartGen > rel.RestartedGen, deploying: deploying}
	st, err := bounded(ctx, s.cfg.StartTimeout, func(ctx context.Context) (JobStatus, error) { return rt.Status(ctx, rel.JobID) })
	switch {
	case err == nil:
		o.known, o.status = true, st
	case ctx.Err() != nil:
		return
	case !errcode.Has(err, errcode.NotFound):
		s.trouble(rel, t, "the runtime cannot say how its job runs", err)
		return
	}
	if t.trouble != "" {
		s.d.Log.Info("reconciler: the runtime answers again", s.attrs(rel, "")...)
		t.trouble = ""
	}
	if o.known && o.desired == apps.DesiredRunning && o.state != apps.StateFailed {
		o.secretsRotated = s.secretsRotated(app.ID, rel)
	}
	d, next := decide(o, *t, s.d.Now(), s.cfg.StableAfter)
	*t = next
	s.carryOut(ctx, &app, rel, rt, t, d)
}

// carryOut does what decide decided, then reports the state.
func (s *Service) carryOut(ctx context.Context, app *apps.App, rel Release, rt Runtime, t *track, d decision) {
	switch d.action {
	case actionStop:
		err := s.stopJob(ctx, rt, rel)
		s.explain(rel, actionStop, d.why, err)
		if err != nil {
			return
		}
	case actionRecover:
		err := s.stopJob(ctx, rt, rel)
		s.explain(rel, actionRecover, d.why, err)
		if err != nil {
			return
		}
		s.failed(ctx, app, rel, t, d.why)
		return
	case actionStart:
		s.report(ctx, app, rel, d.state, d.stateWhy)
		s.start(ctx, app, rel, rt, t, d.why)
		return
	case actionRestart:
		s.explain(rel, actionRestart, d.why, s.restartJob(ctx, rt, rel))
	case actionRedeploy:
		dep, err := s.Create(ctx, app.ID, rel.Revision, TriggerSecretRotation)
		s.explain(rel, actionRedeploy, d.why, err, "new_deployment_id", dep.ID)
	}
	s.report(ctx, app, rel, d.state, d.stateWhy)
}

// runBound bounds a run or restart of a job of n workloads: each may wait
// the start timeout, and one more covers the rest (a runtime that ignores
// its start timeout ends there).
func (s *Service) runBound(n int) time.Duration {
	return s.cfg.StartTimeout * time.Duration(n+1)
}

// bounded calls a runtime with ctx limited to d: a call that runs past it
// fails with ADAPTER_UNAVAILABLE (the runtime did not answer in time), not
// with the context's error.
func bounded[T any](ctx context.Context, d time.Duration, call func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := call(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return v, errcode.Wrap(err, errcode.AdapterUnavailable, "the runtime did not answer within %s", d)
	}
	return v, err
}

// stopJob stops a release's job; one the runtime does not have is stopped.
func (s *Service) stopJob(ctx context.Context, rt Runtime, rel Release) error {
	_, err := bounded(ctx, s.cfg.StartTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, rt.Stop(ctx, rel.JobID)
	})
	if errcode.Has(err, errcode.NotFound) {
		return nil
	}
	return err
}

// start runs a release's job again and reports what it runs: running when
// every workload came up, degraded when one did not within the start
// timeout, and a failure (retried on the backoff) when the run failed.
func (s *Service) start(ctx context.Context, app *apps.App, rel Release, rt Runtime, t *track, why string) {
	s.d.Log.Info("reconciler: starting the app's job", s.attrs(rel, actionStart, "reason", why)...)
	job, versions, err := s.makeJob(ctx, rel.JobID, app.ID, s.specOf(rel), rel.Artifacts)
	var st JobStatus
	if err == nil {
		st, err = bounded(ctx, s.runBound(len(job.Workloads)), func(ctx context.Context) (JobStatus, error) { return rt.Run(ctx, job) })
	}
	if err != nil {
		if ctx.Err() != nil {
			return // stopping (leadership lost, shutdown): not the app's failure
		}
		s.explain(rel, actionStart, why, err)
		s.failed(ctx, app, rel, t, "starting it failed: "+errcode.MessageOf(err))
		return
	}
	s.explain(rel, actionStart, why, nil)
	if !maps.Equal(versions, rel.SecretVersions) {
		s.noteSecretVersions(ctx, rel.AppID, rel.JobID, versions)
	}
	state, stateWhy := observed(st, slices.Sorted(maps.Keys(rel.Artifacts)))
	s.report(ctx, app, rel, state, stateWhy)
}

// specOf is the spec document of a release's revision (zero if it is gone:
// makeJob then has no workloads and the run fails).
func (s *Service) specOf(rel Release) (d spec.Document) {
	view, err := s.d.Specs.Get(rel.AppID, rel.Revision)
	if err != nil {
		return d
	}
	return view.Spec
}

// failed counts a failure of an app the reconciler runs: it retries after
// the next wait of the schedule (restarting), and after the last gives up:
// the app is failed (app.gave_up) and stays so until somebody deploys it.
func (s *Service) failed(ctx context.Context, app *apps.App, rel Release, t *track, reason string) {
	now := s.d.Now()
	next, wait, giveUp := t.fail(now, reason, s.cfg.Backoff)
	*t = next
	if !giveUp {
		s.d.Log.Warn("reconciler: the app failed; it runs again after a wait", s.attrs(rel, "",
			"failures", t.failures, "retry_in", wait.String(), "reason", reason)...)
		s.report(ctx, app, rel, StateRestarting, reason)
		return
	}
	window := now.Sub(t.firstFailure).Round(time.Second)
	failures := t.failures
	gaveUp := false
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		gaveUp = false
		ops, err := apps.TransitionOps(ctx, r, app.ID, apps.Transition{Cause: apps.Observed, To: apps.StateFailed}, now)
		if err != nil || len(ops) == 0 {
			return nil, err // gone, or a deploy holds it now
		}
		cur, _, _ := apps.Apps.Get(r, app.ID)
		gaveUp = true
		return append(ops, events.Emit(ctx, now, "app.gave_up", appRef(cur), "", "",
			map[string]any{"reason": reason, "failures": failures, "window": window.String()})), nil
	})
	if err != nil || gaveUp {
		s.explain(rel, actionGiveUp, reason, err, "failures", failures, "window", window.String())
	}
	if gaveUp && err == nil {
		app.State = apps.StateFailed
	}
	if err == nil {
		s.forget(app.ID)
	}
}

// report moves the app to the state observed (with app.state_changed) and
// logs the move with why; the apps package decides whether it moves (not
// while a deploy holds it, nor out of failed). Nothing is written or
// logged when the app is in that state already.
func (s *Service) report(ctx context.Context, app *apps.App, rel Release, to, why string) {
	if to == "" || to == app.State {
		return
	}
	from, moved, err := s.moveState(ctx, app.ID, to)
	if err != nil {
		s.explain(rel, actionState, why, err, "to", to)
		return
	}
	if moved {
		app.State = to
		s.explain(rel, actionState, why, nil, "from", from, "to", to)
	}
}

// moveState moves an app to the state the reconciler observed: the state
// it moved from, and whether it moved.
func (s *Service) moveState(ctx context.Context, appID, to string) (from string, moved bool, err error) {
	now := s.d.Now()
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		from, moved = "", false
		a, _, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, nil
		}
		ops, err := apps.TransitionOps(ctx, r, appID, apps.Transition{Cause: apps.Observed, To: to}, now)
		if err != nil || len(ops) == 0 {
			return nil, err
		}
		from, moved = a.State, a.State != to
		return ops, nil
	})
	return from, moved && err == nil, err
}

// restartJob restarts a release's job in place and records that the
// restart asked for is done.
func (s *Service) restartJob(ctx context.Context, rt Runtime, rel Release) error {
	_, err := bounded(ctx, s.runBound(len(rel.Artifacts)), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, rt.Restart(ctx, rel.JobID)
	})
	if err != nil {
		return err
	}
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Releases.Get(r, rel.AppID)
		if !ok || cur.JobID != rel.JobID || cur.RestartedGen >= rel.RestartGen {
			return nil, nil
		}
		cur.RestartedGen = rel.RestartGen
		return []raftstore.Op{Releases.PutIf(&cur, meta.ModifyIndex)}, nil
	})
	return err
}

// secretsRotated says whether a bound secret of the release changed since
// its job's environment was made: rotating a secret recreates the
// workload. Versions come from the store: no secret value is read (nor an
// adapter asked) on the reconciler's every pass. A bound secret that is
// gone is no rotation (a deploy would fail; the app keeps serving).
func (s *Service) secretsRotated(appID string, rel Release) bool {
	if len(rel.SecretVersions) == 0 {
		return false
	}
	views, err := s.d.Secrets.List(appID)
	if err != nil {
		return false
	}
	current := make(map[string]int64, len(views))
	for _, v := range views {
		current[v.Key] = v.Version
	}
	changed := false
	for key, ver := range rel.SecretVersions {
		cur, ok := current[key]
		if !ok {
			return false
		}
		if cur != ver {
			changed = true
		}
	}
	return changed
}

// noteSecretVersions records the bound secrets' versions a re-run job was
// made with.
func (s *Service) noteSecretVersions(ctx context.Context, appID, jobID string, versions map[string]int64) {
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Releases.Get(r, appID)
		if !ok || cur.JobID != jobID {
			return nil, nil // another release's job runs now
		}
		cur.SecretVersions = versions
		return []raftstore.Op{Releases.PutIf(&cur, meta.ModifyIndex)}, nil
	})
	if err != nil {
		s.d.Log.Warn("reconciler: record the secret versions of a job run again", "app_id", appID, "job_id", jobID, "err", err)
	}
}

// actionMessages are the reconciler's log messages, by action.
var actionMessages = map[string]string{
	actionStart:    "reconciler: started the app's job",
	actionStop:     "reconciler: stopped the app's job",
	actionRestart:  "reconciler: restarted the app's job in place",
	actionRecover:  "reconciler: stopped a job the runtime gave up restarting",
	actionRedeploy: "reconciler: deployed the app again",
	actionState:    "reconciler: app state changed",
	actionGiveUp:   "reconciler: the app failed too often; giving up (failed until somebody deploys it)",
}

// explain logs an action the reconciler took and why (a failed one with
// its error, at warning level), and counts it.
func (s *Service) explain(rel Release, action, why string, err error, more ...any) {
	outcome, level, msg := "ok", slog.LevelInfo, actionMessages[action]
	attrs := s.attrs(rel, action, append([]any{"reason", why}, more...)...)
	if err != nil {
		outcome, level, msg = "failed", slog.LevelWarn, msg+": failed"
		attrs = append(attrs, "err", errcode.MessageOf(err))
	}
	s.d.Metrics.ObserveAction(action, outcome)
	s.d.Log.Log(context.Background(), level, msg, attrs...)
}

// trouble logs what keeps the reconciler from reconciling an app, once
// until it changes or clears.
func (s *Service) trouble(rel Release, t *track, what string, err error) {
	msg := what + ": " + errcode.MessageOf(err)
	if t.trouble == msg {
		return
	}
	t.trouble = msg
	s.d.Log.Warn("reconciler: cannot reconcile the app", s.attrs(rel, "", "reason", msg)...)
}

// attrs are a log line's attributes about an app's release.
func (s *Service) attrs(rel Release, action string, more ...any) []any {
	out := make([]any, 0, 10+len(more))
	if action != "" {
		out = append(out, "action", action)
	}
	out = append(out, "app_id", rel.AppID, "deployment_id", rel.DeploymentID, "job_id", rel.JobID, "runtime", rel.Runtime)
	return append(out, more...)
}
