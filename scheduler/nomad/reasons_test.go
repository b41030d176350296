package nomad

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
)

// The payloads under testdata/nomad were captured from a real Nomad
// v2.0.5 agent (-dev, with a Vault v1.21.0 dev server behind its
// workload identities): a plan and the evaluation of a registration of
// three groups no node can take (an impossible memory ask, a constraint
// no node meets, a driver none has), and the allocations of a task whose
// template reads a Vault path that does not exist, one its policy may
// not read, and a task whose command does not exist.

func loadPayload(t *testing.T, name string, out any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "nomad", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestPlacementFailureFromNomad: each group of the captured plan and
// evaluation gets the code, the message naming Nomad's facts and the
// remedy its cause calls for.
func TestPlacementFailureFromNomad(t *testing.T) {
	var plan api.JobPlanResponse
	loadPayload(t, "plan_placement.json", &plan)
	var eval api.Evaluation
	loadPayload(t, "eval_placement.json", &eval)
	tests := []struct {
		group  string
		code   errcode.Code
		says   []string
		remedy string
		detail string
	}{
		{"huge", errcode.CapacityOversubscribe, []string{"memory on 1 node(s)", "exhausted"}, "lower the workload's resources", "dimensions_exhausted"},
		{"picky", errcode.AdapterFailed, []string{"${attr.kernel.name} = windows on 1 node(s)", "1 of 1 node(s) filtered out"}, "constraint", "constraints_filtered"},
		{"nodriver", errcode.AdapterFailed, []string{"missing drivers on 1 node(s)"}, "driver", "constraints_filtered"},
	}
	for _, src := range []struct {
		name   string
		failed map[string]*api.AllocationMetric
	}{{"plan", plan.FailedTGAllocs}, {"evaluation", eval.FailedTGAllocs}} {
		for _, tt := range tests {
			t.Run(src.name+"/"+tt.group, func(t *testing.T) {
				m := src.failed[tt.group]
				if m == nil {
					t.Fatalf("the captured %s has no failure for %s", src.name, tt.group)
				}
				e := placementFailure("svc-demo", tt.group, m)
				if e.Code != tt.code {
					t.Errorf("code = %s, want %s (%s)", e.Code, tt.code, e.Message)
				}
				for _, s := range tt.says {
					if !strings.Contains(e.Message, s) {
						t.Errorf("message %q does not say %q", e.Message, s)
					}
				}
				if !strings.Contains(e.Remedy, tt.remedy) {
					t.Errorf("remedy %q does not say %q", e.Remedy, tt.remedy)
				}
				if e.Details[tt.detail] == nil || e.Details["workload"] != tt.group {
					t.Errorf("details = %v, want %s and the workload", e.Details, tt.detail)
				}
			})
		}
	}
	if e := placementFailure("svc-demo", "huge", plan.FailedTGAllocs["huge"]); !strings.Contains(e.Details["resources_asked"].(string), "huge: memory 10000000 MB") {
		t.Errorf("resources asked = %v, want the memory ask", e.Details["resources_asked"])
	}
	// The first group by name decides a plan's refusal.
	if e, _ := errcode.As(planRefusal("svc-demo", plan.FailedTGAllocs)); e == nil || e.Details["workload"] != "huge" {
		t.Errorf("planRefusal = %v, want the failure of group huge", e)
	}
}

// TestTaskFailureFromNomad: the captured allocations' task events become
// the reasons a deploy fails with.
func TestTaskFailureFromNomad(t *testing.T) {
	tests := []struct {
		file   string
		code   errcode.Code
		reason string
		says   []string
		remedy string
	}{
		{"alloc_template_missing.json", errcode.AdapterFailed, "vault_path_missing", []string{"Vault path secret/data/svc/apps/app1/MISSING"}, "PUT /api/v1/apps/app1/secrets/MISSING"},
		{"alloc_template_denied.json", errcode.AdapterFailed, "vault_path_missing", []string{"Vault path secret/data/other/X", "policy"}, "vault_role"},
		{"alloc_driver_failure.json", errcode.StateAppExited, "driver_failure", []string{`binary "/no/such/binary" could not be found`}, "run.command"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var a api.Allocation
			loadPayload(t, tt.file, &a)
			e := taskFailure("web", taskOf(a.TaskStates, "web"))
			if e == nil {
				t.Fatal("no reason")
			}
			if e.Code != tt.code || e.Details["reason"] != tt.reason {
				t.Errorf("= %s (%v), want %s, reason %s: %s", e.Code, e.Details["reason"], tt.code, tt.reason, e.Message)
			}
			for _, s := range tt.says {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q does not say %q", e.Message, s)
				}
			}
			if !strings.Contains(e.Remedy, tt.remedy) {
				t.Errorf("remedy %q does not say %q", e.Remedy, tt.remedy)
			}
			// Status shows the same reason as the workload's problem (none
			// of these tasks runs).
			ws := workloadStatus(&a, "web", nil)
			if ws.Running || ws.Problem == nil || ws.Problem.Code != string(tt.code) || ws.Problem.Message != e.Message || ws.Problem.Remedy != e.Remedy {
				t.Errorf("status = %+v, problem %+v; want not running, with the reason", ws, ws.Problem)
			}
			// The wait on the allocation stops at once: a template that
			// waits for a Vault path is a failed setup, not a start.
			stub := &api.AllocationListStub{TaskStates: a.TaskStates, ClientStatus: a.ClientStatus, DeploymentStatus: a.DeploymentStatus}
			if state, _, _ := readinessOf(stub, "web"); state != failedSetup && state != exited {
				t.Errorf("readiness = %v, want a failed setup", state)
			}
		})
	}
	if e := taskFailure("web", &api.TaskState{State: "running", Events: []*api.TaskEvent{{Type: api.TaskStarted}}}); e != nil {
		t.Errorf("a running task's reason = %v, want none", e)
	}
	// A template that waited and then rendered: the task started.
	started := &api.TaskState{State: "running", Events: []*api.TaskEvent{{Type: eventTemplate, DisplayMessage: "Missing: vault.read(a)"}, {Type: api.TaskStarted}}}
	if missingData(started) != "" {
		t.Errorf("a started task still reads as waiting for data")
	}
}

func TestVaultPaths(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"vault.read(secret/data/a/B)", []string{"secret/data/a/B"}},
		{"vault.read(x), vault.read(y), and 2 more", []string{"x", "y"}},
		{"nomad.var.block(nomad/jobs/x@default.global)", nil},
		{"vault.read(unterminated", nil},
	} {
		if got := vaultPaths(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("vaultPaths(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzVaultPaths: any text from Nomad parses without panicking, and each
// path found is a substring of it without a parenthesis closing it early.
func FuzzVaultPaths(f *testing.F) {
	f.Add("vault.read(secret/data/svc/apps/app1/MISSING)")
	f.Add("vault.read(a), vault.read(b)")
	f.Add("vault.read(")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range vaultPaths(s) {
			if strings.Contains(p, ")") || !strings.Contains(s, "vault.read("+p+")") {
				t.Fatalf("vaultPaths(%q) found %q", s, p)
			}
		}
	})
}

func TestSecretOfAVaultPath(t *testing.T) {
	for _, tt := range []struct {
		path, app, key string
		ok             bool
	}{
		{"secret/data/svc/apps/app_1/API_KEY", "app_1", "API_KEY", true},
		{"kv/data/apps/app_1/K", "app_1", "K", true},
		{"secret/data/other/X", "", "", false},
		{"secret/data/svc/apps/app_1/..", "", "", false},
		{"apps/a", "", "", false},
	} {
		app, key, ok := secretOf(tt.path)
		if app != tt.app || key != tt.key || ok != tt.ok {
			t.Errorf("secretOf(%q) = %q, %q, %t; want %q, %q, %t", tt.path, app, key, ok, tt.app, tt.key, tt.ok)
		}
	}
}
