package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// blockWait is how long one blocking query may wait at Nomad (Nomad's
// default is 5 minutes; it adds up to wait/16 of jitter).
const blockWait = 5 * time.Minute

// Run registers the job and waits until each workload is ready, in its
// start order: the job is registered with the first workload's group, then
// again with each next one added (an in-place update for the groups
// already there), each registration planned first and enforcing the job
// modify index it expects. It waits on blocking queries of the job's
// allocations until the group's allocation is healthy (Nomad's deployment
// health: its checks pass, or for a workload without a port, its task
// runs), or its task exits first (STATE_APP_EXITED with the exit code),
// or the healthy deadline passes (Run returns; Status reports the
// health). Each wait is bounded by the start timeout the context carries
// (scheduler.WithStartTimeout: runtime.start_timeout), else
// Config.StartTimeout, and ends with NOT_FOUND when the job is stopped or
// purged behind svc's back meanwhile. A failed run deregisters the job
// and waits for its allocations to stop.
//
// A job that Nomad runs already (registered and not stopped) is refused
// with STATE_INVALID; so is a registration another controller made first.
func (r *Runtime) Run(ctx context.Context, job scheduler.Job) (scheduler.JobStatus, error) {
	order, err := r.checkJob(job)
	if err != nil {
		return scheduler.JobStatus{}, err
	}
	sources := map[string]artifactSource{}
	for name, t := range job.Workloads {
		pub, err := r.cfg.Artifacts.Ensure(ctx, t.Artifact)
		if err != nil {
			return scheduler.JobStatus{}, fmt.Errorf("run job %s: workload %s: %w", job.ID, name, err)
		}
		sources[name] = artifactSource{URL: r.cfg.Artifacts.SignedURL(r.cfg.ArtifactBaseURL, pub.ID), SHA256: pub.SHA256}
	}
	volumes, err := r.ensureVolumes(ctx, job)
	if err != nil {
		return scheduler.JobStatus{}, fmt.Errorf("run job %s: %w", job.ID, err)
	}
	full, err := r.render(ctx, job, order, sources, volumes)
	if err != nil {
		return scheduler.JobStatus{}, err
	}
	nid := *full.ID
	current, _, err := r.client.Jobs().Info(nid, r.query(ctx))
	// prev is the app's job as it runs, which this run updates to a new
	// version (nil: a new job, or a stopped one registered again).
	var prev *api.Job
	switch {
	case statusOf(err) == 404:
	case err != nil:
		return scheduler.JobStatus{}, r.translate(err, "read job "+nid, "job "+job.ID)
	case current.Stop == nil || !*current.Stop:
		if err := r.updatable(current, job, nid); err != nil {
			return scheduler.JobStatus{}, err
		}
		prev = current
	}
	// The job's slot credentials go to Vault, where its template reads
	// them, before any registration: never into the job.
	wrote, err := r.putJobSecrets(ctx, job)
	if err != nil {
		return scheduler.JobStatus{}, err
	}
	r.remember(job.ID, nid)
	registered := false
	var modifyIndex uint64
	fail := func(err error) (scheduler.JobStatus, error) {
		stopped := !registered
		if registered {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			defer cancel()
			if serr := r.withdraw(sctx, nid, modifyIndex, prev != nil); serr != nil {
				r.log.Warn("nomad: stop a job that failed to run", "job_id", job.ID, "nomad_job", nid, "err", errcode.MessageOf(serr))
			} else {
				stopped = true
			}
		}
		// What was written goes with the failed run, unless it may be
		// read still: by our registration we could not stop, or by the
		// one another writer made first (a refused first registration).
		if wrote && stopped && (registered || !errcode.Has(err, errcode.StateInvalid)) {
			r.dropJobSecrets(ctx, job)
		}
		return scheduler.JobStatus{}, err
	}
	// A new job's groups are registered in start order, each registration
	// adding the next. An update registers the whole new version at once,
	// against the modify index read above (check-and-set): each changed
	// group starts a canary beside its running allocation, waited for in
	// start order; the previous deployment serves until Stop promotes
	// them.
	steps := [][]*api.TaskGroup{}
	if prev == nil {
		for i := range full.TaskGroups {
			steps = append(steps, full.TaskGroups[:i+1])
		}
	} else {
		full.Meta[jobtemplates.MetaPreviousDeployment] = prev.Meta[jobtemplates.MetaDeploymentID]
		modifyIndex = *prev.JobModifyIndex
		steps = append(steps, full.TaskGroups)
	}
	for _, groups := range steps {
		step := *full
		step.TaskGroups = groups
		group := *groups[len(groups)-1].Name
		idx, evalID, err := r.registerEval(ctx, &step, !registered && prev == nil, modifyIndex, group)
		if err != nil {
			return fail(err)
		}
		registered, modifyIndex = true, idx
		if err := r.placed(ctx, evalID); err != nil {
			return fail(err)
		}
		names := []string{group}
		if prev != nil {
			names = order
		}
		for _, g := range names {
			if err := r.awaitReady(ctx, nid, g); err != nil {
				return fail(r.explain(ctx, nid, g, err))
			}
		}
	}
	r.tag(ctx, nid, job.ID, modifyIndex)
	st, err := r.Status(ctx, job.ID)
	if err != nil {
		return fail(err)
	}
	return st, nil
}

// updatable refuses to update a running Nomad job with a deployment:
// STATE_INVALID when it runs this deployment already, or another app's
// (the slug names the job), or is not svc's.
func (r *Runtime) updatable(current *api.Job, job scheduler.Job, nid string) error {
	switch {
	case current.Meta[jobtemplates.MetaDeploymentID] == job.ID:
		return errcode.New(errcode.StateInvalid, "job %q is already running (nomad job %s)", job.ID, nid)
	case current.Meta[jobtemplates.MetaManagedBy] != jobtemplates.ManagedBy || current.Meta[jobtemplates.MetaAppID] != appOf(job):
		return errcode.New(errcode.StateInvalid, "nomad job %s runs, and is not app %s's", nid, appOf(job)).
			WithRemedy("stop the Nomad job %s (it holds the name svc gives this app's job), or rename the app", nid)
	case current.JobModifyIndex == nil:
		return errcode.New(errcode.AdapterFailed, "nomad job %s has no modify index", nid)
	}
	return nil
}

// withdraw takes back a failed run's registration: an update reverts the
// app's job to the version it ran (its allocations were left as they
// were), a new job is deregistered. Either only while the job is still at
// our registration: what another writer registered since is theirs.
func (r *Runtime) withdraw(ctx context.Context, nid string, modifyIndex uint64, update bool) error {
	cur, _, err := r.client.Jobs().Info(nid, r.query(ctx))
	if err != nil {
		return r.translate(err, "read job "+nid, "job "+nid)
	}
	if cur.JobModifyIndex == nil || *cur.JobModifyIndex != modifyIndex {
		return errcode.New(errcode.StateInvalid, "nomad job %s changed since this run registered it; left as it is", nid)
	}
	if update {
		return r.revert(ctx, cur)
	}
	return r.stop(ctx, nid)
}

// stopTimeout bounds stopping a job that failed to run.
const stopTimeout = 2 * time.Minute

// remember records which Nomad job runs a scheduler job.
func (r *Runtime) remember(jobID, nomadID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[jobID] = nomadID
}

// forget drops what remember recorded.
func (r *Runtime) forget(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ids, jobID)
}

// nomadID finds the Nomad job that runs a scheduler job: the one Run
// registered, else (another controller ran it, or this one restarted)
// the job of svc's whose current version names it as its deployment, or
// as the deployment before (appjob.go). "" when Nomad has none.
func (r *Runtime) nomadID(ctx context.Context, jobID string) (string, error) {
	r.mu.Lock()
	id, ok := r.ids[jobID]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	stubs, _, err := r.client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, r.query(ctx))
	if err != nil {
		return "", r.translate(err, "list jobs", "the jobs")
	}
	var best, prev *api.JobListStub
	for _, s := range stubs {
		if s.Meta[jobtemplates.MetaManagedBy] != jobtemplates.ManagedBy {
			continue
		}
		switch jobID {
		case s.Meta[jobtemplates.MetaDeploymentID]:
			if best == nil || s.CreateIndex > best.CreateIndex {
				best = s
			}
		case s.Meta[jobtemplates.MetaPreviousDeployment]:
			prev = s
		}
	}
	if best == nil {
		best = prev
	}
	if best == nil {
		return "", nil
	}
	r.remember(jobID, best.ID)
	return best.ID, nil
}

// checkJob validates a job before anything is registered and returns its
// start order: Order, then the workloads it leaves out, by name.
func (r *Runtime) checkJob(jb scheduler.Job) ([]string, error) {
	if err := jb.Check(); err != nil {
		return nil, err
	}
	for name, t := range jb.Workloads {
		if vars := jobtemplates.SealedVars(t); len(vars) > 0 && r.jobSecrets() == nil {
			// A slot's credential reaches the workload from Vault only
			// (slotsecrets.go): without a Vault to write it to, refuse
			// rather than put it where Nomad's state and API show it.
			return nil, noJobSecrets(name, vars)
		}
		if t.Isolation != "" && !policy.AtLeast(r.Isolation(), t.Isolation) {
			return nil, errcode.New(errcode.PlanCapabilityUnsupp, "the nomad runtime's %s driver isolates at %q, below the %q workload %s needs",
				r.cfg.Driver, r.Isolation(), t.Isolation, name).WithDetail("workload", name)
		}
		if len(t.Egress) > 0 {
			return nil, egressUnsupported().WithDetail("workload", name)
		}
	}
	return jb.StartOrder()
}

// egressUnsupported refuses a host policy egress_allowlist: the Nomad
// runtime does not enforce one (that takes the cluster's own network
// policy), and letting a workload out regardless would fail open.
func egressUnsupported() *errcode.Error {
	return errcode.New(errcode.PlanCapabilityUnsupp, "host policy restricts egress (egress_allowlist), which the nomad runtime does not enforce").
		WithDetail("capability", "egress_allowlist").
		WithRemedy("enforce egress in the cluster's network (Consul service mesh, firewall rules) and empty egress_allowlist, or deploy on the process runtime")
}

// register plans the job, refuses it if a group cannot be placed, and
// registers it enforcing the job modify index: the one the plan saw for
// the first registration (0 for a job Nomad does not know), the one our
// previous registration returned after that. A refused index means
// another writer registered the job meanwhile: STATE_INVALID.
func (r *Runtime) register(ctx context.Context, job *api.Job, first bool, modifyIndex uint64, group string) (uint64, error) {
	idx, _, err := r.registerEval(ctx, job, first, modifyIndex, group)
	return idx, err
}

// registerEval is register, returning the registration's evaluation too.
func (r *Runtime) registerEval(ctx context.Context, job *api.Job, first bool, modifyIndex uint64, group string) (uint64, string, error) {
	plan, _, err := r.client.Jobs().Plan(job, false, r.write(ctx))
	if err != nil {
		return 0, "", r.translate(err, "plan job "+*job.ID, "job "+*job.ID)
	}
	if err := planRefusal(*job.ID, plan.FailedTGAllocs); err != nil {
		return 0, "", err
	}
	if first {
		// A new registration expects no job, or a stopped one of the
		// same ID (run again): never whatever index the plan saw, which
		// may be another controller's registration made meanwhile.
		if modifyIndex, err = r.freshIndex(ctx, *job.ID, plan.JobModifyIndex, group); err != nil {
			return 0, "", err
		}
	}
	resp, _, err := r.client.Jobs().EnforceRegister(job, modifyIndex, r.write(ctx))
	if err == nil {
		return resp.JobModifyIndex, resp.EvalID, nil
	}
	// Nomad refuses a stale index with a 500 and a message; the job's
	// own modify index tells a conflict from any other failure.
	if code := statusOf(err); code >= 500 || code == 400 || code == 409 {
		cur, _, gerr := r.client.Jobs().Info(*job.ID, r.query(ctx))
		var curIndex uint64
		exists := gerr == nil && cur != nil && cur.JobModifyIndex != nil
		if exists {
			curIndex = *cur.JobModifyIndex
		}
		if (gerr == nil || statusOf(gerr) == 404) && conflict(modifyIndex, exists, curIndex) {
			return 0, "", errcode.Wrap(err, errcode.StateInvalid, "job %q was registered by another writer meanwhile (expected modify index %d, nomad has %d): svc does not overwrite it",
				*job.ID, modifyIndex, curIndex).WithDetail("workload", group).
				WithRemedy("see what changed with `nomad job history %s`; deploy again to register svc's version over it (the previous release keeps serving until then)", *job.ID)
		}
	}
	return 0, "", r.translate(err, "register job "+*job.ID, "job "+*job.ID)
}

// freshIndex is the modify index a first registration enforces: 0 when
// Nomad has no such job, the job's own index when it is stopped, and a
// STATE_INVALID refusal when it runs (another controller registered it).
func (r *Runtime) freshIndex(ctx context.Context, jobID string, planned uint64, group string) (uint64, error) {
	if planned == 0 {
		return 0, nil
	}
	cur, _, err := r.client.Jobs().Info(jobID, r.query(ctx))
	switch {
	case err != nil && statusOf(err) == 404:
		return 0, nil
	case err != nil:
		return 0, r.translate(err, "read job "+jobID, "job "+jobID)
	case cur != nil && cur.Stop != nil && *cur.Stop && cur.JobModifyIndex != nil:
		return *cur.JobModifyIndex, nil
	}
	return 0, errcode.New(errcode.StateInvalid, "job %q is already registered and running", jobID).
		WithDetail("workload", group).WithRemedy("read the job's state; another controller may have started it")
}

// conflict says whether an enforced index was stale, from the job's state
// read after the refusal: it exists though we expected a new job, or it
// moved past the index we held.
func conflict(expected uint64, exists bool, current uint64) bool {
	if expected == 0 {
		return exists
	}
	return !exists || current != expected
}

// planRefusal turns a plan's placement failures into an error, by
// Nomad's structured metrics (placementFailure, on the first group by
// name): nodes that had no room are CAPACITY_WOULD_OVERSUBSCRIBE; no node
// that could run it at all ADAPTER_FAILED, naming the constraints that
// filtered them.
func planRefusal(jobID string, failed map[string]*api.AllocationMetric) error {
	if len(failed) == 0 {
		return nil
	}
	g := slices.Min(slices.Collect(maps.Keys(failed)))
	return placementFailure(jobID, g, failed[g])
}

// placed waits (blocking queries) for a registration's evaluation to
// complete and refuses what it could not place, as the plan would have
// (the cluster changed since, or the canaries beside the running
// allocations need room of their own): Nomad leaves a blocked evaluation
// behind, which the run's failure takes back with the registration.
func (r *Runtime) placed(ctx context.Context, evalID string) error {
	if evalID == "" {
		return nil
	}
	var index uint64
	for {
		ev, meta, err := r.client.Evaluations().Info(evalID, (&api.QueryOptions{WaitIndex: index, WaitTime: blockWait}).WithContext(ctx))
		if err != nil {
			return r.translate(err, "read evaluation "+evalID, "evaluation "+evalID)
		}
		if ev.Status != "pending" {
			return planRefusal(ev.JobID, ev.FailedTGAllocs)
		}
		index = max(index, meta.LastIndex, 1)
	}
}

// explain replaces a failure to start a workload with Nomad's reason from
// its allocation's task events (taskFailure), when they tell one.
func (r *Runtime) explain(ctx context.Context, nid, group string, err error) error {
	e, ok := errcode.As(err)
	if !ok {
		return err
	}
	allocID, _ := e.Details["allocation"].(string)
	if allocID == "" {
		return err
	}
	a, _, aerr := r.client.Allocations().Info(allocID, r.query(ctx))
	if aerr != nil {
		return err
	}
	if reason := taskFailure(group, taskOf(a.TaskStates, group)); reason != nil && (e.Code != errcode.StateAppExited || reason.Code != errcode.AdapterFailed) {
		return reason.WithDetail("allocation", allocID)
	}
	return err
}

// readiness is what an allocation says of its task starting.
type readiness int

const (
	starting    readiness = iota
	ready                 // running and healthy
	unhealthy             // running, but Nomad marked it unhealthy
	exited                // the task exited before it was healthy
	failedSetup           // the task never ran (artifact, template, driver)
)

// taskOf returns the task state of the workload's task in an allocation:
// the task named after the workload, or the only one.
func taskOf(states map[string]*api.TaskState, workload string) *api.TaskState {
	if ts := states[workload]; ts != nil {
		return ts
	}
	if len(states) == 1 {
		for _, ts := range states {
			return ts
		}
	}
	return nil
}

// taskName is the name of the workload's task in an allocation.
func taskName(states map[string]*api.TaskState, workload string) string {
	if _, ok := states[workload]; !ok && len(states) == 1 {
		for name := range states {
			return name
		}
	}
	return workload
}

// readinessOf reads a starting allocation: ready once its task runs and
// Nomad's deployment health says healthy; exited when the task terminated
// before that (its exit code); failedSetup when the task failed without
// running; unhealthy when the healthy deadline passed.
func readinessOf(a *api.AllocationListStub, workload string) (readiness, int, string) {
	ts := taskOf(a.TaskStates, workload)
	if ts != nil {
		if what := missingData(ts); what != "" {
			// Nomad's template hook waits for it without end.
			return failedSetup, 0, eventTemplate + ": " + missingPrefix + what
		}
		for _, ev := range ts.Events {
			if ev.Type == api.TaskTerminated {
				return exited, exitCodeOf(ev), ev.DisplayMessage
			}
		}
		if ts.State == "dead" && ts.Failed {
			msg := ""
			for _, ev := range ts.Events {
				if ev.FailsTask || ev.Type == api.TaskArtifactDownloadFailed || ev.Type == api.TaskDriverFailure || ev.Type == api.TaskSetupFailure {
					msg = ev.Type + ": " + ev.DisplayMessage
				}
			}
			return failedSetup, 0, msg
		}
	}
	if a.ClientStatus == api.AllocClientStatusFailed || a.ClientStatus == api.AllocClientStatusLost {
		return failedSetup, 0, "allocation " + a.ClientStatus + ": " + a.ClientDescription
	}
	if a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil {
		if *a.DeploymentStatus.Healthy && ts != nil && ts.State == "running" {
			return ready, 0, ""
		}
		if !*a.DeploymentStatus.Healthy {
			return unhealthy, 0, ""
		}
	}
	return starting, 0, ""
}

var urlQuery = regexp.MustCompile(`\?[^\s"')]*`)

// redactQueries drops URLs' queries from a message: an artifact's signed
// URL in a download failure must not reach an error shown to users.
func redactQueries(msg string) string { return urlQuery.ReplaceAllString(msg, "?…") }

// exitCodeOf reads a Terminated event's exit code: its "exit_code"
// detail, else the deprecated field.
func exitCodeOf(ev *api.TaskEvent) int {
	if v, ok := ev.Details["exit_code"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return ev.ExitCode
}

// newest returns the group's newest allocation, preferring one meant to
// run; nil if it has none.
func newest(allocs []*api.AllocationListStub, group string) *api.AllocationListStub {
	var best *api.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup != group {
			continue
		}
		live := a.DesiredStatus == api.AllocDesiredStatusRun
		bestLive := best != nil && best.DesiredStatus == api.AllocDesiredStatusRun
		if best == nil || (live && !bestLive) || (live == bestLive && a.CreateIndex > best.CreateIndex) {
			best = a
		}
	}
	return best
}

// awaitReady waits with blocking queries on the job's allocations until
// the group's allocation is ready, its task exits or fails, the healthy
// deadline passes, or the start timeout (startTimeout) ends the wait (no
// error: the workload keeps running). The context ending fails; so does
// the job going (stopped or purged behind svc's back: NOT_FOUND), checked
// on every answer, which comes at least every goneEvery.
func (r *Runtime) awaitReady(ctx context.Context, jobID, group string) error {
	wctx, cancel := context.WithTimeout(ctx, r.startTimeout(ctx))
	defer cancel()
	var index uint64
	for {
		allocs, meta, err := r.client.Jobs().Allocations(jobID, false, (&api.QueryOptions{WaitIndex: index, WaitTime: goneEvery}).WithContext(wctx))
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("run job %s: workload %s: %w", jobID, group, cerr)
			}
			if errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return nil
			}
			return r.translate(err, "read the allocations of job "+jobID, "job "+jobID)
		}
		if a := newest(allocs, group); a != nil && a.DesiredStatus == api.AllocDesiredStatusRun {
			switch state, code, msg := readinessOf(a, group); state {
			case ready, unhealthy:
				return nil
			case exited:
				return errcode.New(errcode.StateAppExited, "workload %s exited with code %d before it was ready", group, code).
					WithDetail("workload", group).WithDetail("exit_code", code).WithDetail("event", msg).
					WithDetail("allocation", a.ID)
			case failedSetup:
				return errcode.New(errcode.AdapterFailed, "nomad could not start workload %s: %s", group, redactQueries(msg)).
					WithDetail("workload", group).WithDetail("allocation", a.ID)
			}
		}
		if err := r.gone(wctx, jobID, group); err != nil {
			return err
		}
		index = max(index, meta.LastIndex, 1)
	}
}
