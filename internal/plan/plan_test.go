package plan_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
)

func doc() spec.Document {
	return spec.Document{
		Workloads: map[string]spec.Workload{
			"web": {Primary: spec.Bool(true), Build: &spec.Build{Kind: spec.BuildGo}, Run: spec.Run{Command: []string{"./app"}, Port: 8080,
				Health: &spec.Health{Path: "/healthz"}}, DependsOn: []string{"worker"},
				Env:       map[string]spec.EnvValue{"DB": {Slot: "db", Field: "url"}, "KEY": {Secret: "API_KEY"}},
				Resources: &spec.Resources{MemoryBytes: 1 << 28}},
			"worker": {Build: &spec.Build{Kind: spec.BuildCommand, Command: "make"}, Run: spec.Run{Command: []string{"./worker"}},
				Resources: &spec.Resources{CPUMillis: 500}},
		},
		Slots: map[string]spec.Slot{"db": {Type: "postgres", Required: true}, "cache": {Type: "redis"}},
	}
}

var process = plan.Runtime{ID: "adp_builtin_runtime", Kind: "process", Primary: true, Loaded: true, Isolation: policy.IsolationNone,
	Builds: []string{"go", "node", "python", "static", "command"}}

func codes(r plan.Result) []errcode.Code {
	var out []errcode.Code
	for _, e := range r.Refusals {
		out = append(out, e.Code)
	}
	return out
}

func TestPlan(t *testing.T) {
	filled := func(string) bool { return true }
	base := plan.Input{Spec: doc(), Policy: policy.Default(), Runtimes: []plan.Runtime{process}, Filled: filled,
		SecretSet: func(string) bool { return true }}
	score := 40
	cases := []struct {
		name  string
		edit  func(*plan.Input)
		codes []errcode.Code
	}{
		{"deployable", func(*plan.Input) {}, nil},
		{"a required slot unfilled", func(in *plan.Input) { in.Filled = func(string) bool { return false } }, []errcode.Code{errcode.PlanSlotUnfilled}},
		{"an adapter the installation lacks", func(in *plan.Input) { in.Spec.Runtime = &spec.Runtime{Adapter: "nomad"} }, []errcode.Code{errcode.PlanAdapterNotConfig}},
		{"the spec asks for more isolation", func(in *plan.Input) { in.Spec.Runtime = &spec.Runtime{Isolation: policy.IsolationVM} }, []errcode.Code{errcode.PlanCapabilityUnsupp}},
		{"a build the runtime cannot run", func(in *plan.Input) {
			w := in.Spec.Workloads["worker"]
			w.Build = &spec.Build{Kind: spec.BuildImage, Image: "redis:7"}
			in.Spec.Workloads = map[string]spec.Workload{"web": in.Spec.Workloads["web"], "worker": w}
		}, []errcode.Code{errcode.PlanCapabilityUnsupp}},
		{"policy needs isolation no runtime offers", func(in *plan.Input) { in.Policy.MinRuntimeIsolation = policy.IsolationSandbox }, []errcode.Code{errcode.PlanNoAdapterPolicy}},
		{"policy needs build isolation the runtime's builds lack", func(in *plan.Input) {
			rt := process
			rt.Isolation = policy.IsolationSandbox
			in.Runtimes = []plan.Runtime{rt}
			in.Policy.MinBuildIsolation = policy.IsolationSandbox
		}, []errcode.Code{errcode.PlanNoAdapterPolicy}},
		{"policy's build isolation met", func(in *plan.Input) {
			rt := process
			rt.BuildIsolation = policy.IsolationSandbox
			in.Runtimes = []plan.Runtime{rt}
			in.Policy.MinBuildIsolation = policy.IsolationSandbox
		}, nil},
		{"a repository outside source_allowlist", func(in *plan.Input) {
			in.Source = &apps.Source{Kind: "repository", Repository: "https://gitlab.example.com/x/y.git"}
			in.Policy.SourceAllowlist = []string{"github.com/acme/"}
		}, []errcode.Code{errcode.PolicySourceNotAllow}},
		{"a repository the allowlist names", func(in *plan.Input) {
			in.Source = &apps.Source{Kind: "repository", Repository: "https://github.com/acme/y.git"}
			in.Policy.SourceAllowlist = []string{"github.com/acme/"}
		}, nil},
		{"an archive under an allowlist that does not name archive:", func(in *plan.Input) {
			in.Source = &apps.Source{Kind: "archive", Commit: "sha256:00"}
			in.Policy.SourceAllowlist = []string{"github.com/acme/"}
		}, []errcode.Code{errcode.PolicySourceNotAllow}},
		{"an archive under an allowlist naming archive:", func(in *plan.Input) {
			in.Source = &apps.Source{Kind: "archive", Commit: "sha256:00"}
			in.Policy.SourceAllowlist = []string{"github.com/acme/", "archive:"}
		}, nil},
		{"an archive and no allowlist", func(in *plan.Input) { in.Source = &apps.Source{Kind: "archive"} }, nil},
		{"a runtime that did not open", func(in *plan.Input) { rt := process; rt.Loaded = false; in.Runtimes = []plan.Runtime{rt} }, []errcode.Code{errcode.PlanNoAdapterPolicy}},
		{"an egress list the runtime cannot enforce", func(in *plan.Input) {
			rt := process
			rt.Isolation, rt.BuildIsolation = policy.IsolationContainer, policy.IsolationContainer
			in.Runtimes = []plan.Runtime{rt}
			in.Policy.EgressAllowlist = []string{"api.example.com"}
		}, []errcode.Code{errcode.PlanCapabilityUnsupp}},
		{"an egress list needs sandbox isolation", func(in *plan.Input) { in.Policy.EgressAllowlist = []string{"api.example.com"} }, []errcode.Code{errcode.PlanNoAdapterPolicy}},
		{"an egress list the runtime enforces", func(in *plan.Input) {
			rt := process
			rt.Egress, rt.Isolation, rt.BuildIsolation = true, policy.IsolationSandbox, policy.IsolationSandbox
			in.Runtimes = []plan.Runtime{rt}
			in.Policy.EgressAllowlist = []string{"api.example.com"}
		}, nil},
		{"a sandboxing runtime on a host without the sandbox", func(in *plan.Input) {
			rt := process
			rt.Unavailable = "no bubblewrap"
			in.Runtimes = []plan.Runtime{rt}
		}, []errcode.Code{errcode.PlanCapabilityUnsupp}},
		{"security below the minimum, stop", func(in *plan.Input) {
			in.Policy.MinSecurityScore, in.Policy.InsecureAction, in.SecurityScore = 70, policy.InsecureStop, &score
		}, []errcode.Code{errcode.PlanSecurityBelow}},
		{"security below the minimum, warn: refused all the same (warn is for running apps)", func(in *plan.Input) {
			in.Policy.MinSecurityScore, in.SecurityScore = 70, &score
		}, []errcode.Code{errcode.PlanSecurityBelow}},
		{"a minimum and never scanned", func(in *plan.Input) { in.Policy.MinSecurityScore = 70 }, []errcode.Code{errcode.PlanSecurityBelow}},
		{"at the minimum", func(in *plan.Input) { in.Policy.MinSecurityScore, in.SecurityScore = 40, &score }, nil},
		{"no minimum, never scanned", func(in *plan.Input) { in.SecurityScore = nil }, nil},
		{"compose constructs rejected", func(in *plan.Input) {
			in.ComposeRejection = errcode.New(errcode.PlanComposeRejected, "privileged")
		}, []errcode.Code{errcode.PlanComposeRejected}},
		{"a plain compose error", func(in *plan.Input) { in.ComposeRejection = errors.New("x") }, []errcode.Code{errcode.PlanComposeRejected}},
		{"every refusal at once", func(in *plan.Input) {
			in.Filled = func(string) bool { return false }
			in.Policy.MinRuntimeIsolation = policy.IsolationVM
			in.ComposeRejection = errcode.New(errcode.PlanComposeRejected, "privileged")
		}, []errcode.Code{errcode.PlanComposeRejected, errcode.PlanSlotUnfilled, errcode.PlanNoAdapterPolicy}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			in.Spec = doc()
			c.edit(&in)
			r := plan.Make(in)
			if got := codes(r); !slices.Equal(got, c.codes) {
				t.Fatalf("refusals %v, want %v (%+v)", got, c.codes, r.Refusals)
			}
			if r.Deployable != (len(c.codes) == 0) {
				t.Fatalf("deployable = %v with refusals %v", r.Deployable, codes(r))
			}
		})
	}
}

func TestPlanUnfilledSlotsNameEachSlot(t *testing.T) {
	in := plan.Input{Spec: doc(), Policy: policy.Default(), Runtimes: []plan.Runtime{process}}
	in.Spec.Slots["queue"] = spec.Slot{Type: "rabbitmq", Required: true}
	r := plan.Make(in)
	if len(r.Refusals) != 1 || !slices.Equal(r.Refusals[0].Details["slots"].([]string), []string{"db", "queue"}) {
		t.Fatalf("refusals = %+v", r.Refusals)
	}
}

func TestPlanActionsStartDependenciesFirst(t *testing.T) {
	r := plan.Make(plan.Input{Spec: doc(), Policy: policy.Default(), Runtimes: []plan.Runtime{process}, Filled: func(string) bool { return true }})
	var steps []string
	for _, a := range r.Actions {
		steps = append(steps, a.Step+" "+a.Workload)
	}
	want := []string{"build worker", "build web", "start worker", "start web"}
	if !slices.Equal(steps, want) {
		t.Fatalf("actions = %v, want %v", steps, want)
	}
	if r.Runtime != "adp_builtin_runtime" {
		t.Fatalf("runtime = %q", r.Runtime)
	}
}

func TestPlanWarningsNeverBlock(t *testing.T) {
	d := doc()
	web := d.Workloads["web"]
	web.Run.Health, web.Resources = nil, nil
	d.Workloads["web"] = web
	r := plan.Make(plan.Input{Spec: d, Policy: policy.Default(), Runtimes: []plan.Runtime{process},
		Filled: func(string) bool { return true }, SecretSet: func(string) bool { return false }})
	var got []string
	for _, w := range r.Warnings {
		got = append(got, w.Code)
	}
	want := []string{"WARN_NO_HEALTH_CHECK", "WARN_NO_RESOURCE_LIMITS", "WARN_SECRET_NOT_SET"}
	if !slices.Equal(got, want) || !r.Deployable {
		t.Fatalf("warnings %v (want %v), deployable %v", got, want, r.Deployable)
	}
}

// TestSecretsTheRuntimeCannotDeliver: a runtime that reads secrets from
// Vault (the Nomad runtime) refuses a spec whose bound secrets another
// adapter holds (builtin), naming them and the fix; the same secrets on a
// runtime handed their values, or held in Vault, plan as deployable; a
// secret not set yet is only the warning it always was.
func TestSecretsTheRuntimeCannotDeliver(t *testing.T) {
	nomad := plan.Runtime{ID: "adp_nomad", Kind: "nomad", Primary: true, Loaded: true, Isolation: policy.IsolationNone, SecretsFrom: "vault"}
	origin := func(kind string) func(string) (string, string) {
		return func(string) (string, string) { return "adp_" + kind, kind }
	}
	set := func(string) bool { return true }
	for _, tt := range []struct {
		name    string
		rt      plan.Runtime
		set     func(string) bool
		origin  func(string) (string, string)
		refused bool
	}{
		{"builtin secret on nomad", nomad, set, origin("builtin"), true},
		{"secret of an adapter not loaded on nomad", nomad, set, func(string) (string, string) { return "adp_gone", "" }, true},
		{"vault secret on nomad", nomad, set, origin("vault"), false},
		{"builtin secret on the process runtime", process, set, origin("builtin"), false},
		{"unset secret on nomad", nomad, func(string) bool { return false }, origin("builtin"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := doc()
			d.Slots = nil
			web := d.Workloads["web"]
			web.Env = map[string]spec.EnvValue{"KEY": {Secret: "API_KEY"}}
			d.Workloads["web"] = web
			r := plan.Make(plan.Input{Spec: d, Policy: policy.Default(), Runtimes: []plan.Runtime{tt.rt}, SecretSet: tt.set, SecretOrigin: tt.origin})
			var got *errcode.Error
			for _, e := range r.Refusals {
				if e.Details["capability"] == "secrets" {
					got = e
				}
			}
			if (got != nil) != tt.refused || r.Deployable == tt.refused {
				t.Fatalf("refusals %v (deployable %t); want refused %t", r.Refusals, r.Deployable, tt.refused)
			}
			if got == nil {
				return
			}
			if got.Code != errcode.PlanCapabilityUnsupp || !slices.Equal(got.Details["secrets"].([]string), []string{"API_KEY"}) {
				t.Errorf("refusal = %s %v, want PLAN_CAPABILITY_UNSUPPORTED naming API_KEY", got.Code, got.Details)
			}
			for _, want := range []string{"vault secrets adapter the primary one", "PUT /api/v1/apps/{appID}/secrets/{key}"} {
				if !strings.Contains(got.Remedy, want) {
					t.Errorf("remedy %q does not say %q", got.Remedy, want)
				}
			}
		})
	}
}
