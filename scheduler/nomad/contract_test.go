package nomad_test

import (
	"testing"

	"github.com/svchost/svc/internal/nomadtest"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/runtimetest"
)

// TestContract runs the runtime contract suite against the fake Nomad,
// with the job templates' defaults (services in Consul: health from
// Nomad's deployment health).
func TestContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		e := newEnv(t, options{})
		return e.rt, e.rt
	})
}

// TestContractNomadServices runs the suite with the workloads registered
// in Nomad's own service discovery, whose checks Status reads.
func TestContractNomadServices(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		e := newEnv(t, options{runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad }})
		return e.rt, e.rt
	})
}

// TestContractRealAgent runs the same suite against a real `nomad agent
// -dev` when a nomad binary is on PATH (see agent_test.go); a dev agent
// has no Consul, so services register in Nomad.
func TestContractRealAgent(t *testing.T) {
	addr := startAgent(t)
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		e := newEnv(t, options{address: addr, runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad }})
		return e.rt, e.rt
	})
}

// TestContractRealAgentACL runs the suite against a real agent with ACLs
// on, the runtime holding a client token with exactly the policy the
// adapter documents for raw_exec apps (nomad.ACLPolicy, which the
// hashistack Terraform module makes): a call the policy does not allow
// fails the suite.
func TestContractRealAgentACL(t *testing.T) {
	a := nomadtest.Start(t, nomadtest.Options{ACL: true,
		Skip: "the contract suite ran against the fake Nomad only (TestContract)"})
	token := a.ClientToken(t, a.Bootstrap(t), "svc", nomad.ACLPolicy("default", true))
	waitAgentToken(t, a.Addr, token)
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		e := newEnv(t, options{address: a.Addr, runtime: func(c *nomad.Config) {
			c.ServiceProvider = jobtemplates.ProviderNomad
			c.Token = token
		}})
		return e.rt, e.rt
	})
}
