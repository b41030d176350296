package nomad

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// Stop stops the scheduler job's allocations and waits until they have
// stopped. NOT_FOUND for a job Nomad does not run. On the app's Nomad job
// (appjob.go) what that takes depends on the deployment: the outgoing one
// (a new version's canaries run beside it) stops by promoting the
// canaries; the current one, while its canaries wait for promotion, by
// reverting the job to the version the outgoing deployment runs (whose
// allocations were never touched); otherwise the job is deregistered
// (purge false: Nomad keeps it, stopped, with its versions, until its
// garbage collection).
func (r *Runtime) Stop(ctx context.Context, jobID string) error {
	job, err := r.liveJob(ctx, jobID)
	if err != nil {
		return err
	}
	if job.outgoing {
		return r.promote(ctx, job.Job)
	}
	if d, err := r.awaitingPromotion(ctx, job.Job); err != nil {
		return err
	} else if d != nil {
		return r.revert(ctx, job.Job)
	}
	return r.stop(ctx, *job.ID)
}

// stop deregisters a Nomad job and waits for its allocations to stop.
func (r *Runtime) stop(ctx context.Context, jobID string) error {
	if _, _, err := r.client.Jobs().Deregister(jobID, false, r.write(ctx)); err != nil {
		return r.translate(err, "deregister job "+jobID, "job "+jobID)
	}
	return r.awaitStopped(ctx, jobID)
}

// terminal says whether an allocation has stopped for good.
func terminal(a *api.AllocationListStub) bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// awaitStopped waits with blocking queries until every allocation of the
// job is terminal.
func (r *Runtime) awaitStopped(ctx context.Context, jobID string) error {
	return r.awaitAllocs(ctx, jobID, terminal)
}

// awaitAllocs waits with blocking queries until every allocation of the
// job is done, at most the start timeout (ADAPTER_UNAVAILABLE then). Each
// query blocks at most goneEvery: Nomad does not wake a blocking query on
// the allocations of a job purged meanwhile, and a purged job's are none.
func (r *Runtime) awaitAllocs(ctx context.Context, jobID string, done func(*api.AllocationListStub) bool) error {
	limit := r.startTimeout(ctx)
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var index uint64
	for {
		allocs, meta, err := r.client.Jobs().Allocations(jobID, false, (&api.QueryOptions{WaitIndex: index, WaitTime: min(blockWait, goneEvery)}).WithContext(wctx))
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return errcode.New(errcode.AdapterUnavailable, "nomad job %s did not settle within the start timeout (%s)", jobID, limit).
					WithRemedy("look at `nomad job status %s` for what holds its allocations", jobID)
			}
			return r.translate(err, "read the allocations of job "+jobID, "job "+jobID)
		}
		if !slices.ContainsFunc(allocs, func(a *api.AllocationListStub) bool { return !done(a) }) {
			return nil
		}
		index = max(index, meta.LastIndex, 1)
	}
}

// Restart restarts each workload's running allocation in place, in the
// job's start order, through the allocation restart API, each once the
// one before runs again (its restart counted and its task running) or the
// start timeout passed. NOT_FOUND for a job Nomad does not run.
func (r *Runtime) Restart(ctx context.Context, jobID string) error {
	job, err := r.liveJob(ctx, jobID)
	if err != nil {
		return err
	}
	if job.outgoing {
		// Its replacement is starting: restarting it now would only
		// delay what the deploy stops.
		return notFound(jobID)
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return r.translate(err, "read the allocations of job "+*job.ID, "job "+jobID)
	}
	for _, g := range groups(job.Job) {
		stub := job.pick(allocs, g)
		if stub == nil || stub.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		var before uint64
		if ts := taskOf(stub.TaskStates, g); ts != nil {
			before = ts.Restarts
		}
		if err := r.client.Allocations().Restart(&api.Allocation{ID: stub.ID, NodeID: stub.NodeID}, "", r.query(ctx)); err != nil {
			return r.translate(err, "restart allocation "+stub.ID, "allocation "+stub.ID)
		}
		if err := r.awaitRestarted(ctx, stub.ID, g, before); err != nil {
			return err
		}
	}
	return nil
}

// awaitRestarted waits with blocking queries on the allocation until its
// task counts a restart more than before and runs, or the start timeout
// (startTimeout); NOT_FOUND when the allocation or its job is stopped
// meanwhile, or the job purged, behind svc's back (checked at least every
// goneEvery).
func (r *Runtime) awaitRestarted(ctx context.Context, allocID, workload string, before uint64) error {
	wctx, cancel := context.WithTimeout(ctx, r.startTimeout(ctx))
	defer cancel()
	var index uint64
	for {
		a, meta, err := r.client.Allocations().Info(allocID, (&api.QueryOptions{WaitIndex: index, WaitTime: goneEvery}).WithContext(wctx))
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("restart %s: %w", workload, cerr)
			}
			if wctx.Err() != nil {
				return nil
			}
			return r.translate(err, "read allocation "+allocID, "allocation "+allocID)
		}
		if a.DesiredStatus != api.AllocDesiredStatusRun {
			return errcode.New(errcode.NotFound, "allocation %s of workload %s was stopped while it restarted", allocID, workload).
				WithDetail("workload", workload)
		}
		if ts := taskOf(a.TaskStates, workload); ts == nil || (ts.Restarts > before && ts.State == "running") || ts.State == "dead" {
			return nil
		}
		if err := r.gone(wctx, a.JobID, workload); err != nil {
			return err
		}
		index = max(index, meta.LastIndex, 1)
	}
}

// Logs returns the workload's most recent output from its newest
// allocation, at most its log cap in bytes: Nomad keeps stdout and stderr
// in separate files without timestamps, so they cannot be merged by time.
// Logs returns the stdout lines first, then the stderr lines, each oldest
// first; stderr takes at most half the cap (the most recent of it) and
// stdout the rest. A line cut by the cap is dropped. A stopped job's logs
// are read while Nomad still has its allocations.
func (r *Runtime) Logs(ctx context.Context, jobID, workload string) ([]string, error) {
	job, err := r.readJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	var task *api.Task
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == workload && len(tg.Tasks) > 0 {
			task = tg.Tasks[0]
		}
	}
	if task == nil {
		return nil, workloadNotFound(jobID, workload)
	}
	capBytes := r.cfg.LogCapBytes
	if n, err := strconv.ParseInt(task.Meta[metaLogCapBytes], 10, 64); err == nil && n > 0 {
		capBytes = n
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the allocations of job "+*job.ID, "job "+jobID)
	}
	stub := job.pick(allocs, workload)
	if stub == nil {
		return []string{}, nil
	}
	stderr, err := r.logTail(ctx, stub.ID, task.Name, "stderr", capBytes/2)
	if err != nil {
		return nil, err
	}
	used := 0
	for _, l := range stderr {
		used += len(l) + 1
	}
	stdout, err := r.logTail(ctx, stub.ID, task.Name, "stdout", capBytes-int64(used))
	if err != nil {
		return nil, err
	}
	return append(stdout, stderr...), nil
}

// logTail reads the last n bytes of a task's stream as whole lines (and
// the byte before them, to tell whether the first is whole).
func (r *Runtime) logTail(ctx context.Context, allocID, task, stream string, n int64) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	q := r.query(ctx)
	q.Params = map[string]string{"task": task, "type": stream, "plain": "true", "origin": "end", "offset": strconv.FormatInt(n+1, 10)}
	body, err := r.client.Raw().Response("/v1/client/fs/logs/"+allocID, q)
	if err != nil {
		return nil, r.translate(err, "read the logs of allocation "+allocID, "allocation "+allocID)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, n+2))
	if err != nil {
		return nil, r.translate(err, "read the logs of allocation "+allocID, "allocation "+allocID)
	}
	return tailLines(b, n), nil
}

// tailLines splits the last n bytes of a log into lines. b may hold one
// byte more, before them: when that byte ends a line, the first kept line
// is whole; otherwise the cut fell inside it and it is dropped.
func tailLines(b []byte, n int64) []string {
	cut := false
	if int64(len(b)) > n {
		cut = b[int64(len(b))-n-1] != '\n'
		b = b[int64(len(b))-n:]
	}
	s := strings.TrimSuffix(string(b), "\n")
	lines := strings.Split(s, "\n")
	if cut {
		lines = lines[1:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return []string{}
	}
	return lines
}

// Discard deletes the stopped job's slot credentials from Vault; what its
// workloads wrote is in their allocation directories, which Nomad
// collects with the job. STATE_INVALID while the job runs; a job Nomad no
// longer knows is no error. An earlier deployment of the app's job has
// its credentials deleted as its version read them.
func (r *Runtime) Discard(ctx context.Context, jobID string) error {
	job, err := r.stoppedJob(ctx, jobID, "discarding it")
	if job == nil || err != nil {
		return err
	}
	return r.discardJobSecrets(ctx, job)
}

// stoppedJob reads the Nomad job (or, for an earlier deployment of the
// app's job, the newest version that ran it) of a scheduler job that must
// be stopped before what (STATE_INVALID while it runs); nil and no error
// when Nomad no longer knows it.
func (r *Runtime) stoppedJob(ctx context.Context, jobID, what string) (*api.Job, error) {
	job, current, err := r.resolve(ctx, jobID)
	if errcode.Has(err, errcode.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !current {
		if _, err := r.readJob(ctx, jobID); err == nil {
			return nil, errcode.New(errcode.StateInvalid, "job %q is running: stop it before %s", jobID, what)
		} else if !errcode.Has(err, errcode.NotFound) {
			return nil, err
		}
		return r.versionOf(ctx, *job.ID, jobID, *job.Version)
	}
	if job.Stop == nil || !*job.Stop {
		return nil, errcode.New(errcode.StateInvalid, "job %q is running: stop it before %s", jobID, what)
	}
	return job, nil
}

// RemoveArtifact removes the packed artifact and, when the builder can,
// its build area.
func (r *Runtime) RemoveArtifact(ctx context.Context, art scheduler.Artifact) error {
	if err := r.cfg.Artifacts.Remove(art.ID); err != nil {
		return err
	}
	if p, ok := r.cfg.Builder.(scheduler.Pruner); ok {
		return p.RemoveArtifact(ctx, art)
	}
	return nil
}

// RemoveJobLogs purges a stopped job from Nomad: its allocations, and
// their logs, go with it. STATE_INVALID while the job runs; a job Nomad
// no longer knows is no error. An earlier deployment of the app's job
// only has its slot credentials deleted: the job, its versions and its
// current deployment are the app's, and Nomad collects the old
// allocations itself.
func (r *Runtime) RemoveJobLogs(ctx context.Context, jobID string) error {
	job, err := r.stoppedJob(ctx, jobID, "removing its logs")
	if job == nil || err != nil {
		return err
	}
	if err := r.discardJobSecrets(ctx, job); err != nil {
		return err
	}
	if job.Meta[jobtemplates.MetaDeploymentID] != jobID {
		return nil
	}
	if cur, _, err := r.client.Jobs().Info(*job.ID, r.query(ctx)); err != nil || cur.Meta[jobtemplates.MetaDeploymentID] != jobID {
		return nil // a version of the app's job: not ours to purge
	}
	if _, _, err := r.client.Jobs().Deregister(*job.ID, true, r.write(ctx)); err != nil {
		return r.translate(err, "purge job "+jobID, "job "+jobID)
	}
	return nil
}
