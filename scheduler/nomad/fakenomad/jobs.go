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
	idx := s.bumpLocked("jobs", "evals")
	job := copyJob(req.Job)
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
	s.jobs[key] = job
	evalID := newID()
	s.scheduleLocked(job)
	s.mu.Unlock()
	s.writeJSON(w, idx, api.JobRegisterResponse{EvalID: evalID, EvalCreateIndex: idx, JobModifyIndex: idx})
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
	} else {
		stopped := copyJob(job)
		stopped.Stop = ptr(true)
		stopped.Status = ptr("dead")
		stopped.Version = ptr(*job.Version + 1)
		stopped.ModifyIndex, stopped.JobModifyIndex = ptr(idx), ptr(idx)
		s.jobs[key] = stopped
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
			if v.Type == "host" && s.hostVolumeLocked(ns, v.Source) == nil {
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

// liveAllocLocked returns the group's allocation that is meant to run.
func (s *Server) liveAllocLocked(ns, jobID, group string) *alloc {
	for _, a := range s.allocs {
		if a.namespace == ns && a.jobID == jobID && a.group == group && a.desired == "run" {
			return a
		}
	}
	return nil
}

// scheduleLocked places a registered job: an unchanged group keeps its
// allocation, a changed one is replaced, a new one placed (when the node
// can take it; otherwise it stays unplaced, as a blocked evaluation
// would leave it), a removed one stopped.
func (s *Server) scheduleLocked(job *api.Job) {
	ns := *job.Namespace
	failed := s.feasibleLocked(ns, job)
	groups := map[string]bool{}
	for _, tg := range job.TaskGroups {
		groups[*tg.Name] = true
		cur := s.liveAllocLocked(ns, *job.ID, *tg.Name)
		if cur != nil && sameGroup(cur.tg, tg) {
			cur.job = job
			cur.modifyIndex = s.index
			continue
		}
		if cur != nil {
			cur.stopLocked("alloc is being updated due to job update")
		}
		if failed[*tg.Name] != nil {
			continue
		}
		s.placeLocked(job, tg)
	}
	for _, a := range s.allocs {
		if a.namespace == ns && a.jobID == *job.ID && a.desired == "run" && !groups[a.group] {
			a.stopLocked("alloc not needed due to job update")
		}
	}
	s.bumpLocked("allocs")
}

// placeLocked creates an allocation of the group and starts running it.
func (s *Server) placeLocked(job *api.Job, tg *api.TaskGroup) {
	a := &alloc{
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
		return
	}
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		a.run()
	}()
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
