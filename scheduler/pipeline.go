package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// RunDeploys is the leader's deploy worker: it runs each app's oldest
// queued deployment once nothing else deploys the app, and fails cleanly
// the deployments a previous leader left half done. It returns when ctx
// ends (leadership lost).
func (s *Service) RunDeploys(ctx context.Context) error {
	ctx = WithStartTimeout(actor.With(ctx, actor.System), s.cfg.StartTimeout)
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
	log.add(LogSystem, fmt.Sprintf("deploying revision %d of app %s (trigger %s) on runtime %s, source %s", d.Revision, d.AppID, d.Trigger, d.Runtime, sourceName(d.Source)))
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

// deploy builds each workload (or starts a kept build with the same key:
// builds) and runs the deployment's job. On success the caller switches
// the release.
func (s *Service) deploy(ctx context.Context, d *Deployment, log *liveLog) (*Release, error) {
	view, err := s.d.Specs.Get(d.AppID, d.Revision)
	if err != nil {
		return nil, err
	}
	rt, err := s.runtime(d.Runtime)
	if err != nil {
		return nil, err
	}
	arts, builds, err := s.builds(ctx, d, view.Spec, rt, log)
	if err != nil {
		return nil, err
	}
	if err := s.setState(ctx, d, DepStarting, arts, builds); err != nil {
		return nil, err
	}
	job, versions, err := s.makeJob(ctx, d.ID, d.AppID, view.Spec, arts)
	if err != nil {
		return nil, err
	}
	s.phase(ctx, *d, slog.LevelInfo, "deploy starting", "workloads", job.Order)
	log.add(LogSystem, "starting workloads in order: "+strings.Join(job.Order, ", "))
	began := s.d.Now()
	st, err := rt.Run(ctx, job)
	s.tailRunLogs(ctx, rt, job, log)
	if err != nil {
		return nil, err
	}
	for _, name := range job.Order {
		ws := st.Workloads[name]
		log.add(LogSystem, fmt.Sprintf("workload %s: running=%t health=%s %s", name, ws.Running, ws.Health, ws.Address))
	}
	ready := notReady(job, st)
	s.phase(ctx, *d, slog.LevelInfo, "deploy health", "ready", ready == nil, healthOf(job, st), "duration_ms", s.d.Now().Sub(began).Milliseconds())
	if err := ready; err != nil {
		if serr := rt.Stop(context.WithoutCancel(ctx), job.ID); serr != nil && !errcode.Has(serr, errcode.NotFound) {
			s.d.Log.Warn("stop a job that did not become ready", "job", job.ID, "err", serr)
		}
		return nil, err
	}
	rel := &Release{AppID: d.AppID, DeploymentID: d.ID, SpecID: d.SpecID, Revision: d.Revision, Runtime: d.Runtime,
		JobID: job.ID, Artifacts: arts, Source: d.Source, Builds: builds, Primary: job.Primary, SecretVersions: versions, At: s.d.Now()}
	if old, _, hasOld := Releases.Get(s.d.Store.Read(), d.AppID); hasOld {
		rel.RestartGen, rel.RestartedGen = old.RestartGen, old.RestartGen
	}
	return rel, nil
}

// builds gives every workload of the deployment its artifact: the kept
// artifact of the release it redeploys, or any kept one with the
// workload's build key (keptBuilds), started again without building; else
// a build from the deployment's own source (never the app's current
// checkout, which may have moved on).
func (s *Service) builds(ctx context.Context, d *Deployment, doc spec.Document, rt Runtime, log *liveLog) (map[string]Artifact, map[string]WorkloadBuild, error) {
	pol := s.d.Policy.Current()
	r := s.d.Store.Read()
	rel, _, hasRel := Releases.Get(r, d.AppID)
	kept := keptBuilds(appDeployments(r, d.AppID, 0), rel, hasRel, d.Runtime)
	var from Deployment
	if d.Redeploys != "" {
		from, _, _ = Deployments.Get(r, d.Redeploys)
		log.add(LogSystem, fmt.Sprintf("shipping again the release of deployment %s: revision %d, source %s, and its builds where kept", from.ID, d.Revision, sourceName(d.Source)))
	}
	arts, builds := map[string]Artifact{}, map[string]WorkloadBuild{}
	names := slices.Sorted(maps.Keys(doc.Workloads))
	keys, reused := map[string]string{}, map[string]keptBuild{}
	for _, name := range names {
		keys[name] = BuildKey(d.Runtime, d.Source, doc.Workloads[name].Build, pol.EffectiveIsolation(pol.MinBuildIsolation), pol.EgressAllowlist)
		if k, ok := reusable(ctx, rt, from, name, keys[name], kept); ok {
			reused[name] = k
		}
	}
	var co source.Checkout
	if len(reused) == len(names) {
		s.phase(ctx, *d, slog.LevelInfo, "deploy source", "source", sourceName(d.Source), "checkout", "not needed: every workload starts a kept build")
	} else {
		began := s.d.Now()
		var err error
		if co, err = s.checkoutOf(ctx, d); err != nil {
			return nil, nil, err
		}
		s.phase(ctx, *d, slog.LevelInfo, "deploy source", "source", sourceName(d.Source), "checkout_id", co.ID,
			"duration_ms", s.d.Now().Sub(began).Milliseconds())
	}
	for _, name := range names {
		key := keys[name]
		if k, ok := reused[name]; ok {
			arts[name], builds[name] = k.Artifact, WorkloadBuild{Key: key, BuiltBy: k.Build.BuiltBy}
			log.add(LogSystem, fmt.Sprintf("workload %s: starting the kept build of deployment %s (artifact %s, build key %s): nothing to build", name, k.Build.BuiltBy, k.Artifact.ID, keyName(key)))
			s.phase(ctx, *d, slog.LevelInfo, "deploy build", "workload", name, "reused", true, "built_by", k.Build.BuiltBy, "artifact_id", k.Artifact.ID, "build_key", key)
			continue
		}
		b := effectiveBuild(doc.Workloads[name].Build)
		log.add(LogSystem, fmt.Sprintf("building workload %s (%s) from source %s (build key %s)", name, b.Kind, sourceName(d.Source), keyName(key)))
		began := s.d.Now()
		art, err := rt.Build(ctx, BuildRequest{ID: d.ID + "-" + name, AppID: d.AppID, Workload: name, Source: co.AppDir(), Build: b, Timeout: s.cfg.BuildTimeout,
			Isolation: pol.EffectiveIsolation(pol.MinBuildIsolation), Egress: pol.EgressAllowlist, Log: func(_, line string) { log.add(LogBuild, name+": "+line) }})
		if err != nil {
			return nil, nil, err
		}
		arts[name], builds[name] = art, WorkloadBuild{Key: key, BuiltBy: d.ID}
		s.phase(ctx, *d, slog.LevelInfo, "deploy build", "workload", name, "reused", false, "built_by", d.ID, "artifact_id", art.ID, "build_key", key,
			"duration_ms", s.d.Now().Sub(began).Milliseconds())
	}
	return arts, builds, nil
}

// reusable finds a kept build a workload may start instead of building:
// the redeployed release's artifact (from) unless its key differs (the
// build would differ: a policy changed since), else the newest kept build
// with the same key; either only while the runtime still has it.
func reusable(ctx context.Context, rt Runtime, from Deployment, name, key string, kept map[string]keptBuild) (keptBuild, bool) {
	if a, ok := from.Artifacts[name]; ok {
		b := from.Builds[name]
		if b.BuiltBy == "" {
			b.BuiltBy = from.ID // recorded before builds were
		}
		if b.Key == key && artifactExists(ctx, rt, a) {
			return keptBuild{Artifact: a, Build: b}, true
		}
	}
	if k, ok := kept[key]; ok && key != "" && artifactExists(ctx, rt, k.Artifact) {
		return k, true
	}
	return keptBuild{}, false
}

// keyName shortens a build key for the deploy log.
func keyName(key string) string {
	if key == "" {
		return "none: the source has no recorded commit"
	}
	if len(key) > len("sha256:")+12 {
		return key[:len("sha256:")+12]
	}
	return key
}

// checkoutOf is the checkout a deployment builds from: the one its source
// names, or, for a deployment without one (an app whose record names no
// checkout), the app's current one, provided it still holds the commit
// the deployment recorded (its build key says so).
func (s *Service) checkoutOf(ctx context.Context, d *Deployment) (source.Checkout, error) {
	if d.Source == nil || d.Source.CheckoutID == "" {
		co, err := s.d.Sources.Ensure(ctx, d.AppID)
		if err == nil && d.Source != nil && d.Source.Commit != "" && co.Commit != d.Source.Commit {
			return source.Checkout{}, errcode.New(errcode.StateInvalid, "the app's source changed since this deploy was asked for (%s, now %s)", d.Source.Commit, co.Commit).
				WithRemedy("deploy again: POST /api/v1/apps/%s/deployments", d.AppID)
		}
		return co, err
	}
	co, err := s.d.Sources.CheckoutOf(ctx, d.AppID, *d.Source)
	if errcode.Has(err, errcode.NotFound) {
		return source.Checkout{}, errcode.Wrap(err, errcode.StateInvalid, "the source this deploy ships (%s) is on no server: %s", sourceName(d.Source), errcode.MessageOf(err)).
			WithRemedy("upload the source again (POST /api/v1/apps/%s/source) and deploy", d.AppID)
	}
	return co, err
}

// healthOf is the log attribute of a started job's workloads: each one's
// health (and "stopped" for one that is not running), in start order.
func healthOf(job Job, st JobStatus) slog.Attr {
	attrs := make([]any, 0, len(job.Order))
	for _, name := range job.Order {
		ws := st.Workloads[name]
		h := ws.Health
		if !ws.Running {
			h = "stopped"
		}
		attrs = append(attrs, slog.String(name, h))
	}
	return slog.Group("workloads", attrs...)
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

// artifactExists says whether the runtime can still run an artifact: as
// its ArtifactKeeper says, else when its directory is there.
func artifactExists(ctx context.Context, rt Runtime, a Artifact) bool {
	if keeper, ok := rt.(ArtifactKeeper); ok {
		return keeper.HasArtifact(ctx, a)
	}
	_, err := os.Stat(a.Dir)
	return a.Dir != "" && err == nil
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

func (s *Service) setState(ctx context.Context, d *Deployment, state string, arts map[string]Artifact, builds map[string]WorkloadBuild) error {
	var cur Deployment
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var ok bool
		if cur, meta, ok = Deployments.Get(r, d.ID); !ok || !cur.Active() {
			return nil, errcode.New(errcode.StateInvalid, "deployment %s ended meanwhile", d.ID)
		}
		cur.State, cur.Artifacts, cur.Builds = state, arts, builds
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
		oldDep             string
		endCode, endMsg    string
	)
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ended, oldJob, oldRuntime, oldDep = false, "", "", ""
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
			if hasOld {
				oldDep = old.DeploymentID
			}
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
			if e, ok := errcode.As(cause); ok && e.Remedy != "" {
				cur.ErrorRemedy = &e.Remedy
			}
			endCode, endMsg = string(code), msg
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
	var took int64
	if d.StartedAt != nil {
		took = now.Sub(*d.StartedAt).Milliseconds()
	}
	if state == DepSucceeded {
		s.phase(ctx, d, slog.LevelInfo, "deploy switched", "job_id", rel.JobID, "previous_deployment_id", oldDep, "previous_job_id", oldJob)
	}
	if cause == nil {
		s.forget(d.AppID)
	}
	if oldJob != "" {
		s.retire(ctx, oldRuntime, oldJob)
		s.dropLogs(ctx, oldRuntime, oldJob)
	}
	if state == DepFailed {
		s.retire(ctx, d.Runtime, d.ID)
		s.dropLogs(ctx, d.Runtime, d.ID)
		s.phase(ctx, d, slog.LevelWarn, "deploy failed", "revision", d.Revision, "error_code", endCode, "error", endMsg, "duration_ms", took)
		return
	}
	s.phase(ctx, d, slog.LevelInfo, "deploy succeeded", "revision", d.Revision, "duration_ms", took)
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

// dropLogs removes the kept logs of a job no run will follow: a previous
// release's once a new release replaced it, a failed deploy's (its last
// lines are in the deploy's log, tailRunLogs). Nothing reads them any
// more (an app's logs are its release's), and host policy's
// max_log_disk_bytes caps what an app keeps, which would otherwise hold
// them too until the sweep (Prune) removed them. Failures are logged; the
// sweep tries again.
func (s *Service) dropLogs(ctx context.Context, runtimeID, jobID string) {
	pr, ok := capability[Pruner](s, runtimeID)
	if !ok {
		return
	}
	if err := pr.RemoveJobLogs(ctx, jobID); err != nil && !errcode.Has(err, errcode.StateInvalid) {
		s.d.Log.Warn("remove a replaced job's logs", "job", jobID, "err", err)
	}
}

// makeJob makes the runtime job of an app's revision from its built
// artifacts, resolving every workload's environment (slots, secrets) now.
// It returns the bound secrets' versions.
func (s *Service) makeJob(ctx context.Context, jobID, appID string, d spec.Document, arts map[string]Artifact) (Job, map[string]int64, error) {
	vols, err := s.volumesOf(ctx, appID, d)
	if err != nil {
		return Job{}, nil, err
	}
	pol := s.d.Policy.Current()
	job := Job{ID: jobID, AppID: appID, Workloads: map[string]Task{}, Order: plan.StartOrder(d), Primary: d.Primary()}
	versions := map[string]int64{}
	logCap := int64(0)
	if pol.MaxLogDiskBytes > 0 && len(d.Workloads) > 0 {
		logCap = max(pol.MaxLogDiskBytes/int64(len(d.Workloads)), 4096)
	}
	isolation := pol.EffectiveIsolation(pol.MinRuntimeIsolation)
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
			t.Mounts = append(t.Mounts, Mount{Volume: m.Volume, ID: vols[m.Volume].ID, Path: m.Path, SizeBytes: d.Volumes[m.Volume].SizeBytes})
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
