package fakenomad

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// alloc is one allocation: its state as the API shows it (guarded by the
// server's lock) and the goroutine that runs it.
type alloc struct {
	s                        *Server
	id, namespace            string
	jobID, group             string
	job                      *api.Job
	tg                       *api.TaskGroup
	ports                    []api.PortMapping
	createIndex, modifyIndex uint64
	createTime, modifyTime   int64

	desired, desiredDesc string
	client, clientDesc   string
	tasks                map[string]*api.TaskState
	healthy              *bool
	healthAt             time.Time
	canary               bool              // placed beside the group's running allocation, not yet promoted
	deploymentID         string            // the deployment that placed it
	checks               map[string]string // task -> success, failure or pending

	rt     *process.Runtime // the tasks' runtime, once set up
	logDir string           // a batch allocation's log files, once set up
	seen   map[string]scheduler.WorkloadStatus

	stopOnce sync.Once
	stopCh   chan struct{} // closed when the allocation must stop
	done     chan struct{} // closed when its goroutine has ended
}

// pjob names the allocation's job in its process runtime.
const pjob = "alloc"

func (a *alloc) stopLocked(desc string) {
	if a.desired == "stop" {
		return
	}
	a.desired, a.desiredDesc = "stop", desc
	a.stopOnce.Do(func() { close(a.stopCh) })
}

// shutdown stops the allocation and waits for its goroutine.
func (a *alloc) shutdown() {
	a.s.mu.Lock()
	a.stopLocked("fake shutting down")
	a.s.mu.Unlock()
	<-a.done
	if a.rt != nil {
		_ = a.rt.Close()
	}
}

func (a *alloc) eventLocked(task string, ev *api.TaskEvent) {
	ts := a.tasks[task]
	if ts == nil {
		return
	}
	ev.Time = time.Now().UnixNano()
	if ev.Details == nil {
		ev.Details = map[string]string{}
	}
	if ev.Type == api.TaskTerminated {
		ev.Details["exit_code"] = strconv.Itoa(ev.ExitCode)
	}
	ts.Events = append(ts.Events, ev)
	if len(ts.Events) > 10 { // Nomad keeps the last 10
		ts.Events = ts.Events[len(ts.Events)-10:]
	}
	a.modifyTime = ev.Time
}

// update changes the allocation's state under the lock and tells blocking
// queries.
func (a *alloc) update(f func()) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	f()
	a.modifyIndex = a.s.bumpLocked("allocs")
}

func (a *alloc) stubLocked() *api.AllocationListStub {
	full := a.apiLocked()
	return &api.AllocationListStub{
		ID: full.ID, EvalID: full.EvalID, Name: full.Name, Namespace: full.Namespace, NodeID: full.NodeID,
		NodeName: full.NodeName, JobID: full.JobID, JobType: *a.job.Type, JobVersion: *a.job.Version,
		TaskGroup: full.TaskGroup, DesiredStatus: full.DesiredStatus, DesiredDescription: full.DesiredDescription,
		ClientStatus: full.ClientStatus, ClientDescription: full.ClientDescription, TaskStates: full.TaskStates,
		DeploymentStatus: full.DeploymentStatus, CreateIndex: full.CreateIndex, ModifyIndex: full.ModifyIndex,
		CreateTime: full.CreateTime, ModifyTime: full.ModifyTime,
	}
}

func (a *alloc) apiLocked() *api.Allocation {
	states := map[string]*api.TaskState{}
	for name, ts := range a.tasks {
		c := *ts
		c.Events = append([]*api.TaskEvent(nil), ts.Events...)
		states[name] = &c
	}
	res := &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{}, Shared: api.AllocatedSharedResources{
		Ports: append([]api.PortMapping(nil), a.ports...),
	}}
	if a.tg.EphemeralDisk != nil && a.tg.EphemeralDisk.SizeMB != nil {
		res.Shared.DiskMB = int64(*a.tg.EphemeralDisk.SizeMB)
	}
	if len(a.ports) > 0 {
		n := &api.NetworkResource{Mode: "host", IP: "127.0.0.1"}
		for _, p := range a.ports {
			n.DynamicPorts = append(n.DynamicPorts, api.Port{Label: p.Label, Value: p.Value, To: p.To})
		}
		res.Shared.Networks = []*api.NetworkResource{n}
	}
	for _, t := range a.tg.Tasks {
		cpu, mem := taskAsk(t)
		res.Tasks[t.Name] = &api.AllocatedTaskResources{Cpu: api.AllocatedCpuResources{CpuShares: int64(cpu)},
			Memory: api.AllocatedMemoryResources{MemoryMB: int64(mem)}}
	}
	out := &api.Allocation{
		ID: a.id, Namespace: a.namespace, EvalID: a.id, Name: fmt.Sprintf("%s.%s[0]", a.jobID, a.group),
		NodeID: a.s.nodeID, NodeName: "fakenomad-node", JobID: a.jobID, Job: a.job, TaskGroup: a.group,
		AllocatedResources: res, DesiredStatus: a.desired, DesiredDescription: a.desiredDesc,
		ClientStatus: a.client, ClientDescription: a.clientDesc, TaskStates: states,
		CreateIndex: a.createIndex, ModifyIndex: a.modifyIndex, AllocModifyIndex: a.createIndex,
		CreateTime: a.createTime, ModifyTime: a.modifyTime,
	}
	if a.healthy != nil || a.canary {
		out.DeploymentStatus = &api.AllocDeploymentStatus{Canary: a.canary, Timestamp: a.healthAt, ModifyIndex: a.modifyIndex}
		if a.healthy != nil {
			out.DeploymentStatus.Healthy = ptr(*a.healthy)
		}
	}
	return out
}

// dur reads an optional duration with a default.
func dur(d *time.Duration, def time.Duration) time.Duration {
	if d == nil || *d <= 0 {
		return def
	}
	return *d
}

// run runs the allocation to its end: set up every task (directories,
// artifacts, templates), start them under a process runtime, restart them
// per the group's policy, and stop them when told to.
func (a *alloc) run() {
	defer close(a.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stopCh:
			cancel()
		case <-a.done:
		}
	}()
	dir := filepath.Join(a.s.cfg.DataDir, "allocs", a.id)
	tasks, err := a.setup(ctx, dir)
	var missing *missingError
	if errors.As(err, &missing) {
		// As Nomad's template hook does: the task waits for the data, and
		// says so in a Template event, until it appears or the allocation
		// is stopped (the fake does not retry).
		a.update(func() {
			a.eventLocked(missing.task, &api.TaskEvent{Type: "Template", DisplayMessage: "Missing: " + missing.what})
		})
		<-ctx.Done()
		a.update(func() {
			a.client = api.AllocClientStatusComplete
			for _, ts := range a.tasks {
				ts.State, ts.FinishedAt = "dead", time.Now()
			}
		})
		return
	}
	if err != nil {
		a.fail(err)
		return
	}
	if a.batch() {
		a.runBatch(ctx, dir, tasks)
		return
	}
	rp := a.tg.RestartPolicy
	if rp == nil {
		rp = &api.RestartPolicy{}
	}
	attempts := 2
	if rp.Attempts != nil {
		attempts = *rp.Attempts
	}
	interval, delay := dur(rp.Interval, 30*time.Minute), dur(rp.Delay, 15*time.Second)
	up := mergeUpdate(a.job.Update, a.tg.Update)
	deadline := dur(up.HealthyDeadline, a.s.cfg.HealthyDeadline)
	minHealthy := time.Duration(0)
	if up.MinHealthyTime != nil {
		minHealthy = *up.MinHealthyTime
	}
	healthInterval := 10 * time.Second
	for _, t := range tasks {
		if t.Health != nil && t.Health.Interval > 0 {
			healthInterval = time.Duration(t.Health.Interval)
		}
	}
	rt, err := process.New(process.Config{
		WorkDir:           filepath.Join(dir, ".runtime"),
		StopGrace:         dur(a.tg.Tasks[0].KillTimeout, 5*time.Second),
		StartTimeout:      deadline,
		SettleTime:        200 * time.Millisecond,
		HealthInterval:    healthInterval,
		RestartBackoff:    delay,
		MaxRestartBackoff: delay,
		RestartAttempts:   attempts,
		RestartInterval:   interval,
		// The fake's tasks are plain processes, as Nomad's raw_exec
		// driver runs them.
		Isolation: "none",
	})
	if err != nil {
		a.fail(fmt.Errorf("driver: %w", err))
		return
	}
	a.s.mu.Lock()
	a.rt = rt
	a.s.mu.Unlock()

	// Exits before the tasks are up are restarted here, per the policy;
	// once up, the process runtime restarts them with the same policy.
	var exits []time.Time
	base := 0
	for {
		a.update(func() {
			a.client = api.AllocClientStatusRunning
			for name, ts := range a.tasks {
				ts.State, ts.StartedAt = "running", time.Now()
				a.eventLocked(name, &api.TaskEvent{Type: api.TaskStarted, DisplayMessage: "Task started by client"})
			}
		})
		_, err := rt.Run(ctx, scheduler.Job{ID: pjob, Workloads: tasks})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			a.stopped(rt)
			return
		}
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.StateAppExited {
			a.fail(fmt.Errorf("driver: %w", err))
			return
		}
		task, _ := e.Details["workload"].(string)
		code, _ := e.Details["exit_code"].(int)
		now := time.Now()
		exits = append(exits, now)
		recent := 0
		for _, t := range exits {
			if now.Sub(t) < interval {
				recent++
			}
		}
		restart := recent <= attempts
		a.update(func() {
			a.eventLocked(task, &api.TaskEvent{Type: api.TaskTerminated, ExitCode: code,
				DisplayMessage: fmt.Sprintf("Exit Code: %d", code)})
			for name, ts := range a.tasks {
				ts.State = "pending"
				if name != task {
					continue
				}
				if restart {
					ts.Restarts++
					ts.LastRestart = now
					a.eventLocked(name, &api.TaskEvent{Type: api.TaskRestarting, DisplayMessage: fmt.Sprintf("Task restarting in %s", delay)})
				} else {
					ts.State, ts.Failed, ts.FinishedAt = "dead", true, now
					a.eventLocked(name, &api.TaskEvent{Type: api.TaskNotRestarting, FailsTask: true,
						DisplayMessage: fmt.Sprintf("Exceeded allowed attempts %d in interval %s and mode is \"fail\"", attempts, interval)})
				}
			}
			if !restart {
				a.client, a.healthy, a.healthAt = api.AllocClientStatusFailed, ptr(false), now
			}
		})
		if !restart {
			<-ctx.Done()
			a.stopped(rt)
			return
		}
		base++
		select {
		case <-ctx.Done():
			a.stopped(rt)
			return
		case <-time.After(delay):
		}
	}
	a.watch(ctx, rt, base, minHealthy, deadline)
	a.stopped(rt)
}

// watch maps the process runtime's state onto the task states until the
// allocation must stop. The fake looks at its runtime every 25ms; it is
// the fake's client, not the adapter, that watches this way. Deployment
// health is Nomad's: healthy once every task runs and passes its checks
// for minHealthy without a break, unhealthy if that has not happened by
// the healthy deadline.
func (a *alloc) watch(ctx context.Context, rt *process.Runtime, base int, minHealthy, deadline time.Duration) {
	a.s.mu.Lock()
	a.seen = map[string]scheduler.WorkloadStatus{}
	a.s.mu.Unlock()
	started := time.Unix(0, a.createTime)
	var passingSince time.Time
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := rt.Status(ctx, pjob); err == nil {
			now := time.Now()
			var health *bool
			switch {
			case !allPassing(st):
				passingSince = time.Time{}
			case passingSince.IsZero():
				passingSince = now
			}
			if !passingSince.IsZero() && now.Sub(passingSince) >= minHealthy {
				health = ptr(true)
			} else if now.Sub(started) > deadline {
				health = ptr(false)
			}
			a.observe(st, base, health)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// allPassing says whether every task runs and, with a port, passes.
func allPassing(st scheduler.JobStatus) bool {
	for _, ws := range st.Workloads {
		if !ws.Running || ws.Address != "" && ws.Health != scheduler.HealthPassing {
			return false
		}
	}
	return true
}

// mergeUpdate is a group's update block over the job's, as Nomad
// canonicalizes them.
func mergeUpdate(job, group *api.UpdateStrategy) api.UpdateStrategy {
	var out api.UpdateStrategy
	for _, u := range []*api.UpdateStrategy{job, group} {
		if u == nil {
			continue
		}
		if u.MinHealthyTime != nil {
			out.MinHealthyTime = u.MinHealthyTime
		}
		if u.HealthyDeadline != nil {
			out.HealthyDeadline = u.HealthyDeadline
		}
		if u.HealthCheck != nil {
			out.HealthCheck = u.HealthCheck
		}
	}
	return out
}

// observe records a reading of the runtime: restarts and exits as events,
// the task's state, its checks and, once decided (health not nil), the
// deployment health, which Nomad sets once per deployment.
func (a *alloc) observe(st scheduler.JobStatus, base int, health *bool) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	changed := false
	now := time.Now()
	for name, ws := range st.Workloads {
		ts := a.tasks[name]
		if ts == nil {
			continue
		}
		prev := a.seen[name]
		code := 0
		if ws.ExitCode != nil {
			code = *ws.ExitCode
		}
		for i := prev.Restarts; i < ws.Restarts; i++ {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskTerminated, ExitCode: code, DisplayMessage: fmt.Sprintf("Exit Code: %d", code)})
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskRestarting, DisplayMessage: "Task restarting"})
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskStarted, DisplayMessage: "Task started by client"})
			ts.LastRestart = now
			changed = true
		}
		ts.Restarts = uint64(base + ws.Restarts)
		state := "pending"
		if ws.Running {
			state = "running"
		}
		if ws.Dead && !prev.Dead {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskTerminated, ExitCode: code, DisplayMessage: fmt.Sprintf("Exit Code: %d", code)})
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskNotRestarting, FailsTask: true, DisplayMessage: "Exceeded allowed attempts in interval and mode is \"fail\""})
			ts.Failed, ts.FinishedAt = true, now
			a.client = api.AllocClientStatusFailed
			changed = true
		}
		if ws.Dead {
			state = "dead"
		}
		if ts.State != state {
			ts.State = state
			changed = true
		}
		check := map[string]string{scheduler.HealthPassing: "success", scheduler.HealthFailing: "failure"}[ws.Health]
		if check == "" {
			check = "pending"
		}
		if a.checks == nil {
			a.checks = map[string]string{}
		}
		if a.checks[name] != check {
			a.checks[name] = check
			changed = true
		}
		a.seen[name] = ws
	}
	if health != nil && a.healthy == nil {
		a.healthy, a.healthAt = health, now
		changed = true
	}
	if changed {
		a.modifyIndex = a.s.bumpLocked("allocs")
	}
}

// stopped stops the tasks and records it.
func (a *alloc) stopped(rt *process.Runtime) {
	a.s.syncServices() // Nomad deregisters services before the kill (PreKill)
	a.update(func() {
		for name := range a.tasks {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskKilling, DisplayMessage: "Sent interrupt"})
		}
	})
	if rt != nil {
		_ = rt.Stop(context.Background(), pjob)
	}
	a.update(func() {
		for name, ts := range a.tasks {
			if ts.State != "dead" {
				ts.State, ts.FinishedAt = "dead", time.Now()
				a.eventLocked(name, &api.TaskEvent{Type: api.TaskKilled, DisplayMessage: "Task successfully killed"})
			}
		}
		if a.client != api.AllocClientStatusFailed {
			a.client = api.AllocClientStatusComplete
		}
	})
}

// fail records a task setup or driver failure: the tasks are dead and
// failed, the allocation failed.
func (a *alloc) fail(err error) {
	var te *taskError
	a.update(func() {
		for name, ts := range a.tasks {
			if errors.As(err, &te) && te.task != name {
				a.eventLocked(name, &api.TaskEvent{Type: api.TaskSiblingFailed, DisplayMessage: "Task's sibling failed"})
			} else {
				typ := api.TaskDriverFailure
				if errors.As(err, &te) {
					typ = te.event
				}
				a.eventLocked(name, &api.TaskEvent{Type: typ, FailsTask: true, DisplayMessage: err.Error()})
			}
			ts.State, ts.Failed, ts.FinishedAt = "dead", true, time.Now()
		}
		a.client, a.clientDesc = api.AllocClientStatusFailed, "Failed tasks"
		a.healthy, a.healthAt = ptr(false), time.Now()
	})
}

// taskError is a setup failure of one task, with the event type Nomad
// records for it.
type taskError struct {
	task, event string
	err         error
}

func (e *taskError) Error() string { return e.err.Error() }
func (e *taskError) Unwrap() error { return e.err }

// setup prepares every task of the group: directories, environment,
// artifacts, templates, and the process runtime's task.
func (a *alloc) setup(ctx context.Context, dir string) (map[string]scheduler.Task, error) {
	tasks := map[string]scheduler.Task{}
	if err := os.MkdirAll(filepath.Join(dir, "alloc"), 0o700); err != nil {
		return nil, err
	}
	httpPort := 0
	for _, p := range a.ports {
		if p.Label == "http" {
			httpPort = p.Value
		}
	}
	for _, t := range a.tg.Tasks {
		taskDir := filepath.Join(dir, t.Name)
		for _, d := range []string{"local", "secrets", "tmp"} {
			if err := os.MkdirAll(filepath.Join(taskDir, d), 0o700); err != nil {
				return nil, err
			}
		}
		a.update(func() {
			a.eventLocked(t.Name, &api.TaskEvent{Type: api.TaskSetup, DisplayMessage: api.TaskBuildingTaskDir})
		})
		if err := a.mountVolumes(t, taskDir); err != nil {
			return nil, &taskError{task: t.Name, event: api.TaskSetupFailure, err: err}
		}
		env := a.env(t, dir, taskDir)
		if len(t.Artifacts) > 0 {
			a.update(func() {
				a.eventLocked(t.Name, &api.TaskEvent{Type: api.TaskDownloadingArtifacts, DisplayMessage: "Client is downloading artifacts"})
			})
		}
		for _, art := range t.Artifacts {
			if err := a.s.download(ctx, art, taskDir, env); err != nil {
				return nil, &taskError{task: t.Name, event: api.TaskArtifactDownloadFailed, err: err}
			}
		}
		for _, tmpl := range t.Templates {
			vars, err := a.s.render(ctx, tmpl, taskDir, env)
			var missing *missingError
			if errors.As(err, &missing) {
				missing.task = t.Name
				return nil, missing
			}
			if err != nil {
				return nil, &taskError{task: t.Name, event: "Template", err: err}
			}
			for k, v := range vars {
				env[k] = v
			}
		}
		command, _ := t.Config["command"].(string)
		argv := []string{interpolate(command, env)}
		if args, ok := t.Config["args"].([]any); ok {
			for _, x := range args {
				s, _ := x.(string)
				argv = append(argv, interpolate(s, env))
			}
		}
		workDir := taskDir
		if wd, _ := t.Config["work_dir"].(string); wd != "" {
			workDir = interpolate(wd, env)
			if !filepath.IsAbs(workDir) {
				workDir = filepath.Join(taskDir, workDir)
			}
		}
		// raw_exec looks a relative command up in the task's local/, then
		// in the task directory, then on PATH.
		if !filepath.IsAbs(argv[0]) && strings.Contains(argv[0], "/") {
			for _, base := range []string{filepath.Join(taskDir, "local"), taskDir} {
				if p := filepath.Join(base, argv[0]); fileExists(p) && !fileExists(filepath.Join(workDir, argv[0])) {
					argv[0] = p
					break
				}
			}
		}
		st := scheduler.Task{
			Artifact: scheduler.Artifact{ID: a.id, Kind: spec.BuildCommand, Dir: workDir},
			Command:  argv,
			Env:      env,
			Port:     httpPort,
			NoPort:   httpPort == 0,
			Health:   groupHealth(a.tg),
		}
		if lc := t.LogConfig; lc != nil && lc.MaxFiles != nil && lc.MaxFileSizeMB != nil {
			st.LogCapBytes = int64(*lc.MaxFiles) * int64(*lc.MaxFileSizeMB) << 20
		}
		tasks[t.Name] = st
	}
	return tasks, nil
}

// mountVolumes makes the task's volume mounts with a relative
// destination as the exec driver's would appear: a symbolic link at
// <task dir>/<destination> to the host volume's directory (a dynamic
// volume's, <DataDir>/volumes/<id>). Read-only is not enforced, and an
// absolute destination is not made (there is no chroot to make it in).
func (a *alloc) mountVolumes(t *api.Task, taskDir string) error {
	for _, m := range t.VolumeMounts {
		if m.Volume == nil || m.Destination == nil || filepath.IsAbs(*m.Destination) {
			continue
		}
		req := a.tg.Volumes[*m.Volume]
		if req == nil || req.Type != "host" {
			return fmt.Errorf("volume mount %q names no host volume of the group", *m.Volume)
		}
		a.s.mu.Lock()
		v := a.s.hostVolumeLocked(a.namespace, req.Source)
		a.s.mu.Unlock()
		if v == nil {
			return fmt.Errorf("host volume %q is not ready on the node", req.Source)
		}
		dest := filepath.Join(taskDir, filepath.FromSlash(*m.Destination))
		if !within(dest, taskDir) || dest == taskDir {
			return fmt.Errorf("volume mount destination %q leaves the task directory", *m.Destination)
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
			return err
		}
		if err := os.Symlink(v.HostPath, dest); err != nil {
			return fmt.Errorf("mount volume %q: %w", *m.Volume, err)
		}
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// groupHealth is the process runtime's health check for the group's
// first service check: http (path, interval, timeout), or nil for tcp and
// none (a connection accepted).
func groupHealth(tg *api.TaskGroup) *spec.Health {
	var services []*api.Service
	services = append(services, tg.Services...)
	for _, t := range tg.Tasks {
		services = append(services, t.Services...)
	}
	for _, svc := range services {
		for _, c := range svc.Checks {
			if c.Type == "http" {
				return &spec.Health{Path: c.Path, Interval: spec.Duration(c.Interval), Timeout: spec.Duration(c.Timeout)}
			}
			return nil
		}
	}
	return nil
}

// env is the task's environment before templates: the task's env block
// interpolated, and Nomad's NOMAD_* variables.
func (a *alloc) env(t *api.Task, allocDir, taskDir string) map[string]string {
	env := map[string]string{
		"NOMAD_ALLOC_DIR":   filepath.Join(allocDir, "alloc"),
		"NOMAD_TASK_DIR":    filepath.Join(taskDir, "local"),
		"NOMAD_SECRETS_DIR": filepath.Join(taskDir, "secrets"),
		"NOMAD_ALLOC_ID":    a.id,
		"NOMAD_ALLOC_NAME":  fmt.Sprintf("%s.%s[0]", a.jobID, a.group),
		"NOMAD_ALLOC_INDEX": "0",
		"NOMAD_JOB_ID":      a.jobID,
		"NOMAD_JOB_NAME":    a.jobID,
		"NOMAD_GROUP_NAME":  a.group,
		"NOMAD_TASK_NAME":   t.Name,
		"NOMAD_NAMESPACE":   a.namespace,
		"NOMAD_REGION":      "global",
		"NOMAD_DC":          a.s.cfg.Datacenter,
		"NOMAD_ALLOC_PORTS": "",
	}
	for _, p := range a.ports {
		port := strconv.Itoa(p.Value)
		env["NOMAD_PORT_"+p.Label] = port
		env["NOMAD_HOST_PORT_"+p.Label] = port
		env["NOMAD_IP_"+p.Label] = p.HostIP
		env["NOMAD_ADDR_"+p.Label] = p.HostIP + ":" + port
		env["NOMAD_HOST_IP_"+p.Label] = p.HostIP
	}
	delete(env, "NOMAD_ALLOC_PORTS")
	for k, v := range t.Env {
		env[k] = interpolate(v, env)
	}
	return env
}

// interpolate evaluates Nomad's runtime interpolation: ${NAME} becomes
// the task environment's value (env.NAME too; for raw_exec, the client's
// environment backs names the task does not set), an unknown name stays
// as it is, and the HCL escapes $${ and %%{ become ${ and %{.
func interpolate(s string, env map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "$%")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"), strings.HasPrefix(s, "%%{"):
			b.WriteString(s[1:3])
			s = s[3:]
		case strings.HasPrefix(s, "${"):
			j := strings.IndexByte(s, '}')
			if j < 0 {
				b.WriteString(s)
				return b.String()
			}
			name := strings.TrimPrefix(s[2:j], "env.")
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else if v, ok := os.LookupEnv(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[:j+1])
			}
			s = s[j+1:]
		default:
			b.WriteString(s[:1])
			s = s[1:]
		}
	}
}
