package nomad

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// One Nomad job per app. The scheduler names a job after its deployment
// (one scheduler job per deployment, the previous one stopped once the
// new one serves); Nomad runs each app as one job, svc-<slug>
// (jobtemplates.AppJobID), whose versions are the app's deployments. This
// file maps the one onto the other:
//
//   - a scheduler job is the app's Nomad job while the job's current
//     version runs its deployment (meta deployment_id): "current";
//   - while a new version's canaries run beside the allocations of the
//     version before (meta previous_deployment_id names its deployment),
//     the previous deployment is "outgoing": its status, logs and exec
//     are those allocations';
//   - any other deployment of the app is gone (NOT_FOUND), as a stopped
//     job is on every runtime.
//
// So Stop of the outgoing deployment promotes the canaries (what stopping
// the previous job means once the new one serves), Stop of the current
// one while canaries wait reverts the job to the version that ran before
// (the deploy failed: the previous allocations were never touched), and
// Stop of the current one otherwise deregisters the app's job. Restarting
// or purging an old deployment never reaches the app's job.
//
// A job of an earlier svc, svc-<slug>-<deployment>, is found the same way
// (by its meta) and is current for its deployment: the deploy that
// follows registers the app's job beside it, and the scheduler stops it
// once the new job serves, as it stops any previous job.

// nomadJob is the Nomad job a scheduler job resolved to, and how.
type nomadJob struct {
	*api.Job
	// outgoing says the scheduler job is the previous deployment of the
	// app's job, whose allocations serve until the canaries of the
	// current version are promoted.
	outgoing bool
}

// pick returns the group's allocation that runs the scheduler job: the
// newest meant to run (a canary before the one it replaces); for an
// outgoing deployment, the newest meant to run that is neither a canary
// nor of the current version. nil when there is none.
func (j *nomadJob) pick(allocs []*api.AllocationListStub, group string) *api.AllocationListStub {
	if !j.outgoing {
		return newest(allocs, group)
	}
	var best *api.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup != group || a.DesiredStatus != api.AllocDesiredStatusRun || terminal(a) || !olderThan(a, j.Job) {
			continue
		}
		if best == nil || a.CreateIndex > best.CreateIndex {
			best = a
		}
	}
	return best
}

// olderThan says whether an allocation runs a version before the job's
// current one (and is not a canary of it).
func olderThan(a *api.AllocationListStub, job *api.Job) bool {
	if a.DeploymentStatus != nil && a.DeploymentStatus.Canary {
		return false
	}
	return job.Version == nil || a.JobVersion < *job.Version
}

// role says how a Nomad job's current version relates to a deployment:
// current, outgoing (its previous deployment), or neither.
func role(job *api.Job, depID string) (current, previous bool) {
	if job.Meta[jobtemplates.MetaManagedBy] != jobtemplates.ManagedBy {
		return false, false
	}
	return job.Meta[jobtemplates.MetaDeploymentID] == depID, job.Meta[jobtemplates.MetaPreviousDeployment] == depID
}

// resolve reads the Nomad job of a scheduler job, stopped or not, and
// says whether the scheduler job is its current deployment; for its
// previous one (outgoing or no longer running) current is false. NOT_FOUND
// when no job of Nomad's names the deployment.
func (r *Runtime) resolve(ctx context.Context, jobID string) (*api.Job, bool, error) {
	if !scheduler.PlainName(jobID) {
		return nil, false, notFound(jobID)
	}
	nid, err := r.nomadID(ctx, jobID)
	if err != nil {
		return nil, false, err
	}
	if nid == "" {
		return nil, false, notFound(jobID)
	}
	job, _, err := r.client.Jobs().Info(nid, r.query(ctx))
	if statusOf(err) == 404 {
		r.forget(jobID)
		return nil, false, notFound(jobID)
	}
	if err != nil {
		return nil, false, r.translate(err, "read job "+nid, "job "+jobID)
	}
	current, previous := role(job, jobID)
	if !current && !previous {
		// The app's job moved on past this deployment.
		r.forget(jobID)
		return nil, false, notFound(jobID)
	}
	return job, current, nil
}

// readJob reads the Nomad job running a scheduler job, stopped or not;
// NOT_FOUND when Nomad does not know it, or when it is an earlier
// deployment of the app's job whose allocations no longer run.
func (r *Runtime) readJob(ctx context.Context, jobID string) (*nomadJob, error) {
	job, current, err := r.resolve(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if current {
		return &nomadJob{Job: job}, nil
	}
	h := &nomadJob{Job: job, outgoing: true}
	if job.Stop != nil && *job.Stop {
		return nil, notFound(jobID)
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the allocations of job "+*job.ID, "job "+jobID)
	}
	for _, g := range groups(job) {
		if h.pick(allocs, g) != nil {
			return h, nil
		}
	}
	return nil, notFound(jobID)
}

// liveJob reads the job; NOT_FOUND when Nomad does not know it or it was
// stopped (deregistered): a stopped job is forgotten, as the process
// runtime forgets it.
func (r *Runtime) liveJob(ctx context.Context, jobID string) (*nomadJob, error) {
	job, err := r.readJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if job.Stop != nil && *job.Stop {
		return nil, notFound(jobID)
	}
	return job, nil
}

// awaitingPromotion returns the job's latest deployment when it is of the
// job's current version, still running, and has canaries that wait for
// promotion; nil otherwise.
func (r *Runtime) awaitingPromotion(ctx context.Context, job *api.Job) (*api.Deployment, error) {
	d, _, err := r.client.Jobs().LatestDeployment(*job.ID, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the deployment of job "+*job.ID, "job "+*job.ID)
	}
	if d == nil || d.Status != "running" || job.Version == nil || d.JobVersion != *job.Version {
		return nil, nil
	}
	for _, st := range d.TaskGroups {
		if st.DesiredCanaries > 0 && !st.Promoted {
			return d, nil
		}
	}
	return nil, nil
}

// promote promotes the canaries the job's current version waits with
// (the new release serves: the previous deployment's allocations stop)
// and waits until only the current version's allocations run.
func (r *Runtime) promote(ctx context.Context, job *api.Job) error {
	d, err := r.awaitingPromotion(ctx, job)
	if err != nil {
		return err
	}
	if d != nil {
		if _, _, err := r.client.Deployments().PromoteAll(d.ID, r.write(ctx)); err != nil {
			return r.translate(err, "promote deployment "+d.ID+" of job "+*job.ID, "deployment "+d.ID)
		}
	}
	return r.awaitSettled(ctx, *job.ID, *job.Version)
}

// revert registers again the newest version of the job that ran the
// deployment it names as previous, enforcing that the job is still at the
// version read (an operator's change meanwhile is not overwritten), and
// waits until only that version's allocations run: the canaries go, the
// previous allocations stay as they were (an in-place update).
func (r *Runtime) revert(ctx context.Context, job *api.Job) error {
	prev := job.Meta[jobtemplates.MetaPreviousDeployment]
	target, err := r.versionOf(ctx, *job.ID, prev, *job.Version)
	if err != nil {
		return err
	}
	if target == nil {
		return r.stop(ctx, *job.ID)
	}
	resp, _, err := r.client.Jobs().Revert(*job.ID, *target.Version, job.Version, r.write(ctx), "", "")
	if err != nil {
		return r.translate(err, fmt.Sprintf("revert job %s to version %d", *job.ID, *target.Version), "job "+*job.ID)
	}
	cur, _, err := r.client.Jobs().Info(*job.ID, r.query(ctx))
	if err != nil {
		return r.translate(err, "read job "+*job.ID, "job "+*job.ID)
	}
	if cur.JobModifyIndex == nil || *cur.JobModifyIndex != resp.JobModifyIndex {
		return nil // changed again meanwhile: not ours to wait for
	}
	return r.awaitSettled(ctx, *job.ID, *cur.Version)
}

// versionOf returns the newest version of the job before the version
// before that ran the deployment; nil when Nomad keeps none.
func (r *Runtime) versionOf(ctx context.Context, nid, depID string, before uint64) (*api.Job, error) {
	if depID == "" {
		return nil, nil
	}
	versions, _, _, err := r.client.Jobs().Versions(nid, false, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the versions of job "+nid, "job "+nid)
	}
	var best *api.Job
	for _, v := range versions {
		if v.Version == nil || *v.Version >= before || v.Meta[jobtemplates.MetaDeploymentID] != depID || (v.Stop != nil && *v.Stop) {
			continue
		}
		if best == nil || *v.Version > *best.Version {
			best = v
		}
	}
	return best, nil
}

// awaitSettled waits with blocking queries until every allocation of the
// job that has not stopped runs the version.
func (r *Runtime) awaitSettled(ctx context.Context, nid string, version uint64) error {
	return r.awaitAllocs(ctx, nid, func(a *api.AllocationListStub) bool {
		return terminal(a) || (a.JobVersion == version && a.DesiredStatus == api.AllocDesiredStatusRun)
	})
}

// tag tags the job's version with the deployment it runs (Nomad's version
// tags: `nomad job history` and the UI name it), moving the tag from an
// older version that ran the same deployment (a run again). The job must
// still be at the registration that made the version (modifyIndex). A
// failure is logged: the deployment runs regardless.
func (r *Runtime) tag(ctx context.Context, nid, depID string, modifyIndex uint64) {
	job, _, err := r.client.Jobs().Info(nid, r.query(ctx))
	if err != nil || job.JobModifyIndex == nil || *job.JobModifyIndex != modifyIndex || job.Version == nil {
		return
	}
	desc := "svc deployment " + depID
	if rev := job.Meta[jobtemplates.MetaSpecRevision]; rev != "" {
		desc += " (spec revision " + rev + ")"
	}
	_, err = r.client.Jobs().TagVersion(nid, *job.Version, depID, desc, r.write(ctx))
	if err != nil {
		if old, verr := r.versionTagged(ctx, nid, depID); verr == nil && old != nil && *old.Version != *job.Version {
			if _, err = r.client.Jobs().UntagVersion(nid, depID, r.write(ctx)); err == nil {
				_, err = r.client.Jobs().TagVersion(nid, *job.Version, depID, desc, r.write(ctx))
			}
		}
	}
	if err != nil {
		r.log.Warn("nomad: tag the job's version with its deployment", "nomad_job", nid, "deployment", depID, "err", errcode.MessageOf(r.translate(err, "tag", "job "+nid)))
	}
}

// versionTagged returns the version of the job that carries the tag.
func (r *Runtime) versionTagged(ctx context.Context, nid, name string) (*api.Job, error) {
	versions, _, _, err := r.client.Jobs().Versions(nid, false, r.query(ctx))
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		if v.VersionTag != nil && v.VersionTag.Name == name {
			return v, nil
		}
	}
	return nil, nil
}
