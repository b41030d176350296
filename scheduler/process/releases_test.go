package process_test

import (
	"testing"
	"time"

	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/scheduler/releasetest"
)

// releaseRuntime is the runtime the release suite deploys samples/go-hello
// on: as it runs by default, every build and workload in the sandbox.
func releaseRuntime(tb testing.TB) scheduler.Runtime {
	tb.Helper()
	rt, err := process.New(process.Config{
		WorkDir: sandboxDir(tb), CacheDir: sharedCache(), GoCacheSeed: testSeed(),
		StopGrace: 2 * time.Second, StartTimeout: time.Minute, SettleTime: 300 * time.Millisecond, HealthInterval: 100 * time.Millisecond,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rt.Close() })
	return rt
}

// TestReleases runs the release suite on the sandboxed process runtime: a
// source change rebuilds, an env-only change and a rollback start kept
// builds, a rollback serves the old code.
func TestReleases(t *testing.T) {
	needSandbox(t)
	releasetest.Run(t, releaseRuntime)
}

// BenchmarkRollbackAgainstDeploy prints a fresh deploy of go-hello (the
// build and the start) beside a rollback to the release before it (its
// kept build started), on the sandboxed process runtime.
func BenchmarkRollbackAgainstDeploy(b *testing.B) {
	releasetest.Bench(b, releaseRuntime)
}
