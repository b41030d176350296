package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hashicorp/nomad/api"

	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// metaLogCapBytes is the task meta where the runtime keeps the workload's
// log cap (Nomad's logs block counts whole megabytes): what Logs returns
// at most.
const metaLogCapBytes = "svc_log_cap_bytes"

// portLabel is the label of every workload's port.
const portLabel = jobtemplates.PortLabel

// AppInfo is what the runtime needs of a job's app beyond the scheduler's
// job: the slug that names the Nomad job and its services, the app's name
// (the Nomad job's Name), the primary workload the edge routes to, and
// the spec revision (the job's meta).
type AppInfo struct {
	Slug         string
	Name         string
	Primary      string
	SpecID       string
	SpecRevision uint64
}

// artifactSource is where a task downloads its artifact from.
type artifactSource struct {
	URL    string
	SHA256 string
}

// noApp stands for the app of a job that names none (tests).
const noApp = "none"

// defaultPrimary guesses the primary workload of a job that names none (a
// runtime test's): the only one, else the last of the start order that
// serves HTTP (the order puts dependencies first), else the last.
func defaultPrimary(job scheduler.Job, order []string) string {
	if len(order) == 1 {
		return order[0]
	}
	for i := len(order) - 1; i >= 0; i-- {
		if !job.Workloads[order[i]].NoPort {
			return order[i]
		}
	}
	return order[len(order)-1]
}

// render renders the job's Nomad service job through the job templates
// (jobtemplates.Set.RenderService) and decodes it into the API's Job.
// After decoding, the runtime adds what only it knows: each task's log
// cap (meta), an app's host volumes for raw_exec (which mounts nothing:
// the group asks for the volume, which places it on the volume's node,
// and the task finds the directory in SVC_VOLUME_<NAME>, as the runtime
// contract allows), and the timings Config overrides (RestartAttempts and
// the like; zero keeps the template's).
func (r *Runtime) render(ctx context.Context, job scheduler.Job, order []string, sources map[string]artifactSource, volumes map[string]hostVolume) (*api.Job, error) {
	var info AppInfo
	if r.cfg.Describe != nil {
		var err error
		if info, err = r.cfg.Describe(ctx, job); err != nil {
			return nil, fmt.Errorf("describe job %s: %w", job.ID, err)
		}
	}
	appID := job.AppID
	if appID == "" {
		appID = noApp
	}
	switch {
	case info.Slug != "":
	case job.AppID == "":
		// A job of no app (a runtime's tests) is no app's version: it
		// has a Nomad job of its own.
		info.Slug = noApp + "-" + job.ID
	default:
		info.Slug = appID
	}
	if info.Primary == "" {
		info.Primary = job.Primary
	}
	if info.Primary == "" {
		info.Primary = defaultPrimary(job, order)
	}
	arts := map[string]jobtemplates.ArtifactSource{}
	for name, s := range sources {
		arts[name] = jobtemplates.ArtifactSource{URL: s.URL, Archive: "tar.gz", Checksum: "sha256:" + s.SHA256}
	}
	in := job
	if r.cfg.Driver == DriverRawExec {
		in.Workloads = map[string]scheduler.Task{}
		for name, t := range job.Workloads {
			t.Mounts = nil
			in.Workloads[name] = t
		}
	}
	b, err := r.templates.RenderService(jobtemplates.ServiceInput{
		AppID: appID, AppSlug: info.Slug, AppName: info.Name, SpecID: info.SpecID, SpecRevision: info.SpecRevision,
		DeploymentID: job.ID, Job: in, Primary: info.Primary, Artifacts: arts,
		StaticCommand: r.cfg.StaticServer, Datacenters: r.cfg.Datacenters, Region: r.cfg.Region,
		Namespace: r.cfg.Namespace, NodePool: r.cfg.NodePool, Driver: r.cfg.Driver,
		ServiceProvider: r.cfg.ServiceProvider, CPUMHzPerCore: r.cfg.CPUMHzPerCore,
		Vault: jobtemplates.VaultSettings{Mount: r.cfg.Vault.Mount, Prefix: r.cfg.Vault.Prefix, Role: r.cfg.Vault.Role,
			Namespace: r.cfg.Vault.Namespace, Cluster: r.cfg.Vault.Cluster, Audience: r.cfg.Vault.Audience},
	})
	if err != nil {
		return nil, fmt.Errorf("render job %s: %w", job.ID, err)
	}
	out, err := decodeJob(b)
	if err != nil {
		return nil, fmt.Errorf("render job %s: %w", job.ID, err)
	}
	for _, tg := range out.TaskGroups {
		if tg.Name == nil || len(tg.Tasks) == 0 {
			continue
		}
		name := *tg.Name
		t := job.Workloads[name]
		task := tg.Tasks[0]
		if task.Meta == nil {
			task.Meta = map[string]string{}
		}
		logCap := t.LogCapBytes
		if logCap <= 0 {
			logCap = r.cfg.LogCapBytes
		}
		task.Meta[metaLogCapBytes] = strconv.FormatInt(logCap, 10)
		if r.cfg.Driver == DriverRawExec {
			for _, m := range t.Mounts {
				v, ok := volumes[m.Volume]
				if !ok {
					return nil, fmt.Errorf("render job %s: volume %s has no host volume", job.ID, m.Volume)
				}
				if tg.Volumes == nil {
					tg.Volumes = map[string]*api.VolumeRequest{}
				}
				tg.Volumes[m.Volume] = &api.VolumeRequest{Name: m.Volume, Type: "host", Source: v.Name}
				if task.Env == nil {
					task.Env = map[string]string{}
				}
				task.Env[volumeEnv(m.Volume)] = v.HostPath
			}
		}
		r.override(tg, task)
	}
	return out, nil
}

// override applies the timings Config sets over the template's.
func (r *Runtime) override(tg *api.TaskGroup, task *api.Task) {
	c := r.cfg
	if c.RestartAttempts != 0 || c.RestartInterval != 0 || c.RestartDelay != 0 {
		if tg.RestartPolicy == nil {
			tg.RestartPolicy = &api.RestartPolicy{Mode: ptr("fail")}
		}
		if c.RestartAttempts != 0 {
			tg.RestartPolicy.Attempts = ptr(max(c.RestartAttempts, 0))
		}
		if c.RestartInterval != 0 {
			tg.RestartPolicy.Interval = ptr(c.RestartInterval)
		}
		if c.RestartDelay != 0 {
			tg.RestartPolicy.Delay = ptr(c.RestartDelay)
		}
	}
	if c.MinHealthyTime != 0 || c.HealthyDeadline != 0 {
		if tg.Update == nil {
			tg.Update = &api.UpdateStrategy{}
		}
		if c.MinHealthyTime != 0 {
			tg.Update.MinHealthyTime = ptr(max(c.MinHealthyTime, 0))
		}
		if c.HealthyDeadline != 0 {
			tg.Update.HealthyDeadline = ptr(c.HealthyDeadline)
			tg.Update.ProgressDeadline = ptr(c.HealthyDeadline + c.HealthyDeadline/2)
		}
	}
	if c.KillTimeout != 0 {
		task.KillTimeout = ptr(c.KillTimeout)
	}
}

// decodeJob decodes a rendered job: the Job object itself, or one wrapped
// in {"Job": …} (an operator's template may write either).
func decodeJob(b []byte) (*api.Job, error) {
	var wrapped struct{ Job *api.Job }
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&wrapped); err == nil && wrapped.Job != nil && wrapped.Job.ID != nil {
		return wrapped.Job, nil
	}
	var job api.Job
	if err := json.Unmarshal(b, &job); err != nil {
		return nil, fmt.Errorf("decode the rendered job: %w", err)
	}
	if job.ID == nil || *job.ID == "" || len(job.TaskGroups) == 0 {
		return nil, fmt.Errorf("the rendered job has no ID or no group")
	}
	return &job, nil
}

func ptr[T any](v T) *T { return &v }
