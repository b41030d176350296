package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// RunDeploys is the leader's deploy worker: it runs each app's oldest
// queued deployment once nothing else deploys the app, and fails cleanly
// the deployments a previous leader left half done. It returns when ctx
// ends (leadership lost).
func (s *Service) RunDeploys(ctx context.Context) error {
	ctx = actor.With(ctx, actor.System)
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		r := s.d.Store.Read()
		items, _ := Deployments.List(r, raftstore.Query{Index: "active", Prefix: true})
		busy := map[string]bool{}
		var queued []Deployment
		for _, it := range items {
			d := it.Value
			switch d.State {
			case DepBuilding, DepStarting:
				busy[d.AppID] = true
				if !s.isExecuting(d.ID) {
					s.interrupted(ctx, d)
				}
			case DepQueued:
				queued = append(queued, d)
			}
		}
		for _, d := range queued {
			if busy[d.AppID] || s.isExecuting(d.ID) {
				continue
			}
			busy[d.AppID] = true
			s.setExecuting(d.ID, true)
			go func() {
				defer s.setExecuting(d.ID, false)
				s.execute(ctx, d)
			}()
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-tick.C:
			case <-wctx.Done():
			}
			cancel()
		}()
		_ = r.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (s *Service) isExecuting(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executing[id]
}

func (s *Service) setExecuting(id string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.executing[id] = true
	} else {
		delete(s.executing, id)
	}
}

// interrupted fails a deployment that was building or starting when the
// node running it stopped leading or died; the app keeps what it ran.
// What that node left on the runtime goes, in the background: the
// deployment's job (started or half-started), and its builds where they
// outlive the server (BuildCanceler).
func (s *Service) interrupted(ctx context.Context, d Deployment) {
	s.finish(ctx, d, nil, errcode.New(errcode.Internal, "the deploy was interrupted: the server running it stopped or lost leadership; deploy again"), nil)
	rt, err := s.runtime(d.Runtime)
	if err != nil {
		return
	}
	go s.clearInterrupted(context.WithoutCancel(ctx), rt, d.ID)
}

// clearInterruptedTimeout bounds clearing up after an interrupted deploy.
const clearInterruptedTimeout = 5 * time.Minute

// clearInterrupted stops and discards an interrupted deployment's job and
// cancels its builds; what is not there is no error.
func (s *Service) clearInterrupted(ctx context.Context, rt Runtime, depID string) {
	ctx, cancel := context.WithTimeout(ctx, clearInterruptedTimeout)
	defer cancel()
	warn := func(what string, err error) {
		if err != nil && !errcode.Has(err, errcode.NotFound) {
			s.d.Log.Warn("clear an interrupted deploy: "+what, "deployment", depID, "err", errcode.MessageOf(err))
		}
	}
	if c, ok := rt.(BuildCanceler); ok {
		warn("cancel its builds", c.CancelBuilds(ctx, depID))
	}
	err := rt.Stop(ctx, depID)
	warn("stop its job", err)
	if d, ok := rt.(Discarder); ok && err == nil {
		warn("discard its job", d.Discard(ctx, depID))
	}
}

// execute runs one deployment: build, then run, then switch the release.
func (s *Service) execute(ctx context.Context, d Deployment) {
	log := s.logs.open(d.ID)
	defer s.logs.close(d.ID)
	d, ok := s.begin(ctx, d)
	if !ok {
		return
	}
	log.add(LogSystem, fmt.Sprintf("deploying revision %d of app %s (trigger %s) on runtime %s", d.Revision, d.AppID, d.Trigger, d.Runtime))
	rel, err := s.deploy(ctx, &d, log)
	if err != nil {
		code, msg := s.errorOf(err)
		log.add(LogSystem, fmt.Sprintf("deploy failed: %s: %s", code, msg))
		if e, ok := errcode.As(err); ok && e.Remedy != "" {
			log.add(LogSystem, "remedy: "+e.Remedy)
		}
	} else {
		log.add(LogSystem, "deploy succeeded; the app runs revision "+fmt.Sprint(d.Revision))
	}
	s.finish(ctx, d, rel, err, log.snapshot())
}

// begin moves a queued deployment to building and its app to deploying.
func (s *Service) begin(ctx context.Context, d Deployment) (Deployment, bool) {
	now := s.d.Now()
	var cur Deployment
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var ok bool
		if cur, meta, ok = Deployments.Get(r, d.ID); !ok || cur.State != DepQueued {
			return nil, errNotQueued
		}
		app, _, _ := apps.Apps.Get(r, cur.AppID)
		cur.State, cur.StartedAt, cur.PriorState = DepBuilding, &now, app.State
		stateOps, err := apps.TransitionOps(ctx, r, cur.AppID, apps.Transition{Cause: apps.DeployBegan}, now)
		if err != nil {
			return nil, err
		}
		return append([]raftstore.Op{Deployments.PutIf(&cur, meta.ModifyIndex)}, stateOps...), nil
	})
	switch {
	case err == nil:
		return cur, true
	case errors.Is(err, errNotQueued):
	case errcode.Has(err, errcode.NotFound):
		s.d.Log.Warn("deploy of a deleted app", "deployment", d.ID, "err", err)
		s.finish(ctx, d, nil, err, nil)
	default:
		s.d.Log.Warn("start deployment", "deployment", d.ID, "err", err)
	}
	return d, false
}

// errNotQueued ends begin when the deployment is no longer queued (another
// worker took it, or it was superseded).
var errNotQueued = errors.New("the deployment is no longer queued")

// deploy builds (or reuses the release's build of the same revision) and
// runs the deployment's job. On success the caller switches the release.
func (s *Service) deploy(ctx context.Context, d *Deployment, log *liveLog) (*Release, error) {
	view, err := s.d.Specs.Get(d.AppID, d.Revision)
	if err != nil {
		return nil, err
	}
	rt, err := s.runtime(d.Runtime)
	if err != nil {
		return nil, err
	}
	r := s.d.Store.Read()
	old, _, hasOld := Releases.Get(r, d.AppID)
	arts := map[string]Artifact{}
	if hasOld && old.SpecID == d.SpecID && artifactsExist(ctx, rt, old.Artifacts, view.Spec) {
		arts = old.Artifacts
		log.add(LogSystem, "reusing the build of deployment "+old.DeploymentID+" (same revision)")
	} else {
		co, err := s.d.Sources.Ensure(ctx, d.AppID)
		if err != nil {
			return nil, err
		}
		for _, name := range slices.Sorted(maps.Keys(view.Spec.Workloads)) {
			w := view.Spec.Workloads[name]
			b := spec.Build{Kind: spec.BuildCommand, Context: "."}
			if w.Build != nil {
				b = *w.Build
			}
			log.add(LogSystem, fmt.Sprintf("building workload %s (%s)", name, b.Kind))
			pol := s.d.Policy.Current()
			art, err := rt.Build(ctx, BuildRequest{ID: d.ID + "-" + name, AppID: d.AppID, Workload: name, Source: co.AppDir(), Build: b, Timeout: s.cfg.BuildTimeout,
				Isolation: pol.MinBuildIsolation, Egress: pol.EgressAllowlist, Log: func(_, line string) { log.add(LogBuild, name+": "+line) }})
			if err != nil {
				return nil, err
			}
			arts[name] = art
		}
	}
	if err := s.setState(ctx, d, DepStarting, arts); err != nil {
		return nil, err
	}
	job, versions, err := s.makeJob(ctx, d.ID, d.AppID, view.Spec, arts)
	if err != nil {
		return nil, err
	}
	log.add(LogSystem, "starting workloads in order: "+strings.Join(job.Order, ", "))
	st, err := rt.Run(ctx, job)
	s.tailRunLogs(ctx, rt, job, log)
	if err != nil {
		return nil, err
	}
	for _, name := range job.Order {
		ws := st.Workloads[name]
		log.add(LogSystem, fmt.Sprintf("workload %s: running=%t health=%s %s", name, ws.Running, ws.Health, ws.Address))
	}
	if err := notReady(job, st); err != nil {
		if serr := rt.Stop(context.WithoutCancel(ctx), job.ID); serr != nil && !errcode.Has(serr, errcode.NotFound) {
			s.d.Log.Warn("stop a job that did not become ready", "job", job.ID, "err", serr)
		}
		return nil, err
	}
	rel := &Release{AppID: d.AppID, DeploymentID: d.ID, SpecID: d.SpecID, Revision: d.Revision, Runtime: d.Runtime,
		JobID: job.ID, Artifacts: arts, Primary: job.Primary, SecretVersions: versions, At: s.d.Now()}
	if hasOld {
		rel.RestartGen, rel.RestartedGen = old.RestartGen, old.RestartGen
	}
	return rel, nil
}

// notReady refuses a job whose serving workloads did not pass their health
// check within the runtime's start timeout: switching to it would leave
// nothing to route to, so the previous revision keeps serving.
func notReady(job Job, st JobStatus) error {
	for _, name := range job.Order {
		t, ws := job.Workloads[name], st.Workloads[name]
		if t.NoPort || ws.Health == HealthPassing {
			continue
		}
		what := "nothing accepted connections on its port"
		if t.Health != nil {
			what = "its health check at " + t.Health.Path + " did not pass"
		}
		return errcode.New(errcode.StateAppExited, "workload %s did not become ready before the start timeout: %s", name, what).
			WithDetail("workload", name).WithDetail("reason", "not_ready").
			WithRemedy("make the app listen on $PORT on all interfaces (0.0.0.0), and check GET /api/v1/apps/%s/logs?workload=%s", job.AppID, name)
	}
	return nil
}

// artifactsExist says whether every workload of d has a built artifact
// still: as the runtime's ArtifactKeeper says, else on disk.
func artifactsExist(ctx context.Context, rt Runtime, arts map[string]Artifact, d spec.Document) bool {
	keeper, _ := rt.(ArtifactKeeper)
	for name := range d.Workloads {
		a, ok := arts[name]
		if !ok {
			return false
		}
		if keeper != nil {
			if !keeper.HasArtifact(ctx, a) {
				return false
			}
			continue
		}
		if _, err := os.Stat(a.Dir); err != nil {
			return false
		}
	}
	return true
}

// tailRunLogs copies the last lines each workload wrote while starting
// into the deploy log.
func (s *Service) tailRunLogs(ctx context.Context, rt Runtime, job Job, log *liveLog) {
	lr, ok := rt.(LogReader)
	if !ok {
		return
	}
	for _, name := range job.Order {
		lines, err := lr.Logs(ctx, job.ID, name)
		if err != nil {
			continue
		}
		if len(lines) > 50 {
			lines = lines[len(lines)-50:]
		}
		for _, l := range lines {
			log.add(LogRun, name+": "+l)
		}
	}
}

func (s *Service) setState(ctx context.Context, d *Deployment, state string, arts map[string]Artifact) error {
	var cur Deployment
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var ok bool
		if cur, meta, ok = Deployments.Get(r, d.ID); !ok || !cur.Active() {
			return nil, errcode.New(errcode.StateInvalid, "deployment %s ended meanwhile", d.ID)
		}
		cur.State, cur.Artifacts = state, arts
		return []raftstore.Op{Deployments.PutIf(&cur, meta.ModifyIndex)}, nil
	})
	if err != nil {
		return err
	}
	*d = cur
	return nil
}

// finish records a deployment's end: on success the new release, the app
// running (and meant to run), deploy.succeeded, and the previous job
// stopped; on failure deploy.failed with the code, and the app back in
// the state it had (the previous revision keeps serving). What runs on
// the runtime is stopped after the write, never inside it.
func (s *Service) finish(ctx context.Context, d Deployment, rel *Release, cause error, lines []LogLine) {
	ctx = context.WithoutCancel(ctx)
	now := s.d.Now()
	var causeCode errcode.Code
	var causeMsg string
	if cause != nil {
		causeCode, causeMsg = s.errorOf(cause) // logged once, before the write
	}
	var (
		ended              bool // the deployment was active, and this write ended it
		state              string
		oldJob, oldRuntime string
	)
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ended, oldJob, oldRuntime = false, "", ""
		cur, meta, ok := Deployments.Get(r, d.ID)
		if !ok || !cur.Active() {
			return nil, nil
		}
		app, _, appOK := apps.Apps.Get(r, d.AppID)
		cur.FinishedAt = &now
		var ops []raftstore.Op
		old, _, hasOld := Releases.Get(r, d.AppID)
		if cause == nil && rel != nil && appOK {
			cur.State = DepSucceeded
			ops = append(ops, Releases.Put(rel))
			if hasOld && old.JobID != rel.JobID {
				oldJob, oldRuntime = old.JobID, old.Runtime
			}
			ops = append(ops, events.Emit(ctx, now, "deploy.succeeded", appRef(app), "deployment", d.ID,
				map[string]any{"deployment_id": d.ID, "spec_id": d.SpecID, "trigger": d.Trigger}))
		} else {
			code, msg := causeCode, causeMsg
			if cause == nil {
				code, msg = s.errorOf(noApp(d.AppID)) // coded: nothing is logged
			}
			cur.State = DepFailed
			cur.ErrorCode, cur.ErrorMessage = new(string), &msg
			*cur.ErrorCode = string(code)
			if appOK {
				ops = append(ops, events.Emit(ctx, now, "deploy.failed", appRef(app), "deployment", d.ID,
					map[string]any{"deployment_id": d.ID, "spec_id": d.SpecID, "trigger": d.Trigger, "error_code": string(code), "message": msg}))
			}
		}
		ops = append([]raftstore.Op{Deployments.PutIf(&cur, meta.ModifyIndex)}, ops...)
		if appOK {
			st, err := apps.TransitionOps(ctx, r, app.ID, apps.Transition{Cause: apps.DeployEnded,
				Succeeded: cur.State == DepSucceeded, Prior: cur.PriorState, Released: hasOld}, now)
			if err != nil {
				return nil, err
			}
			ops = append(ops, st...)
		}
		if lines != nil {
			ops = append(ops, DeployLogs.Insert(capLog(d.ID, d.AppID, lines)))
		}
		ended, state = true, cur.State
		return ops, nil
	})
	if err != nil {
		s.d.Log.Error("record the end of a deployment", "deployment", d.ID, "err", err)
		return
	}
	if !ended {
		return
	}
	if cause == nil {
		s.forget(d.AppID)
	}
	if oldJob != "" {
		s.retire(ctx, oldRuntime, oldJob)
	}
	if state == DepFailed {
		s.retire(ctx, d.Runtime, d.ID)
	}
}

// retire stops a job no run will follow (the previous release's, or a
// failed deploy's) and discards what its workloads wrote.
func (s *Service) retire(ctx context.Context, runtimeID, jobID string) {
	rt, err := s.runtime(runtimeID)
	if err != nil {
		return
	}
	if err := rt.Stop(ctx, jobID); err != nil && !errcode.Has(err, errcode.NotFound) {
		s.d.Log.Warn("stop a retired job", "job", jobID, "err", err)
		return
	}
	if dc, ok := rt.(Discarder); ok {
		if err := dc.Discard(ctx, jobID); err != nil {
			s.d.Log.Warn("discard a retired job", "job", jobID, "err", err)
		}
	}
}

// makeJob makes the runtime job of an app's revision from its built
// artifacts, resolving every workload's environment (slots, secrets) now.
// It returns the bound secrets' versions.
func (s *Service) makeJob(ctx context.Context, jobID, appID string, d spec.Document, arts map[string]Artifact) (Job, map[string]int64, error) {
	pol := s.d.Policy.Current()
	job := Job{ID: jobID, AppID: appID, Workloads: map[string]Task{}, Order: plan.StartOrder(d), Primary: d.Primary()}
	versions := map[string]int64{}
	logCap := int64(0)
	if pol.MaxLogDiskBytes > 0 && len(d.Workloads) > 0 {
		logCap = max(pol.MaxLogDiskBytes/int64(len(d.Workloads)), 4096)
	}
	isolation := pol.MinRuntimeIsolation
	if d.Runtime != nil && d.Runtime.Isolation != "" && !policy.AtLeast(isolation, d.Runtime.Isolation) {
		isolation = d.Runtime.Isolation
	}
	for name, w := range d.Workloads {
		env, secretEnv, sealedEnv := map[string]string{}, map[string]string{}, map[string]bool{}
		for _, layer := range []map[string]spec.EnvValue{d.Env, w.Env} {
			for k, v := range layer {
				val, err := s.envValue(ctx, appID, v, versions)
				if err != nil {
					return Job{}, nil, fmt.Errorf("workload %s: env %s: %w", name, k, err)
				}
				env[k] = val
				delete(secretEnv, k)
				delete(sealedEnv, k)
				switch {
				case v.Secret != "":
					secretEnv[k] = v.Secret
				case v.Slot != "" && s.d.Slots.IsSealed(appID, v.Slot, v.Field):
					sealedEnv[k] = true
				}
			}
		}
		t := Task{Artifact: arts[name], Command: w.Run.Command, Env: env, SecretEnv: secretEnv, SealedEnv: sealedEnv, AppPort: w.Run.Port, Health: w.Run.Health,
			Resources: w.Resources, LogCapBytes: logCap, Isolation: isolation, Egress: pol.EgressAllowlist}
		if w.Run.Port == 0 && w.Run.Health == nil && !servesHTTP(name == job.Primary, w) {
			t.NoPort = true
		}
		for _, m := range w.Mounts {
			t.Mounts = append(t.Mounts, Mount{Volume: m.Volume, Path: m.Path, SizeBytes: d.Volumes[m.Volume].SizeBytes})
		}
		job.Workloads[name] = t
	}
	return job, versions, nil
}

// servesHTTP says whether a workload without a declared port serves HTTP:
// the primary workload does (the edge routes to it), and a static site.
func servesHTTP(primary bool, w spec.Workload) bool {
	return primary || (w.Build != nil && w.Build.Kind == spec.BuildStatic)
}

func (s *Service) envValue(ctx context.Context, appID string, v spec.EnvValue, versions map[string]int64) (string, error) {
	switch {
	case v.Slot != "":
		return s.d.Slots.Resolve(appID, v.Slot, v.Field)
	case v.Secret != "":
		val, ver, err := s.d.Secrets.Resolve(ctx, appID, v.Secret)
		if err != nil {
			return "", err
		}
		versions[v.Secret] = ver
		return val, nil
	}
	return v.Value, nil
}

// maxLogBytes caps a finished deploy's kept log.
const maxLogBytes = 256 << 10

// capLog keeps a deploy's log under maxLogBytes: the first lines and the
// last, with a count of those left out between.
func capLog(depID, appID string, lines []LogLine) *DeployLog {
	size := 0
	for _, l := range lines {
		size += len(l.Line) + 32
	}
	out := &DeployLog{DeploymentID: depID, AppID: appID, Lines: lines}
	if size <= maxLogBytes {
		return out
	}
	budget := maxLogBytes / 4
	head := 0
	for used := 0; head < len(lines) && used+len(lines[head].Line)+32 <= budget; head++ {
		used += len(lines[head].Line) + 32
	}
	tail := len(lines)
	for used := 0; tail > head && used+len(lines[tail-1].Line)+32 <= maxLogBytes-budget; tail-- {
		used += len(lines[tail-1].Line) + 32
	}
	out.Lines = append(slices.Clone(lines[:head]), lines[tail:]...)
	out.Dropped = tail - head
	return out
}
