package fakenomad

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// What Nomad keeps of a job besides its current version, as far as
// scheduler/nomad reads it: every version (GET /v1/job/<id>/versions,
// newest first, with its version tag), the latest deployment (GET
// /v1/job/<id>/deployment; canaries placed beside a changed group's
// running allocation when the update block asks for them, promoted with
// POST /v1/deployment/promote/<id>), reverts to an earlier version, and
// each registration's evaluation with the groups it could not place
// (GET /v1/evaluation/<id>, GET /v1/job/<id>/evaluations; a newer
// evaluation cancels the job's blocked one, as Nomad's does).

// Nomad's texts for the refusals scheduler/nomad may meet (it reads none
// of them: they are for the logs).
const (
	errTagElsewhere = "tag %q already exists on a different version of job %q"
	errNoVersion    = "job %q version %d not found"
	errPriorVersion = "Current job has version %d; enforcing version %d"
)

// canaryCount is the update block's canary count (a group's overrides
// the job's).
func canaryCount(job, group *api.UpdateStrategy) int {
	n := 0
	for _, u := range []*api.UpdateStrategy{job, group} {
		if u != nil && u.Canary != nil {
			n = *u.Canary
		}
	}
	return n
}

// recordVersionLocked keeps a copy of the job's version.
func (s *Server) recordVersionLocked(key string, job *api.Job) {
	s.versions[key] = append(s.versions[key], copyJob(job))
}

// versionLocked returns the stored copy of the job's version v.
func (s *Server) versionLocked(key string, v uint64) *api.Job {
	for _, j := range s.versions[key] {
		if *j.Version == v {
			return j
		}
	}
	return nil
}

// evaluateLocked records the evaluation of a registration: complete, with
// the groups it could not place (and, as Nomad does then, a blocked
// evaluation waiting for room).
func (s *Server) evaluateLocked(job *api.Job, trigger string, idx uint64, failed map[string]*api.AllocationMetric) string {
	ev := &api.Evaluation{ID: newID(), Namespace: *job.Namespace, JobID: *job.ID, Type: *job.Type, TriggeredBy: trigger,
		Status: "complete", JobModifyIndex: *job.JobModifyIndex, CreateIndex: idx, ModifyIndex: idx}
	for _, old := range s.evals {
		// Nomad keeps one blocked evaluation per job: a newer evaluation
		// cancels the one before.
		if old.JobID == ev.JobID && old.Namespace == ev.Namespace && old.Status == "blocked" {
			old.Status, old.StatusDescription, old.ModifyIndex = "canceled", "evaluation for a newer job version", idx
		}
	}
	if len(failed) > 0 {
		ev.FailedTGAllocs = failed
		blocked := &api.Evaluation{ID: newID(), Namespace: ev.Namespace, JobID: ev.JobID, Type: ev.Type, TriggeredBy: "queued-allocs",
			Status: "blocked", PreviousEval: ev.ID, FailedTGAllocs: failed, JobModifyIndex: ev.JobModifyIndex, CreateIndex: idx, ModifyIndex: idx}
		ev.BlockedEval = blocked.ID
		s.evals[blocked.ID] = blocked
	}
	s.evals[ev.ID] = ev
	return ev.ID
}

func (s *Server) evalGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingQuery(w, r, "evals", func() (any, uint64, int, string) {
		ev := s.evals[id]
		if ev == nil {
			return nil, 0, http.StatusNotFound, "eval not found"
		}
		return ev, ev.ModifyIndex, 0, ""
	})
}

// jobEvaluations lists a job's evaluations, newest first, as Nomad does
// (an empty list for a job it never evaluated).
func (s *Server) jobEvaluations(w http.ResponseWriter, r *http.Request) {
	ns, id := namespaceOf(r, nil), r.PathValue("id")
	s.blockingQuery(w, r, "evals", func() (any, uint64, int, string) {
		out := []*api.Evaluation{}
		var index uint64
		for _, ev := range s.evals {
			if ev.JobID == id && (ev.Namespace == ns || ev.Namespace == "") {
				out = append(out, ev)
				index = max(index, ev.ModifyIndex)
			}
		}
		slices.SortFunc(out, func(a, b *api.Evaluation) int { return cmp.Compare(b.CreateIndex, a.CreateIndex) })
		return out, index, 0, ""
	})
}

func (s *Server) jobVersions(w http.ResponseWriter, r *http.Request) {
	key := jobKey(namespaceOf(r, nil), r.PathValue("id"))
	s.blockingQuery(w, r, "jobs", func() (any, uint64, int, string) {
		vs := s.versions[key]
		if len(vs) == 0 {
			return nil, 0, http.StatusNotFound, "job versions not found"
		}
		out := api.JobVersionsResponse{}
		for i := len(vs) - 1; i >= 0; i-- {
			out.Versions = append(out.Versions, vs[i])
		}
		return out, 0, 0, ""
	})
}

// jobTag tags a version (PUT) or takes a tag off (DELETE), as Nomad does:
// a tag names one version of the job; tagging the version it names again
// replaces its description.
func (s *Server) jobTag(w http.ResponseWriter, r *http.Request) {
	ns, id, name := namespaceOf(r, nil), r.PathValue("id"), r.PathValue("name")
	key := jobKey(ns, id)
	var req api.TagVersionRequest
	if r.Method == http.MethodPut {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			codedError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var target *api.Job
	for _, v := range s.versions[key] {
		tagged := v.VersionTag != nil && v.VersionTag.Name == name
		switch {
		case r.Method == http.MethodDelete && tagged:
			target = v
		case r.Method == http.MethodPut && *v.Version == req.Version:
			target = v
		case r.Method == http.MethodPut && tagged:
			codedError(w, http.StatusInternalServerError, fmt.Sprintf(errTagElsewhere, name, id))
			return
		}
	}
	if target == nil {
		if r.Method == http.MethodDelete {
			codedError(w, http.StatusInternalServerError, fmt.Sprintf("tag %q not found on job %q", name, id))
			return
		}
		codedError(w, http.StatusInternalServerError, fmt.Sprintf(errNoVersion, id, req.Version))
		return
	}
	idx := s.bumpLocked("jobs")
	tag := &api.JobVersionTag{Name: name, Description: req.Description, TaggedTime: time.Now().UnixNano()}
	if r.Method == http.MethodDelete {
		tag = nil
	}
	target.VersionTag = tag
	if cur := s.jobs[key]; cur != nil && *cur.Version == *target.Version {
		cur.VersionTag = tag
	}
	if tag == nil {
		s.writeJSON(w, idx, struct{}{})
		return
	}
	s.writeJSON(w, idx, tag)
}

// jobRevert registers an earlier version of the job again, as a new
// version (EnforcePriorVersion, when set, must name the current one).
func (s *Server) jobRevert(w http.ResponseWriter, r *http.Request) {
	var req api.JobRevertRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	key := jobKey(namespaceOf(r, nil), r.PathValue("id"))
	s.mu.Lock()
	cur := s.jobs[key]
	if cur == nil {
		s.mu.Unlock()
		codedError(w, http.StatusNotFound, "job not found")
		return
	}
	if req.EnforcePriorVersion != nil && *req.EnforcePriorVersion != *cur.Version {
		s.mu.Unlock()
		codedError(w, http.StatusInternalServerError, fmt.Sprintf(errPriorVersion, *cur.Version, *req.EnforcePriorVersion))
		return
	}
	old := s.versionLocked(key, req.JobVersion)
	if old == nil || req.JobVersion == *cur.Version {
		s.mu.Unlock()
		codedError(w, http.StatusInternalServerError, fmt.Sprintf(errNoVersion, r.PathValue("id"), req.JobVersion))
		return
	}
	job := copyJob(old)
	job.VersionTag = nil
	idx, evalID := s.registerLocked(key, job, cur)
	s.mu.Unlock()
	s.writeJSON(w, idx, api.JobRegisterResponse{EvalID: evalID, EvalCreateIndex: idx, JobModifyIndex: idx})
}

func (s *Server) jobDeployment(w http.ResponseWriter, r *http.Request) {
	key := jobKey(namespaceOf(r, nil), r.PathValue("id"))
	s.blockingQuery(w, r, "deployments", func() (any, uint64, int, string) {
		d := s.deployments[key]
		if d == nil {
			return nil, 0, 0, ""
		}
		return s.deploymentLocked(d), d.ModifyIndex, 0, ""
	})
}

// deploymentLocked is the deployment with its health counts and status
// as of now: running while it waits for allocations to be healthy or for
// its canaries' promotion, successful once they are (Nomad does not fail
// one before its progress deadline, which the fake does not keep).
func (s *Server) deploymentLocked(d *api.Deployment) *api.Deployment {
	out := *d
	out.TaskGroups = map[string]*api.DeploymentState{}
	done := d.Status == "running"
	for name, st := range d.TaskGroups {
		c := *st
		c.PlacedAllocs, c.HealthyAllocs, c.UnhealthyAllocs = 0, 0, 0
		for _, a := range s.allocs {
			if a.deploymentID != d.ID || a.group != name {
				continue
			}
			c.PlacedAllocs++
			switch {
			case a.healthy == nil:
			case *a.healthy:
				c.HealthyAllocs++
			default:
				c.UnhealthyAllocs++
			}
		}
		if c.HealthyAllocs < c.DesiredTotal || (c.DesiredCanaries > 0 && !c.Promoted) {
			done = false
		}
		out.TaskGroups[name] = &c
	}
	if done {
		out.Status, out.StatusDescription = "successful", "Deployment completed successfully"
	} else if out.Status == "running" {
		for _, st := range out.TaskGroups {
			if st.DesiredCanaries > 0 && !st.Promoted {
				out.StatusDescription = "Deployment is running but requires manual promotion"
			}
		}
	}
	return &out
}

// deploymentPromote promotes a deployment's canaries, as Nomad does: only
// the latest deployment, running, with every canary healthy; the groups'
// other allocations are then stopped and the canaries are the group's.
func (s *Server) deploymentPromote(w http.ResponseWriter, r *http.Request) {
	var req api.DeploymentPromoteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	var d *api.Deployment
	for _, x := range s.deployments {
		if x.ID == id {
			d = x
		}
	}
	if d == nil {
		codedError(w, http.StatusNotFound, "deployment not found")
		return
	}
	if d.Status != "running" {
		codedError(w, http.StatusInternalServerError, fmt.Sprintf("can't promote terminal deployment: status %q", d.Status))
		return
	}
	for name, st := range d.TaskGroups {
		healthy := 0
		for _, a := range s.allocs {
			if a.deploymentID == d.ID && a.group == name && a.canary && a.healthy != nil && *a.healthy {
				healthy++
			}
		}
		if st.DesiredCanaries > 0 && healthy < st.DesiredCanaries {
			codedError(w, http.StatusInternalServerError, fmt.Sprintf("Task group %q has %d/%d healthy allocations", name, healthy, st.DesiredCanaries))
			return
		}
	}
	idx := s.bumpLocked("deployments", "allocs", "evals")
	for name, st := range d.TaskGroups {
		if st.DesiredCanaries == 0 {
			continue
		}
		st.Promoted = true
		for _, a := range s.allocs {
			if a.namespace != d.Namespace || a.jobID != d.JobID || a.group != name || a.desired != "run" {
				continue
			}
			if a.deploymentID == d.ID && a.canary {
				a.canary, a.modifyIndex = false, idx
			} else {
				a.stopLocked("alloc not needed due to job update")
			}
		}
	}
	d.ModifyIndex = idx
	s.writeJSON(w, idx, api.DeploymentUpdateResponse{EvalID: newID(), EvalCreateIndex: idx, DeploymentModifyIndex: idx})
}
