package nomad_test

import (
	"testing"

	"github.com/svchost/svc/internal/nomadtest"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/releasetest"
)

// releaseRuntime is the Nomad runtime against the fake Nomad (which runs
// the build jobs and the app's tasks for real) for the release suite.
func releaseRuntime(tb testing.TB) scheduler.Runtime { return newEnv(tb, options{}).rt }

// agentReleaseRuntime starts a real `nomad agent -dev` (skipping without
// a binary, as startAgent does) and returns the release suite's runtime
// against it; a dev agent has no Consul, so services register in Nomad.
func agentReleaseRuntime(tb testing.TB) releasetest.Factory {
	a := nomadtest.Start(tb, nomadtest.Options{Skip: "the release suite ran against the fake Nomad only (TestReleases, BenchmarkRollbackAgainstDeploy)"})
	waitAgent(tb, a.Addr)
	addr := a.Addr
	return func(tb testing.TB) scheduler.Runtime {
		return newEnv(tb, options{address: addr, runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad }}).rt
	}
}

// TestReleases runs the release suite on the Nomad runtime: builds as
// batch jobs into the artifact store, whose kept artifacts a redeploy and
// a rollback download again without building.
func TestReleases(t *testing.T) {
	releasetest.Run(t, releaseRuntime)
}

// TestReleasesRealAgent runs the release suite against a real Nomad agent
// when there is a nomad binary (SVC_NOMAD_BIN or PATH).
func TestReleasesRealAgent(t *testing.T) {
	releasetest.Run(t, agentReleaseRuntime(t))
}

// BenchmarkRollbackAgainstDeploy prints a fresh deploy of go-hello (the
// build job and the start) beside a rollback to the release before it
// (its kept artifact started), against the fake Nomad.
func BenchmarkRollbackAgainstDeploy(b *testing.B) {
	releasetest.Bench(b, releaseRuntime)
}

// BenchmarkRollbackAgainstDeployRealAgent is the same against a real
// Nomad agent when there is a nomad binary.
func BenchmarkRollbackAgainstDeployRealAgent(b *testing.B) {
	releasetest.Bench(b, agentReleaseRuntime(b))
}
