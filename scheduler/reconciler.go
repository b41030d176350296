package scheduler

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// StateRestarting is the state of an app the reconciler is bringing back
// after a failure (the specification's set of states is open-ended).
const StateRestarting = "restarting"

// track is what the reconciler remembers of an app between passes: its
// failures in a row and when it may try again. It lives on the leader
// only; a new leader starts counting afresh, never reviving a failed app.
type track struct {
	failures     int
	firstFailure time.Time
	nextTry      time.Time
	healthySince time.Time
	lastReason   string
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

// Reconcile is the leader-only reconciler: it converges every deployed app
// on its desired state, on every change of the apps or releases and every
// Interval. It returns when ctx ends.
func (s *Service) Reconcile(ctx context.Context) error {
	ctx = actor.With(ctx, actor.System)
	for {
		// Watch the apps and releases: a start, a stop, a restart or a
		// deploy wakes the reconciler at once.
		r := s.d.Store.Read()
		_, _ = apps.Apps.List(r, raftstore.Query{})
		_, _ = Releases.List(r, raftstore.Query{})
		s.ReconcileOnce(ctx)
		wctx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
		_ = r.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// ReconcileOnce makes one pass over every deployed app.
func (s *Service) ReconcileOnce(ctx context.Context) {
	r := s.d.Store.Read()
	rels, _ := Releases.List(r, raftstore.Query{})
	busy := map[string]bool{}
	active, _ := Deployments.List(r, raftstore.Query{Index: "active", Prefix: true})
	for _, it := range active {
		if it.Value.State == DepBuilding || it.Value.State == DepStarting {
			busy[it.Value.AppID] = true
		}
	}
	for _, it := range rels {
		if ctx.Err() != nil {
			return
		}
		rel := it.Value
		if busy[rel.AppID] {
			continue
		}
		app, _, ok := apps.Apps.Get(r, rel.AppID)
		if !ok {
			// Deleted: its workloads stop now, not at the next sweep.
			s.dropRelease(ctx, rel)
			continue
		}
		if err := s.reconcileApp(ctx, app, rel, len(active) > 0); err != nil {
			s.d.Log.Warn("reconcile", "app", app.ID, "err", err)
		}
	}
}

func (s *Service) reconcileApp(ctx context.Context, app apps.App, rel Release, anyActive bool) error {
	rt, err := s.runtime(rel.Runtime)
	if err != nil {
		return err
	}
	st, err := rt.Status(ctx, rel.JobID)
	known := err == nil
	if err != nil && !errcode.Has(err, errcode.NotFound) {
		return err
	}
	t := s.trackOf(app.ID)
	now := s.d.Now()
	switch {
	case app.DesiredState == apps.DesiredStopped:
		if known {
			if err := rt.Stop(ctx, rel.JobID); err != nil && !errcode.Has(err, errcode.NotFound) {
				return err
			}
		}
		s.forget(app.ID)
		if app.State != apps.StateFailed {
			return s.moveState(ctx, app.ID, apps.StateStopped)
		}
		return nil
	case app.State == apps.StateFailed:
		// A failed app stays failed until somebody deploys it.
		if known {
			return rt.Stop(ctx, rel.JobID)
		}
		return nil
	case !known:
		if now.Before(t.nextTry) {
			return nil
		}
		job, versions, err := s.makeJob(ctx, rel.JobID, app.ID, s.specOf(rel), rel.Artifacts)
		if err == nil {
			_, err = rt.Run(ctx, job)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopping (leadership lost, shutdown): not the app's failure
			}
			return s.failed(ctx, app, rel, t, fmt.Sprintf("starting it failed: %s", errcode.MessageOf(err)))
		}
		if !maps.Equal(versions, rel.SecretVersions) {
			s.noteSecretVersions(ctx, rel.AppID, rel.JobID, versions)
		}
		return s.moveState(ctx, app.ID, apps.StateRunning)
	}
	for name, ws := range st.Workloads {
		if ws.Dead {
			if err := rt.Stop(ctx, rel.JobID); err != nil && !errcode.Has(err, errcode.NotFound) {
				return err
			}
			code := "unknown"
			if ws.ExitCode != nil {
				code = fmt.Sprint(*ws.ExitCode)
			}
			return s.failed(ctx, app, rel, t, fmt.Sprintf("workload %s kept exiting (last exit code %s, %d restarts)", name, code, ws.Restarts))
		}
	}
	if rel.RestartGen > rel.RestartedGen {
		if err := s.restartJob(ctx, rt, rel); err != nil {
			return err
		}
	}
	healthy := true
	for _, ws := range st.Workloads {
		if ws.Health == HealthFailing || !ws.Running {
			healthy = false
		}
	}
	if healthy {
		if t.healthySince.IsZero() {
			t.healthySince = now
		}
		if t.failures > 0 && now.Sub(t.healthySince) >= s.cfg.StableAfter {
			s.forget(app.ID)
		}
		if !anyActive {
			s.rotateSecrets(ctx, app, rel)
		}
		return s.moveState(ctx, app.ID, apps.StateRunning)
	}
	t.healthySince = time.Time{}
	return s.moveState(ctx, app.ID, apps.StateDegraded)
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
// the next wait of the schedule, and after the last gives up: the app is
// failed (app.gave_up) and stays so until somebody deploys it.
func (s *Service) failed(ctx context.Context, app apps.App, rel Release, t *track, reason string) error {
	now := s.d.Now()
	if t.failures == 0 {
		t.firstFailure = now
	}
	t.failures++
	t.lastReason = reason
	t.healthySince = time.Time{}
	if t.failures <= len(s.cfg.Backoff) {
		t.nextTry = now.Add(s.cfg.Backoff[t.failures-1])
		s.d.Log.Warn("app failed; retrying", "app", app.ID, "failures", t.failures, "retry_in", s.cfg.Backoff[t.failures-1], "reason", reason)
		return s.moveState(ctx, app.ID, StateRestarting)
	}
	window := now.Sub(t.firstFailure).Round(time.Second)
	s.d.Log.Warn("app failed too often; giving up", "app", app.ID, "failures", t.failures, "window", window, "reason", reason)
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops, err := apps.TransitionOps(ctx, r, app.ID, apps.Transition{Cause: apps.Observed, To: apps.StateFailed}, now)
		if err != nil || len(ops) == 0 {
			return nil, err // gone, or a deploy holds it now
		}
		cur, _, _ := apps.Apps.Get(r, app.ID)
		return append(ops, events.Emit(ctx, now, "app.gave_up", appRef(cur), "", "",
			map[string]any{"reason": reason, "failures": t.failures, "window": window.String()})), nil
	})
	if err != nil {
		return err
	}
	s.forget(app.ID)
	return nil
}

// moveState moves an app to the state the reconciler observed (with
// app.state_changed); the apps package decides whether it moves (not while
// a deploy holds it, nor out of failed).
func (s *Service) moveState(ctx context.Context, appID, to string) error {
	now := s.d.Now()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
			return nil, nil
		}
		ops, err := apps.TransitionOps(ctx, r, appID, apps.Transition{Cause: apps.Observed, To: to}, now)
		return ops, err
	})
	return err
}

// restartJob restarts a release's job in place and records that the
// restart asked for is done.
func (s *Service) restartJob(ctx context.Context, rt Runtime, rel Release) error {
	if err := rt.Restart(ctx, rel.JobID); err != nil {
		return err
	}
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Releases.Get(r, rel.AppID)
		if !ok || cur.JobID != rel.JobID || cur.RestartedGen >= rel.RestartGen {
			return nil, nil
		}
		cur.RestartedGen = rel.RestartGen
		return []raftstore.Op{Releases.PutIf(&cur, meta.ModifyIndex)}, nil
	})
	return err
}

// rotateSecrets deploys again, with trigger secret_rotation, an app whose
// bound secrets changed since its job's environment was made: rotating a
// secret recreates the workload.
func (s *Service) rotateSecrets(ctx context.Context, app apps.App, rel Release) {
	if len(rel.SecretVersions) == 0 || app.DesiredState != apps.DesiredRunning {
		return
	}
	// Versions come from the store: no secret value is read (nor an
	// adapter asked) on the reconciler's every pass.
	views, err := s.d.Secrets.List(app.ID)
	if err != nil {
		return
	}
	current := make(map[string]int64, len(views))
	for _, v := range views {
		current[v.Key] = v.Version
	}
	changed := false
	for key, ver := range rel.SecretVersions {
		cur, ok := current[key]
		if !ok {
			return // a bound secret is gone: a deploy would fail; keep serving
		}
		if cur != ver {
			changed = true
		}
	}
	if !changed {
		return
	}
	if _, err := s.Create(ctx, app.ID, rel.Revision, TriggerSecretRotation); err != nil {
		s.d.Log.Warn("deploy after a secret rotation", "app", app.ID, "err", err)
	}
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
		s.d.Log.Warn("record the secret versions of a job run again", "app", appID, "err", err)
	}
}
