package nomad

import (
	"context"
	"net"
	"strconv"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/scheduler"
)

// groups lists a job's group names in the job's order (the start order).
func groups(job *api.Job) []string {
	out := make([]string, 0, len(job.TaskGroups))
	for _, tg := range job.TaskGroups {
		if tg.Name != nil {
			out = append(out, *tg.Name)
		}
	}
	return out
}

// Status reports each workload's state from its group's newest
// allocation: running, restarts and the last exit code from its task
// state and events, Dead when Nomad stopped restarting it (dead and
// failed after the restart policy), the address of its "http" port, and
// its health (see healthOf). NOT_FOUND for a job Nomad does not run.
func (r *Runtime) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	job, err := r.liveJob(ctx, jobID)
	if err != nil {
		return scheduler.JobStatus{}, err
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return scheduler.JobStatus{}, r.translate(err, "read the allocations of job "+*job.ID, "job "+jobID)
	}
	st := scheduler.JobStatus{ID: jobID, Workloads: map[string]scheduler.WorkloadStatus{}}
	var unplaced map[string]*api.AllocationMetric
	for _, g := range groups(job.Job) {
		stub := job.pick(allocs, g)
		if stub == nil {
			if unplaced == nil {
				unplaced = r.unplaced(ctx, *job.ID)
			}
			ws := scheduler.WorkloadStatus{Health: scheduler.HealthUnknown}
			if m, ok := unplaced[g]; ok {
				ws.Problem = scheduler.ProblemOf(placementFailure(*job.ID, g, m))
			}
			st.Workloads[g] = ws
			continue
		}
		a, _, err := r.client.Allocations().Info(stub.ID, r.query(ctx))
		if err != nil {
			return scheduler.JobStatus{}, r.translate(err, "read allocation "+stub.ID, "allocation "+stub.ID)
		}
		var checks api.AllocCheckStatuses
		if a.ClientStatus == api.AllocClientStatusRunning {
			// Nomad's own checks (provider "nomad"); a job whose services
			// Consul checks has none here, and deployment health stands in.
			checks, _ = r.client.Allocations().Checks(a.ID, r.query(ctx))
		}
		st.Workloads[g] = workloadStatus(a, g, checks)
	}
	return st, nil
}

// workloadStatus maps an allocation onto a workload's status.
func workloadStatus(a *api.Allocation, workload string, checks api.AllocCheckStatuses) scheduler.WorkloadStatus {
	ws := scheduler.WorkloadStatus{Health: scheduler.HealthUnknown, Address: addressOf(a)}
	ts := taskOf(a.TaskStates, workload)
	if ts == nil {
		return ws
	}
	ws.Running = ts.State == "running" && a.ClientStatus == api.AllocClientStatusRunning
	ws.Restarts = int(ts.Restarts)
	ws.Dead = ts.State == "dead" && ts.Failed
	for _, ev := range ts.Events {
		if ev.Type == api.TaskTerminated {
			code := exitCodeOf(ev)
			ws.ExitCode = &code
		}
	}
	ws.Health = healthOf(a, ts, checks)
	if e := taskFailure(workload, ts); e != nil && !ws.Running {
		ws.Problem = scheduler.ProblemOf(e)
	}
	return ws
}

// unplaced is the groups of a job Nomad's blocked evaluation still waits
// to place, with why (none when the job has no blocked evaluation, or
// its evaluations cannot be read: status then just lacks the reason).
func (r *Runtime) unplaced(ctx context.Context, nomadJobID string) map[string]*api.AllocationMetric {
	out := map[string]*api.AllocationMetric{}
	evals, _, err := r.client.Jobs().Evaluations(nomadJobID, r.query(ctx))
	if err != nil {
		return out
	}
	for _, ev := range evals {
		if ev.Status != api.EvalStatusBlocked {
			continue
		}
		for g, m := range ev.FailedTGAllocs {
			if _, seen := out[g]; !seen {
				out[g] = m
			}
		}
	}
	return out
}

// healthOf is a workload's health: failing when its task is dead; when it
// runs, from Nomad's checks of the allocation (all passing: passing; any
// failing: failing; else unknown), or without checks from the
// allocation's deployment health; unknown otherwise.
func healthOf(a *api.Allocation, ts *api.TaskState, checks api.AllocCheckStatuses) string {
	if ts.State == "dead" {
		return scheduler.HealthFailing
	}
	if ts.State != "running" {
		return scheduler.HealthUnknown
	}
	if len(checks) > 0 {
		passing := true
		for _, c := range checks {
			switch c.Status {
			case "failure":
				return scheduler.HealthFailing
			case "success":
			default:
				passing = false
			}
		}
		if passing {
			return scheduler.HealthPassing
		}
		return scheduler.HealthUnknown
	}
	if d := a.DeploymentStatus; d != nil && d.Healthy != nil {
		if *d.Healthy {
			return scheduler.HealthPassing
		}
		return scheduler.HealthFailing
	}
	return scheduler.HealthUnknown
}

// addressOf is host:port of the allocation's "http" port, "" without one.
func addressOf(a *api.Allocation) string {
	if a.AllocatedResources == nil {
		return ""
	}
	for _, p := range a.AllocatedResources.Shared.Ports {
		if p.Label == portLabel && p.Value > 0 {
			return net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value))
		}
	}
	for _, n := range a.AllocatedResources.Shared.Networks {
		for _, ports := range [][]api.Port{n.ReservedPorts, n.DynamicPorts} {
			for _, p := range ports {
				if p.Label == portLabel && p.Value > 0 {
					return net.JoinHostPort(n.IP, strconv.Itoa(p.Value))
				}
			}
		}
	}
	return ""
}
