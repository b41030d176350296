package process_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/scheduler/runtimetest"
)

// hostGoCache is the host's Go build cache, shared with the builds of the
// tests so that the sample program builds in seconds; the runtime's own
// default is a cache under its directory.
func hostGoCache() map[string]string {
	env := map[string]string{}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" && dir != "off" {
			if _, err := os.Stat(dir); err == nil {
				env["GOCACHE"] = dir
			}
		}
	}
	return env
}

// contractConfig is the runtime the contract suite gets: short waits, and
// the small restart budget the suite expects (2 restarts within a minute).
func contractConfig(t *testing.T) process.Config {
	return process.Config{
		WorkDir:           t.TempDir(),
		BuildEnv:          hostGoCache(),
		StopGrace:         2 * time.Second,
		StartTimeout:      30 * time.Second,
		SettleTime:        300 * time.Millisecond,
		HealthInterval:    100 * time.Millisecond,
		RestartBackoff:    50 * time.Millisecond,
		MaxRestartBackoff: 500 * time.Millisecond,
		RestartAttempts:   2,
		RestartInterval:   time.Minute,
	}
}

func newContractRuntime(t *testing.T) *process.Runtime {
	t.Helper()
	rt, err := process.New(contractConfig(t))
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func TestContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		rt := newContractRuntime(t)
		return rt, rt
	})
}

// sandboxed runs every workload of the jobs it is given in the sandbox.
type sandboxed struct{ *process.Runtime }

func (s sandboxed) Run(ctx context.Context, job scheduler.Job) (scheduler.JobStatus, error) {
	tasks := map[string]scheduler.Task{}
	for name, task := range job.Workloads {
		task.Isolation = policy.IsolationSandbox
		tasks[name] = task
	}
	job.Workloads = tasks
	return s.Runtime.Run(ctx, job)
}

var (
	_ scheduler.Runtime     = sandboxed{}
	_ scheduler.LogReader   = sandboxed{}
	_ scheduler.UsageReader = sandboxed{}
	_ scheduler.Execer      = sandboxed{}
)

// TestContractSandboxed runs the whole suite with every workload in the
// bubblewrap sandbox, where bubblewrap works.
func TestContractSandboxed(t *testing.T) {
	needSandbox(t)
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		rt := sandboxed{newContractRuntime(t)}
		return rt, rt
	})
}
