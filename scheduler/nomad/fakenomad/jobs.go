package fakenomad

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// registerEnforceIndexErrPrefix is Nomad's text for a refused
// EnforceIndex register (nomad/structs.RegisterEnforceIndexErrPrefix).
const registerEnforceIndexErrPrefix = "Enforcing job modify index"

// enforceIndex is Nomad's structs.(*Job).EnforceIndex: a register with
// EnforceIndex must name the job's current JobModifyIndex, or 0 for a job
// that does not exist.
func enforceIndex(existing *api.Job, index uint64) error {
	if existing != nil {
		if index == 0 {
			return fmt.Errorf("%s 0: job already exists", registerEnforceIndexErrPrefix)
		} else if index != *existing.JobModifyIndex {
			return fmt.Errorf("%s %d: job exists with conflicting job modify index: %d",
				registerEnforceIndexErrPrefix, index, *existing.JobModifyIndex)
		}
	} else if index != 0 {
		return fmt.Errorf("%s %d: job does not exist", registerEnforceIndexErrPrefix, index)
	}
	return nil
}

func namespaceOf(r *http.Request, job *api.Job) string {
	if job != nil && job.Namespace != nil && *job.Namespace != "" {
		return *job.Namespace
	}
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return "default"
}

func jobKey(ns, id string) string { return ns + "/" + id }

// validate checks what the fake needs of a job, as Nomad's validation
// would refuse it (500, its multierror text).
func validate(job *api.Job) error {
	var errs []string
	if job.ID == nil || *job.ID == "" {
		errs = append(errs, "Missing job ID")
	}
	if len(job.TaskGroups) == 0 {
		errs = append(errs, "Missing job task groups")
	}
	seen := map[string]bool{}
	for i, tg := range job.TaskGroups {
		name := ""
		if tg.Name != nil {
			name = *tg.Name
		}
		if name == "" {
			errs = append(errs, fmt.Sprintf("Job task group %d missing name", i+1))
		} else if seen[name] {
			errs = append(errs, fmt.Sprintf("Job task group %d redefines '%s' from group %d", i+1, name, i))
		}
		seen[name] = true
		if len(tg.Tasks) == 0 {
			errs = append(errs, fmt.Sprintf("Task group %s has no tasks", name))
		}
		for _, t := range tg.Tasks {
			if t.Driver == "" {
				errs = append(errs, fmt.Sprintf("Task %s missing driver", t.Name))
			}
			if cmd, _ := t.Config["command"].(string); cmd == "" {
				errs = append(errs, fmt.Sprintf("Task %s: missing required attribute \"command\"", t.Name))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d error(s) occurred:\n\n* %s", len(errs), strings.Join(errs, "\n* "))
}

// copyJob deep-copies a job through its JSON form.
func copyJob(j *api.Job) *api.Job {
	b, _ := json.Marshal(j)
	var out api.Job
	_ = json.Unmarshal(b, &out)
	return &out
}

func ptr[T any](v T) *T { return &v }

func (s *Server) jobRegister(w http.ResponseWriter, r *http.Request) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Job == nil {
		codedError(w, http.StatusBadRequest, "Job must be specified")
		return
	}
	if err := validate(req.Job); err != nil {
		codedError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ns := namespaceOf(r, req.Job)
	key := jobKey(ns, *req.Job.ID)
	s.mu.Lock()
	existing := s.jobs[key]
	if req.EnforceIndex {
		if err := enforceIndex(existing, req.JobModifyIndex); err != nil {
			idx := s.index
			s.mu.Unlock()
			setMeta(w, idx)
			codedError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	idx, evalID := s.registerLocked(key, copyJob(req.Job), existing)
	s.mu.Unlock()
	s.writeJSON(w, idx, api.JobRegisterResponse{EvalID: evalID, EvalCreateIndex: idx, JobModifyIndex: idx})
}

// registerLocked makes job the current version of the job at key (the
// next after existing), keeps the version, places it and evaluates it.
func (s *Server) registerLocked(key string, job *api.Job, existing *api.Job) (uint64, string) {
	idx := s.bumpLocked("jobs", "evals", "deployments")
	ns, _, _ := strings.Cut(key, "/")
	job.Namespace = ptr(ns)
	if job.Region == nil || *job.Region == "" {
		job.Region = ptr("global")
	}
	if job.Type == nil || *job.Type == "" {
		job.Type = ptr("service")
	}
	if job.Name == nil || *job.Name == "" {
		job.Name = ptr(*job.ID)
	}
	job.Stop = ptr(false)
	job.Status = ptr("running")
	job.Version = ptr(uint64(0))
	job.CreateIndex = ptr(idx)
	if existing != nil {
		job.Version = ptr(*existing.Version + 1)
		job.CreateIndex = ptr(*existing.CreateIndex)
	}
	job.ModifyIndex, job.JobModifyIndex = ptr(idx), ptr(idx)
	job.SubmitTime = ptr(time.Now().UnixNano())
	job.VersionTag = nil
	s.jobs[key] = job
	s.recordVersionLocked(key, job)
	failed := s.scheduleLocked(job)
	return idx, s.evaluateLocked(job, "job-register", idx, failed)
}

// jobList lists the namespace's jobs (?prefix= on the ID), with their
// meta when ?meta=true.
func (s *Server) jobList(w http.ResponseWriter, r *http.Request) {
	ns := namespaceOf(r, nil)
	prefix := r.URL.Query().Get("prefix")
	withMeta := r.URL.Query().Get("meta") == "true"
	s.blockingQuery(w, r, "jobs", func() (any, uint64, int, string) {
		out := []*api.JobListStub{}
		for _, j := range s.jobs {
			if *j.Namespace != ns || !strings.HasPrefix(*j.ID, prefix) {
				continue
			}
			stub := &api.JobListStub{ID: *j.ID, Name: *j.Name, Namespace: *j.Namespace, Datacenters: j.Datacenters,
				Type: *j.Type, Stop: *j.Stop, Status: *j.Status, CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex,
				JobModifyIndex: *j.JobModifyIndex, SubmitTime: *j.SubmitTime}
			if withMeta {
				stub.Meta = j.Meta
			}
			out = append(out, stub)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, 0, 0, ""
	})
}

func (s *Server) jobGet(w http.ResponseWriter, r *http.Request) {
	key := jobKey(namespaceOf(r, nil), r.PathValue("id"))
	s.blockingQuery(w, r, "jobs", func() (any, uint64, int, string) {
		job := s.jobs[key]
		if job == nil {
			return nil, 0, http.StatusNotFound, "job not found"
		}
		return job, *job.ModifyIndex, 0, ""
	})
}

func (s *Server) jobDeregister(w http.ResponseWriter, r *http.Request) {
	key := jobKey(namespaceOf(r, nil), r.PathValue("id"))
	purge := r.URL.Query().Get("purge") == "true"
	s.mu.Lock()
	job := s.jobs[key]
	if job == nil {
		// Nomad answers a deregister of an unknown job with no evaluation.
		idx := s.index
		s.mu.Unlock()
		s.writeJSON(w, idx, api.JobDeregisterResponse{})
		return
	}
	idx := s.bumpLocked("jobs", "evals")
	if purge {
		delete(s.jobs, key)
		delete(s.versions, key)
		delete(s.deployments, key)
	} else {
		stopped := copyJob(job)
		stopped.Stop = ptr(true)
		stopped.Status = ptr("dead")
		stopped.Version = ptr(*job.Version + 1)
		stopped.ModifyIndex, stopped.JobModifyIndex = ptr(idx), ptr(idx)
		stopped.VersionTag = nil
		s.jobs[key] = stopped
		s.recordVersionLocked(key, stopped)
	}
	for _, a := range s.allocs {
		if a.namespace == *job.Namespace && a.jobID == *job.ID && a.desired == "run" {
			a.stopLocked("alloc is being stopped: job was deregistered")
		}
	}
	s.bumpLocked("allocs")
	s.mu.Unlock()
	s.writeJSON(w, idx, api.JobDeregisterResponse{EvalID: newID(), EvalCreateIndex: idx, JobModifyIndex: idx})
}

func (s *Server) jobPlan(w http.ResponseWriter, r *http.Request) {
	var req api.JobPlanRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Job == nil || req.Job.ID == nil || *req.Job.ID != r.PathValue("id") {
		codedError(w, http.StatusBadRequest, "Job ID does not match")
		return
	}
	if err := validate(req.Job); err != nil {
		codedError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ns := namespaceOf(r, req.Job)
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := api.JobPlanResponse{Annotations: &api.PlanAnnotations{DesiredTGUpdates: map[string]*api.DesiredUpdates{}}}
	if existing := s.jobs[jobKey(ns, *req.Job.ID)]; existing != nil {
		resp.JobModifyIndex = *existing.JobModifyIndex
	}
	failed := s.feasibleLocked(ns, req.Job)
	for _, tg := range req.Job.TaskGroups {
		u := &api.DesiredUpdates{}
		switch cur := s.liveAllocLocked(ns, *req.Job.ID, *tg.Name); {
		case failed[*tg.Name] != nil:
		case cur == nil:
			u.Place = 1
		case sameGroup(cur.tg, tg):
			u.InPlaceUpdate = 1
		default:
			u.DestructiveUpdate = 1
		}
		resp.Annotations.DesiredTGUpdates[*tg.Name] = u
	}
	if len(failed) > 0 {
		resp.FailedTGAllocs = failed
	}
	s.writeJSON(w, s.index, resp)
}

// taskAsk is what a task asks of the node, with Nomad's defaults.
func taskAsk(t *api.Task) (cpu, mem int) {
	cpu, mem = 100, 300
	if t.Resources != nil {
		if t.Resources.CPU != nil {
			cpu = *t.Resources.CPU
		}
		if t.Resources.MemoryMB != nil {
			mem = *t.Resources.MemoryMB
		}
	}
	return cpu, mem
}

// reservedPorts lists a group's static ports.
func reservedPorts(tg *api.TaskGroup) []api.Port {
	var out []api.Port
	for _, n := range tg.Networks {
		out = append(out, n.ReservedPorts...)
	}
	return out
}

// feasibleLocked places the job's groups on the one node as Nomad's
// scheduler would, beside every other job's live allocations, and returns
// the metrics of the groups it cannot place.
func (s *Server) feasibleLocked(ns string, job *api.Job) map[string]*api.AllocationMetric {
	failed := map[string]*api.AllocationMetric{}
	dcOK := len(job.Datacenters) == 0
	for _, dc := range job.Datacenters {
		if ok, _ := path.Match(dc, s.cfg.Datacenter); ok {
			dcOK = true
		}
	}
	pool := "default"
	if job.NodePool != nil && *job.NodePool != "" {
		pool = *job.NodePool
	}
	poolOK := pool == "all" || pool == s.cfg.NodePool
	usedCPU, usedMem := 0, 0
	usedPorts := map[int]bool{}
	for _, a := range s.allocs {
		if a.desired != "run" || (a.namespace == ns && a.jobID == *job.ID) {
			continue
		}
		for _, t := range a.tg.Tasks {
			c, m := taskAsk(t)
			usedCPU, usedMem = usedCPU+c, usedMem+m
		}
		for _, p := range a.ports {
			usedPorts[p.Value] = true
		}
	}
	for _, tg := range job.TaskGroups {
		m := &api.AllocationMetric{NodesAvailable: map[string]int{s.cfg.Datacenter: 1}, NodePool: pool, NodesInPool: 1}
		if !poolOK {
			m.NodesInPool = 0
		}
		if !dcOK || !poolOK {
			m.NodesAvailable = map[string]int{}
			failed[*tg.Name] = m
			continue
		}
		m.NodesEvaluated = 1
		var missing []string
		cpu, mem := 0, 0
		for _, t := range tg.Tasks {
			if !slices.Contains(s.cfg.Drivers, t.Driver) {
				missing = append(missing, t.Driver)
			}
			c, mm := taskAsk(t)
			cpu, mem = cpu+c, mem+mm
		}
		if len(missing) > 0 {
			m.NodesFiltered = 1
			m.ConstraintFiltered = map[string]int{"missing drivers": 1}
			failed[*tg.Name] = m
			continue
		}
		volumesOK := true
		for _, v := range tg.Volumes {
			if v.Type == "host" && !volumeServes(s.hostVolumeLocked(ns, v.Source), v) {
				volumesOK = false
			}
		}
		if !volumesOK {
			m.NodesFiltered = 1
			m.ConstraintFiltered = map[string]int{"missing compatible host volumes": 1}
			failed[*tg.Name] = m
			continue
		}
		exhausted := map[string]int{}
		if usedCPU+cpu > s.cfg.NodeCPU {
			exhausted["cpu"] = 1
		}
		if usedMem+mem > s.cfg.NodeMemoryMB {
			exhausted["memory"] = 1
		}
		for _, p := range reservedPorts(tg) {
			if usedPorts[p.Value] {
				exhausted[fmt.Sprintf("network: reserved port collision %s=%d", p.Label, p.Value)] = 1
			}
		}
		if len(exhausted) > 0 {
			m.NodesExhausted = 1
			m.DimensionExhausted = exhausted
			failed[*tg.Name] = m
			continue
		}
		usedCPU, usedMem = usedCPU+cpu, usedMem+mem
		for _, p := range reservedPorts(tg) {
			usedPorts[p.Value] = true
		}
	}
	return failed
}

// sameGroup says whether a group's spec is unchanged (an in-place update).
func sameGroup(a, b *api.TaskGroup) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// liveAllocLocked returns the group's newest allocation that is meant to
// run.
func (s *Server) liveAllocLocked(ns, jobID, group string) *alloc {
	var best *alloc
	for _, a := range s.liveAllocsLocked(ns, jobID, group) {
		if best == nil || a.createIndex > best.createIndex {
			best = a
		}
	}
	return best
}

// liveAllocsLocked returns the group's allocations that are meant to run
// (two while a canary runs beside the one it replaces).
func (s *Server) liveAllocsLocked(ns, jobID, group string) []*alloc {
	var out []*alloc
	for _, a := range s.allocs {
		if a.namespace == ns && a.jobID == jobID && a.group == group && a.desired == "run" {
			out = append(out, a)
		}
	}
	return out
}

// scheduleLocked places a registered version of a job as Nomad's
// scheduler would on one node, and starts its deployment: a group whose
// spec did not change keeps its allocation (an in-place update, which
// stops any other of the group, such as a canary of a version reverted);
// a changed group whose update block asks for canaries gets one beside
// its running allocation (older canaries stopped), to be promoted; a
// changed group without canaries is replaced; a new group is placed (when
// the node can take it; otherwise it stays unplaced, as a blocked
// evaluation would leave it); a removed group is stopped. It returns the
// groups it could not place, with their metrics.
func (s *Server) scheduleLocked(job *api.Job) map[string]*api.AllocationMetric {
	ns := *job.Namespace
	failed := s.feasibleLocked(ns, job)
	dep := &api.Deployment{ID: newID(), Namespace: ns, JobID: *job.ID, JobVersion: *job.Version,
		JobModifyIndex: *job.JobModifyIndex, JobCreateIndex: *job.CreateIndex, Status: "running",
		StatusDescription: "Deployment is running", TaskGroups: map[string]*api.DeploymentState{},
		CreateIndex: s.index, ModifyIndex: s.index}
	if prev := s.deployments[jobKey(ns, *job.ID)]; prev != nil && prev.Status == "running" {
		prev.Status, prev.StatusDescription = "cancelled", "Cancelled due to newer version of job"
	}
	groups := map[string]bool{}
	for _, tg := range job.TaskGroups {
		name := *tg.Name
		groups[name] = true
		st := &api.DeploymentState{DesiredTotal: 1}
		dep.TaskGroups[name] = st
		live := s.liveAllocsLocked(ns, *job.ID, name)
		var keep *alloc
		for _, a := range live {
			if sameGroup(a.tg, tg) && (keep == nil || !a.canary) {
				keep = a
			}
		}
		if keep != nil {
			keep.job, keep.modifyIndex, keep.canary = job, s.index, false
			for _, a := range live {
				if a != keep {
					a.stopLocked("alloc not needed due to job update")
				}
			}
			continue
		}
		var running []*alloc
		for _, a := range live {
			if a.canary {
				a.stopLocked("alloc not needed as deployment is superseded")
			} else {
				running = append(running, a)
			}
		}
		canaries := canaryCount(job.Update, tg.Update)
		if canaries > 0 && len(running) > 0 {
			st.DesiredCanaries = canaries
			if failed[name] == nil {
				a := s.placeLocked(job, tg, dep.ID)
				a.canary = true
				st.PlacedCanaries = []string{a.id}
			}
			continue
		}
		for _, a := range running {
			a.stopLocked("alloc is being updated due to job update")
		}
		if failed[name] == nil {
			s.placeLocked(job, tg, dep.ID)
		}
	}
	for _, a := range s.allocs {
		if a.namespace == ns && a.jobID == *job.ID && a.desired == "run" && !groups[a.group] {
			a.stopLocked("alloc not needed due to job update")
		}
	}
	if *job.Type == "service" {
		s.deployments[jobKey(ns, *job.ID)] = dep
	}
	s.bumpLocked("allocs")
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// placeLocked creates an allocation of the group for the deployment and
// starts running it.
func (s *Server) placeLocked(job *api.Job, tg *api.TaskGroup, deploymentID string) *alloc {
	a := &alloc{deploymentID: deploymentID,
		s: s, id: newID(), namespace: *job.Namespace, jobID: *job.ID, group: *tg.Name, job: job, tg: tg,
		createIndex: s.index + 1, modifyIndex: s.index + 1, createTime: time.Now().UnixNano(),
		desired: "run", client: "pending", tasks: map[string]*api.TaskState{},
		done: make(chan struct{}), stopCh: make(chan struct{}),
	}
	a.modifyTime = a.createTime
	for _, n := range tg.Networks {
		for _, p := range n.ReservedPorts {
			a.ports = append(a.ports, api.PortMapping{Label: p.Label, Value: p.Value, To: p.To, HostIP: "127.0.0.1"})
		}
		for _, p := range n.DynamicPorts {
			a.ports = append(a.ports, api.PortMapping{Label: p.Label, Value: freePort(), To: p.To, HostIP: "127.0.0.1"})
		}
	}
	for _, t := range tg.Tasks {
		a.tasks[t.Name] = &api.TaskState{State: "pending"}
		a.eventLocked(t.Name, &api.TaskEvent{Type: api.TaskReceived, DisplayMessage: "Task received by client"})
	}
	s.allocs[a.id] = a
	if s.cfg.Hold {
		close(a.done)
		return a
	}
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		a.run()
	}()
	return a
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *Server) jobAllocations(w http.ResponseWriter, r *http.Request) {
	ns, id := namespaceOf(r, nil), r.PathValue("id")
	s.blockingQuery(w, r, "allocs", func() (any, uint64, int, string) {
		out := []*api.AllocationListStub{}
		for _, a := range s.allocs {
			if a.namespace == ns && a.jobID == id {
				out = append(out, a.stubLocked())
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex < out[j].CreateIndex })
		return out, 0, 0, ""
	})
}

func (s *Server) allocGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingQuery(w, r, "allocs", func() (any, uint64, int, string) {
		a := s.allocs[id]
		if a == nil {
			return nil, 0, http.StatusNotFound, "alloc not found"
		}
		return a.apiLocked(), 0, 0, ""
	})
}
