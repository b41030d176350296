package process

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/scheduler"
)

// DefaultID is the well-known ID of the process runtime adapter.
const DefaultID = "adp_builtin_runtime"

const kindDescription = "Builds with the host's toolchains and runs each workload as a supervised process group on this machine"

// KindFor declares the process runtime with instances that run on rt: one
// Runtime per server process (New reaps whatever its work directory's
// records name, so it is made once, not per server generation), shared by
// every instance opened.
func KindFor(rt *Runtime) adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryRuntime,
		Name:        "process",
		Description: kindDescription,
		Default:     true,
		DefaultID:   DefaultID,
		Open: func(context.Context, adapters.Config) (adapters.Instance, error) {
			return &instance{rt: rt}, nil
		},
	}
}

// instance is an opened process runtime adapter: the adapter's health and
// capabilities, and the runtime's whole interface, by delegation to one
// Runtime.
type instance struct{ rt *Runtime }

var (
	_ adapters.Instance      = (*instance)(nil)
	_ scheduler.Runtime      = (*instance)(nil)
	_ scheduler.LogReader    = (*instance)(nil)
	_ scheduler.LogFollower  = (*instance)(nil)
	_ scheduler.UsageReader  = (*instance)(nil)
	_ scheduler.HostReader   = (*instance)(nil)
	_ scheduler.Execer       = (*instance)(nil)
	_ scheduler.Discarder    = (*instance)(nil)
	_ scheduler.Pruner       = (*instance)(nil)
	_ scheduler.DiskReader   = (*instance)(nil)
	_ scheduler.WriteDropper = (*instance)(nil)
	_ scheduler.Pauser       = (*instance)(nil)
	_ scheduler.VolumeHolder = (*instance)(nil)
)

// Check says whether the work directory is there and usable.
func (i *instance) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Stat(i.rt.cfg.WorkDir)
	if err != nil {
		return fmt.Errorf("process runtime: work directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("process runtime: work directory %s is not a directory", i.rt.cfg.WorkDir)
	}
	return nil
}

// Capabilities says what the runtime does on this host. "isolation" is
// the strongest level it offers: "sandbox" only when bubblewrap works here
// (probed once). Resource limits are read (Usage), never enforced.
func (i *instance) Capabilities() map[string]any {
	rt := i.rt
	caps := map[string]any{
		"isolation":         rt.Isolation(),
		"isolation_levels":  rt.isolationLevels(),
		"sandbox_available": rt.sandboxUsable() == nil,
		"build_isolation":   rt.Isolation(),
		// The sandbox enforces host policy's egress_allowlist (pod.go).
		"egress_allowlist": rt.sandboxUsable() == nil,
		"builds":           rt.BuildKinds(),
		"health_checks":    []string{"http", "tcp"},
		"restarts":         true,
		"restart_policy": map[string]any{
			"attempts": rt.cfg.RestartAttempts,
			"interval": rt.cfg.RestartInterval.String(),
			"mode":     "fail",
		},
		"logs":            true,
		"log_cap_bytes":   rt.cfg.LogCapBytes,
		"exec":            true,
		"usage":           true,
		"volumes":         true,
		"resource_limits": false,
		"advertise_host":  rt.cfg.AdvertiseHost,
	}
	if err := rt.sandboxUsable(); err != nil && rt.cfg.Isolation == policy.IsolationSandbox {
		// Configured to sandbox every workload, and the host cannot.
		caps["unavailable"] = "the process runtime cannot run a sandbox on this host: " + err.Error()
	}
	return caps
}

func (i *instance) Build(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	return i.rt.Build(ctx, req)
}

func (i *instance) Run(ctx context.Context, job scheduler.Job) (scheduler.JobStatus, error) {
	return i.rt.Run(ctx, job)
}

func (i *instance) Stop(ctx context.Context, jobID string) error { return i.rt.Stop(ctx, jobID) }

func (i *instance) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	return i.rt.Status(ctx, jobID)
}

func (i *instance) Restart(ctx context.Context, jobID string) error {
	return i.rt.Restart(ctx, jobID)
}

func (i *instance) Logs(ctx context.Context, jobID, workload string) ([]string, error) {
	return i.rt.Logs(ctx, jobID, workload)
}

func (i *instance) FollowLogs(ctx context.Context, jobID, workload string, emit func([]string) error) (string, error) {
	return i.rt.FollowLogs(ctx, jobID, workload, emit)
}

func (i *instance) Usage(ctx context.Context, jobID string) (scheduler.Usage, error) {
	return i.rt.Usage(ctx, jobID)
}

func (i *instance) Host(ctx context.Context) (scheduler.Host, error) { return i.rt.Host(ctx) }

func (i *instance) Exec(ctx context.Context, req scheduler.ExecRequest) (scheduler.ExecSession, error) {
	return i.rt.Exec(ctx, req)
}

func (i *instance) Discard(ctx context.Context, jobID string) error { return i.rt.Discard(ctx, jobID) }

func (i *instance) DropWrites(ctx context.Context, jobID string) error {
	return i.rt.DropWrites(ctx, jobID)
}

func (i *instance) DiskUsage(ctx context.Context, jobID string) (map[string]int64, error) {
	return i.rt.DiskUsage(ctx, jobID)
}

func (i *instance) Pause(ctx context.Context, jobID string) (func(), error) {
	return i.rt.Pause(ctx, jobID)
}

func (i *instance) HoldsVolumes() bool { return i.rt.HoldsVolumes() }

func (i *instance) RemoveArtifact(ctx context.Context, art scheduler.Artifact) error {
	return i.rt.RemoveArtifact(ctx, art)
}

func (i *instance) RemoveJobLogs(ctx context.Context, jobID string) error {
	return i.rt.RemoveJobLogs(ctx, jobID)
}

// BuildKinds lists the build kinds Build runs (others it refuses with
// PLAN_CAPABILITY_UNSUPPORTED).
func (r *Runtime) BuildKinds() []string { return slices.Clone(buildKinds) }

// Isolation is the strongest isolation level the runtime offers its
// workloads and builds ("" when it can run nothing: configured to sandbox
// everything on a host that cannot).
func (r *Runtime) Isolation() string { return r.isolation() }
