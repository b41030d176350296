package process_test

import (
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
// the small restart budget the suite expects (2 restarts within a minute);
// in the sandbox (the default) unless isolation says none.
func contractConfig(t *testing.T, isolation string) process.Config {
	cfg := process.Config{
		WorkDir:           sandboxDir(t),
		Isolation:         isolation,
		StopGrace:         2 * time.Second,
		StartTimeout:      30 * time.Second,
		SettleTime:        300 * time.Millisecond,
		HealthInterval:    100 * time.Millisecond,
		RestartBackoff:    50 * time.Millisecond,
		MaxRestartBackoff: 500 * time.Millisecond,
		RestartAttempts:   2,
		RestartInterval:   time.Minute,
	}
	if isolation == policy.IsolationNone {
		cfg.BuildEnv = hostGoCache()
	} else {
		cfg.CacheDir = sharedCache()
	}
	cfg.GoCacheSeed = testSeed()
	return cfg
}

func newContractRuntime(t *testing.T, isolation string) *process.Runtime {
	t.Helper()
	rt, err := process.New(contractConfig(t, isolation))
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// TestContract runs the whole suite with the runtime's isolation off (an
// operator's explicit runtime.isolation: none).
func TestContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		rt := newContractRuntime(t, policy.IsolationNone)
		return rt, rt
	})
}

// TestContractSandboxed runs the whole suite as the runtime runs by
// default: every build and workload in the sandbox.
func TestContractSandboxed(t *testing.T) {
	needSandbox(t)
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		rt := newContractRuntime(t, "")
		return rt, rt
	})
}
