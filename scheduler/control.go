package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Start makes an app meant to run; the reconciler converges. Starting
// must fit the host (CAPACITY_WOULD_OVERSUBSCRIBE). A failed app stays
// failed until somebody deploys it.
func (s *Service) Start(ctx context.Context, appID string) (apps.App, error) {
	return s.setDesired(ctx, appID, apps.DesiredRunning, "app.start")
}

// Stop makes an app meant to be stopped; the reconciler converges.
func (s *Service) Stop(ctx context.Context, appID string) (apps.App, error) {
	return s.setDesired(ctx, appID, apps.DesiredStopped, "app.stop")
}

// StopBecause stops an app for the system the way Stop does (meant to
// stay stopped until somebody starts it; the reconciler stops its job),
// in one write with the audit entry of app.stop naming reason and the ops
// more builds from the view the write reads (what says why: an event).
// more decides too: false writes nothing and StopBecause answers false, as
// it does for an app gone or meant to be stopped already.
func (s *Service) StopBecause(ctx context.Context, appID, reason string, more func(r *raftstore.Reader, a apps.App) ([]raftstore.Op, bool, error)) (bool, error) {
	now := s.d.Now()
	stopped := false
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		stopped = false
		a, _, ok := apps.Apps.Get(r, appID)
		if !ok || a.DesiredState != apps.DesiredRunning {
			return nil, nil
		}
		extra, ok, err := more(r, a)
		if err != nil || !ok {
			return nil, err
		}
		_, from, ops, err := apps.DesiredOps(r, appID, apps.DesiredStopped, reason, now)
		if err != nil {
			return nil, err
		}
		stopped = true
		ops = append(ops, audit.Record(ctx, now, "app.stop", appID, audit.Target{Kind: "app", ID: appID},
			map[string]any{"from": from, "to": apps.DesiredStopped, "reason": reason}))
		return append(ops, extra...), nil
	})
	return stopped && err == nil, err
}

// Deployed returns, from the view r, the spec an app's release runs and
// when it was released; false for an app that runs no release (or one
// whose revision is unreadable).
func (s *Service) Deployed(r *raftstore.Reader, appID string) (spec.Document, time.Time, bool) {
	rel, _, ok := Releases.Get(r, appID)
	if !ok {
		return spec.Document{}, time.Time{}, false
	}
	rev, ok := spec.RevisionAt(r, appID, rel.Revision)
	if !ok {
		return spec.Document{}, rel.At, false
	}
	doc, err := rev.Spec()
	if err != nil {
		return spec.Document{}, rel.At, false
	}
	return doc, rel.At, true
}

func (s *Service) setDesired(ctx context.Context, appID, desired, action string) (apps.App, error) {
	r := s.d.Store.Read()
	rel, _, hasRel := Releases.Get(r, appID)
	var host Host
	if desired == apps.DesiredRunning && hasRel {
		host = s.host(ctx, rel.Runtime) // asked before the write, not inside it
	}
	now := s.d.Now()
	var a apps.App
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var from string
		var ops []raftstore.Op
		var err error
		if a, from, ops, err = apps.DesiredOps(r, appID, desired, "", now); err != nil {
			return nil, err
		}
		if len(ops) > 0 && desired == apps.DesiredRunning {
			ops = append(ops, idle.ActiveOps(r, appID, now)...) // a start is activity (internal/idle)
			if rel, _, ok := Releases.Get(r, appID); ok {
				if view, err := s.d.Specs.Get(appID, rel.Revision); err == nil {
					if err := s.checkCapacity(r, appID, view.Spec, host); err != nil {
						return nil, err
					}
				}
			}
		}
		return append(ops, audit.Record(ctx, now, action, appID, audit.Target{Kind: "app", ID: appID},
			map[string]any{"from": from, "to": desired})), nil
	})
	if err != nil {
		return apps.App{}, fmt.Errorf("%s: %w", action, err)
	}
	return a, nil
}

// Restart asks for the app's running workloads to be restarted in place
// (app.restarted); the reconciler on the leader does it. Only a running
// (or degraded) app restarts.
func (s *Service) Restart(ctx context.Context, appID string) (apps.App, error) {
	now := s.d.Now()
	var a apps.App
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ok bool
		if a, _, ok = apps.Apps.Get(r, appID); !ok {
			return nil, noApp(appID)
		}
		rel, meta, hasRel := Releases.Get(r, appID)
		if !hasRel || (a.State != apps.StateRunning && a.State != apps.StateDegraded) {
			return nil, errcode.New(errcode.StateInvalid, "app %s is %s; only a running app restarts in place", appID, a.State).
				WithDetail("state", a.State).
				WithRemedy("start it (POST /api/v1/apps/%s/start), or deploy it", appID)
		}
		rel.RestartGen++
		return []raftstore.Op{
			Releases.PutIf(&rel, meta.ModifyIndex),
			audit.Record(ctx, now, "app.restart", appID, audit.Target{Kind: "app", ID: appID}, nil),
			events.Emit(ctx, now, "app.restarted", appRef(a), "app", appID, nil),
		}, nil
	})
	if err != nil {
		return apps.App{}, fmt.Errorf("restart app: %w", err)
	}
	return a, nil
}

// Status is an app's state and each workload's.
type Status struct {
	State        string                    `json:"state"`
	DesiredState string                    `json:"desired_state"`
	DeploymentID *string                   `json:"deployment_id"`
	Revision     *uint64                   `json:"revision"`
	Workloads    map[string]WorkloadReport `json:"workloads"`
	// Problem is what keeps the app from serving the spec it was last
	// asked to run, nil when nothing does: the newest deployment when it
	// failed (the previous release may still serve), else the first
	// workload's problem the runtime reports, else a workload the runtime
	// gave up restarting.
	Problem *Problem `json:"problem"`
}

// WorkloadReport is one workload's status as the API shows it.
type WorkloadReport struct {
	Primary  bool   `json:"primary"`
	Running  bool   `json:"running"`
	Restarts int    `json:"restarts"`
	Health   string `json:"health"`
	ExitCode *int   `json:"exit_code"`
	// Address is where the workload listens on the runtime's network
	// (host:port), for operators; apps are reached through the edge.
	Address string `json:"address,omitempty"`
	// Problem is why the workload does not run or serve, when the runtime
	// says (see WorkloadStatus.Problem).
	Problem *Problem `json:"problem,omitempty"`
}

// Status reports an app's state and, per workload of the revision it runs,
// whether it runs, its restarts, health and last exit code. The state is
// the stored one, but never running while the runtime reports the job down
// (shown): it is then degraded, or restarting when the job is gone.
func (s *Service) Status(ctx context.Context, appID string) (Status, error) {
	r := s.d.Store.Read()
	a, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Status{}, noApp(appID)
	}
	out := Status{State: a.State, DesiredState: a.DesiredState, Workloads: map[string]WorkloadReport{}}
	last := lastDeployment(r, appID)
	rel, _, ok := Releases.Get(r, appID)
	if !ok {
		out.Problem = problemOf(appID, last, nil, JobStatus{})
		return out, nil
	}
	out.DeploymentID, out.Revision = &rel.DeploymentID, &rel.Revision
	var doc spec.Document
	if view, err := s.d.Specs.Get(appID, rel.Revision); err == nil {
		doc = view.Spec
	}
	var st JobStatus
	if rt, err := s.runtime(rel.Runtime); err == nil {
		st, err = rt.Status(ctx, rel.JobID)
		if err == nil || errcode.Has(err, errcode.NotFound) {
			out.State = shown(a.State, err == nil, st, slices.Sorted(maps.Keys(rel.Artifacts)))
		}
	}
	primary := doc.Primary()
	for name := range doc.Workloads {
		rep := WorkloadReport{Primary: name == primary, Health: HealthUnknown}
		if ws, ok := st.Workloads[name]; ok {
			rep.Running, rep.Restarts, rep.Health, rep.ExitCode, rep.Address = ws.Running, ws.Restarts, ws.Health, ws.ExitCode, ws.Address
			rep.Problem = ws.Problem
		}
		out.Workloads[name] = rep
	}
	out.Problem = problemOf(appID, last, &rel, st)
	return out, nil
}

// lastDeployment is an app's newest deployment (nil for none).
func lastDeployment(r *raftstore.Reader, appID string) *Deployment {
	if deps := appDeployments(r, appID, 1); len(deps) > 0 {
		return &deps[0]
	}
	return nil
}

// Usage reads the resources an app's workloads use now. On the leader
// the reading also counts against the app's disk limits: it may warn
// (app.disk_warning), never stop (disk.go).
func (s *Service) Usage(ctx context.Context, appID string) (Usage, error) {
	rel, rt, err := s.release(appID)
	if err != nil {
		return Usage{}, err
	}
	host := s.host(ctx, rel.Runtime)
	ur, ok := rt.(UsageReader)
	if !ok {
		return Usage{Supported: false, HostCPUMillis: host.CPUMillis, HostMemoryBytes: host.MemoryBytes, Workloads: map[string]WorkloadUsage{}}, nil
	}
	u, err := ur.Usage(ctx, rel.JobID)
	if errcode.Has(err, errcode.NotFound) {
		return Usage{Supported: true, HostCPUMillis: host.CPUMillis, HostMemoryBytes: host.MemoryBytes, Workloads: map[string]WorkloadUsage{}}, nil
	}
	if err == nil {
		s.noteUsage(ctx, rel, u) // the reading counts against the disk limits (disk.go)
	}
	return u, err
}

// release returns the release an app runs and its runtime; STATE_INVALID
// for an app never deployed.
func (s *Service) release(appID string) (Release, Runtime, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return Release{}, nil, noApp(appID)
	}
	rel, _, ok := Releases.Get(r, appID)
	if !ok {
		return Release{}, nil, errcode.New(errcode.StateInvalid, "app %s has not been deployed", appID).
			WithRemedy("deploy it: POST /api/v1/apps/%s/deployments", appID)
	}
	rt, err := s.runtime(rel.Runtime)
	return rel, rt, err
}

// MaxTail caps the lines GET /logs returns.
const MaxTail = 10000

// Logs returns the last tail lines of a workload's output (default the
// primary workload).
func (s *Service) Logs(ctx context.Context, appID, workload string, tail int) ([]string, string, error) {
	rel, rt, err := s.release(appID)
	if err != nil {
		return nil, "", err
	}
	workload, err = s.workloadOf(rel, workload)
	if err != nil {
		return nil, "", err
	}
	lr, ok := rt.(LogReader)
	if !ok {
		return nil, "", errcode.New(errcode.PlanCapabilityUnsupp, "runtime %s does not keep logs", rel.Runtime)
	}
	lines, err := lr.Logs(ctx, rel.JobID, workload)
	if errcode.Has(err, errcode.NotFound) {
		return []string{}, workload, nil
	}
	if err != nil {
		return nil, "", err
	}
	if tail > 0 && len(lines) > tail {
		lines = lines[len(lines)-tail:]
	}
	return lines, workload, nil
}

// FollowAppLogs calls emit with the last tail lines of a workload's output
// (default the primary workload), then with each batch of lines as it is
// written, until the output ends (it returns why: LogsStopped,
// LogsLagged), ctx ends or emit fails. An error before emit's first call
// is a refusal: the app was never deployed, has no such workload, or its
// runtime cannot follow (PLAN_CAPABILITY_UNSUPPORTED).
func (s *Service) FollowAppLogs(ctx context.Context, appID, workload string, tail int, emit func(lines []string) error) (string, error) {
	rel, rt, err := s.release(appID)
	if err != nil {
		return "", err
	}
	if workload, err = s.workloadOf(rel, workload); err != nil {
		return "", err
	}
	lf, ok := rt.(LogFollower)
	if !ok {
		return "", errcode.New(errcode.PlanCapabilityUnsupp, "runtime %s cannot follow logs", rel.Runtime).
			WithRemedy("read the last lines without follow: GET /api/v1/apps/%s/logs", appID)
	}
	first := true
	return lf.FollowLogs(ctx, rel.JobID, workload, func(lines []string) error {
		if first && tail > 0 && len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		first = false
		return emit(lines)
	})
}

// workloadOf checks a workload name against the release's revision; empty
// names the primary workload.
func (s *Service) workloadOf(rel Release, name string) (string, error) {
	view, err := s.d.Specs.Get(rel.AppID, rel.Revision)
	if err != nil {
		return "", err
	}
	if name == "" {
		if p := view.Spec.Primary(); p != "" {
			return p, nil
		}
	}
	if _, ok := view.Spec.Workloads[name]; !ok {
		names := make([]string, 0, len(view.Spec.Workloads))
		for n := range view.Spec.Workloads {
			names = append(names, n)
		}
		slices.Sort(names)
		return "", errcode.New(errcode.NotFound, "revision %d of app %s has no workload %q", rel.Revision, rel.AppID, name).
			WithDetail("workloads", names)
	}
	return name, nil
}

// ExecCommandMax caps the length of an exec command line.
const ExecCommandMax = 4096

// Exec opens a command in one of the app's running workloads (default the
// primary, default command a shell), after recording app.shell_opened with
// the command (never what is typed). Host policy is checked by the caller.
func (s *Service) Exec(ctx context.Context, appID, workload string, command []string, rows, cols uint16) (ExecSession, error) {
	if len(strings.Join(command, " ")) > ExecCommandMax {
		return nil, errcode.Invalid("command", "the command is at most %d bytes", ExecCommandMax)
	}
	rel, rt, err := s.release(appID)
	if err != nil {
		return nil, err
	}
	workload, err = s.workloadOf(rel, workload)
	if err != nil {
		return nil, err
	}
	ex, ok := rt.(Execer)
	if !ok {
		return nil, errcode.New(errcode.PlanCapabilityUnsupp, "runtime %s cannot open a terminal in a workload", rel.Runtime)
	}
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	now := s.d.Now()
	shown := strings.Join(command, " ")
	if _, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, _ := apps.Apps.Get(r, appID)
		return []raftstore.Op{
			audit.Record(ctx, now, "app.exec", appID, audit.Target{Kind: "workload", ID: workload},
				map[string]any{"workload": workload, "command": shown}),
			events.Emit(ctx, now, "app.shell_opened", appRef(a), "workload", workload,
				map[string]any{"workload": workload, "command": shown}),
		}, nil
	}); err != nil {
		return nil, fmt.Errorf("exec: record: %w", err)
	}
	return ex.Exec(ctx, ExecRequest{JobID: rel.JobID, Workload: workload, Command: command, TTY: true, Rows: rows, Cols: cols})
}

// VolumeHolder is a runtime that keeps its volumes' data on this server
// (the process runtime), where backups read and restore it.
type VolumeHolder interface {
	HoldsVolumes() bool
}

// VolumeCopier is a runtime that keeps an app's volumes on other machines
// (Nomad's host volumes, on a client node) and copies a volume's data to
// and from a directory of this server, where backups write and restore
// it: CopyVolumeOut into dst, CopyVolumeIn replacing the volume's
// contents with src's.
type VolumeCopier interface {
	CopyVolumeOut(ctx context.Context, appID, volume, dst string) error
	CopyVolumeIn(ctx context.Context, appID, volume, src string) error
}

// Copier returns the runtime of the app's release when it copies the
// app's volumes from elsewhere (a VolumeCopier that does not keep them on
// this server); false for an app never deployed or whose runtime keeps
// them here.
func (s *Service) Copier(appID string) (VolumeCopier, bool) {
	_, rt, err := s.release(appID)
	if err != nil {
		return nil, false
	}
	return copierOf(rt)
}

func copierOf(rt Runtime) (VolumeCopier, bool) {
	if h, ok := rt.(VolumeHolder); ok && h.HoldsVolumes() {
		return nil, false
	}
	c, ok := rt.(VolumeCopier)
	return c, ok
}

// CopiesVolumes says whether the app's volumes are copied from elsewhere
// (Copier).
func (s *Service) CopiesVolumes(appID string) bool {
	_, ok := s.Copier(appID)
	return ok
}

// CopyVolumeOut copies an app's volume into dst through its runtime
// (Copier); PLAN_CAPABILITY_UNSUPPORTED when that runtime keeps it here.
func (s *Service) CopyVolumeOut(ctx context.Context, appID, volume, dst string) error {
	c, err := s.copier(appID)
	if err != nil {
		return err
	}
	return c.CopyVolumeOut(ctx, appID, volume, dst)
}

// CopyVolumeIn replaces an app's volume's contents with src through its
// runtime (Copier); PLAN_CAPABILITY_UNSUPPORTED when that runtime keeps it
// here.
func (s *Service) CopyVolumeIn(ctx context.Context, appID, volume, src string) error {
	c, err := s.copier(appID)
	if err != nil {
		return err
	}
	return c.CopyVolumeIn(ctx, appID, volume, src)
}

func (s *Service) copier(appID string) (VolumeCopier, error) {
	rel, rt, err := s.release(appID)
	if err != nil {
		return nil, err
	}
	c, ok := copierOf(rt)
	if !ok {
		return nil, errcode.New(errcode.PlanCapabilityUnsupp, "app %s runs on runtime %s, which keeps its volumes on this server: nothing to copy", appID, rel.Runtime)
	}
	return c, nil
}

// Pauser is a runtime that can pause a job's processes while its volumes
// are copied.
type Pauser interface {
	Pause(ctx context.Context, jobID string) (resume func(), err error)
}

// CanQuiesce says whether Quiesce could pause the app now (nil), without
// pausing it: the refusal a restore answers before it starts.
func (s *Service) CanQuiesce(appID string) error {
	rel, rt, err := s.release(appID)
	if errcode.Has(err, errcode.StateInvalid) {
		return nil
	}
	if err != nil {
		return err
	}
	return holdsVolumes(appID, rel, rt)
}

// holdsVolumes refuses an app whose runtime keeps its volumes elsewhere
// and cannot copy them (VolumeCopier).
func holdsVolumes(appID string, rel Release, rt Runtime) error {
	if _, copies := copierOf(rt); copies {
		return nil
	}
	if h, ok := rt.(VolumeHolder); !ok || !h.HoldsVolumes() {
		return errcode.New(errcode.PlanCapabilityUnsupp, "app %s runs on runtime %s, whose volumes are not on this server: they cannot be backed up or restored here", appID, rel.Runtime).
			WithRemedy("back up the runtime's volumes with its own tools (docs/storage.md)")
	}
	return nil
}

// Quiesce pauses what an app runs while its volumes are copied (a
// backup): it returns resume, and how the copy is consistent: "paused"
// when the runtime paused the app's processes, "stopped" when the app
// runs nothing, "live" when the runtime cannot pause (the copy is then
// taken while the app writes: so for an app whose runtime copies its
// volumes from elsewhere, as Nomad cannot pause an allocation). An app
// whose runtime keeps its volumes elsewhere and cannot copy them is
// PLAN_CAPABILITY_UNSUPPORTED.
func (s *Service) Quiesce(ctx context.Context, appID string) (func(), string, error) {
	rel, rt, err := s.release(appID)
	if errcode.Has(err, errcode.StateInvalid) {
		return func() {}, "stopped", nil // never deployed: nothing runs
	}
	if err != nil {
		return nil, "", err
	}
	if err := holdsVolumes(appID, rel, rt); err != nil {
		return nil, "", err
	}
	p, ok := rt.(Pauser)
	if !ok {
		return func() {}, "live", nil
	}
	resume, err := p.Pause(ctx, rel.JobID)
	if errcode.Has(err, errcode.NotFound) {
		return func() {}, "stopped", nil
	}
	if err != nil {
		return nil, "", err
	}
	return resume, "paused", nil
}
