package nomad_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/nomadtest"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/vaulttest"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// TestAppJob runs the one-job-per-app cases against the fake Nomad, and
// against a real agent when there is one.
func TestAppJob(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		e := newEnv(t, options{})
		runAppJobCases(t, e, e.fake.URL())
	})
	t.Run("agent", func(t *testing.T) {
		addr := startAgent(t)
		e := newEnv(t, options{address: addr, runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad }})
		runAppJobCases(t, e, addr)
	})
}

// nomadVersion is what the cases read of a version of a Nomad job.
type nomadVersion struct {
	ID         string
	Name       string
	Version    uint64
	Stop       bool
	Meta       map[string]string
	VersionTag *struct{ Name, Description string }
}

func versionsOf(t *testing.T, addr, id string) []nomadVersion {
	t.Helper()
	var out struct{ Versions []nomadVersion }
	if err := json.Unmarshal([]byte(getBody(t, addr+"/v1/job/"+id+"/versions")), &out); err != nil {
		t.Fatal(err)
	}
	return out.Versions
}

func runAppJobCases(t *testing.T, e *env, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	art := buildTrue(ctx, t, e)
	job := func(appID, id, script string) scheduler.Job {
		return scheduler.Job{ID: id, AppID: appID, Workloads: map[string]scheduler.Task{"web": {
			Artifact: art, Command: []string{"sh", "-c", script}, NoPort: true, Env: map[string]string{"DEPLOYMENT": id},
		}}}
	}
	running := func(id string) bool {
		st, err := e.rt.Status(ctx, id)
		return err == nil && st.Workloads["web"].Running
	}

	t.Run("one job per app, a version per deployment", func(t *testing.T) {
		const app = "app-one"
		nid := jobtemplates.AppJobID(app)
		if _, err := e.rt.Run(ctx, job(app, "dep_a", "exec sleep 1000")); err != nil {
			t.Fatalf("run dep_a: %v", err)
		}
		t.Cleanup(func() { _ = e.rt.Stop(context.Background(), "dep_b") })
		if _, err := e.rt.Run(ctx, job(app, "dep_b", "exec sleep 1001")); err != nil {
			t.Fatalf("run dep_b: %v", err)
		}
		// Until the previous deployment is stopped, both run: its
		// allocation beside the new version's canary.
		if !running("dep_a") || !running("dep_b") {
			t.Fatalf("after the second run: dep_a running %t, dep_b running %t; want both", running("dep_a"), running("dep_b"))
		}
		if err := e.rt.Stop(ctx, "dep_a"); err != nil {
			t.Fatalf("stop the previous deployment: %v", err)
		}
		if _, err := e.rt.Status(ctx, "dep_a"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("status of the previous deployment = %v, want NOT_FOUND", err)
		}
		if !running("dep_b") {
			t.Fatalf("stopping the previous deployment stopped the app's job")
		}
		var stubs []struct{ ID, Name string }
		_ = json.Unmarshal([]byte(getBody(t, addr+"/v1/jobs?prefix=svc-app-one")), &stubs)
		if len(stubs) != 1 || stubs[0].ID != nid || stubs[0].Name == nid {
			t.Fatalf("nomad's jobs = %+v; want one, %s, with a name of its own", stubs, nid)
		}
		tags := map[string]string{}
		for _, v := range versionsOf(t, addr, nid) {
			if v.VersionTag != nil {
				tags[v.VersionTag.Name] = v.Meta[jobtemplates.MetaDeploymentID]
			}
		}
		if tags["dep_a"] != "dep_a" || tags["dep_b"] != "dep_b" {
			t.Errorf("version tags (tag -> the version's deployment) = %v; want dep_a and dep_b on their versions", tags)
		}

		// A deploy that fails leaves the running deployment as it was:
		// the job goes back to its version.
		_, err := e.rt.Run(ctx, job(app, "dep_c", "exit 3"))
		if errcode.CodeOf(err) != errcode.StateAppExited {
			t.Fatalf("run dep_c = %v, want STATE_APP_EXITED", err)
		}
		st, err := e.rt.Status(ctx, "dep_b")
		if err != nil || !st.Workloads["web"].Running || st.Workloads["web"].Restarts != 0 {
			t.Fatalf("dep_b after a failed deploy: %+v, %v; want running, never restarted", st, err)
		}
		var cur nomadVersion
		_ = json.Unmarshal([]byte(getBody(t, addr+"/v1/job/"+nid)), &cur)
		if cur.Meta[jobtemplates.MetaDeploymentID] != "dep_b" {
			t.Errorf("the app's job runs deployment %q after the failed deploy, want dep_b", cur.Meta[jobtemplates.MetaDeploymentID])
		}
		if _, err := e.rt.Status(ctx, "dep_c"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("status of the failed deployment = %v, want NOT_FOUND", err)
		}
		// Old deployments' handles never reach the app's job.
		if err := e.rt.Restart(ctx, "dep_a"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("restart of the previous deployment = %v, want NOT_FOUND", err)
		}
		for _, id := range []string{"dep_a", "dep_c"} {
			if err := e.rt.RemoveJobLogs(ctx, id); err != nil {
				t.Errorf("remove the logs of %s: %v", id, err)
			}
			if err := e.rt.Discard(ctx, id); err != nil {
				t.Errorf("discard %s: %v", id, err)
			}
		}
		if !running("dep_b") {
			t.Fatalf("purging old deployments touched the app's job")
		}
	})

	t.Run("a job per deployment of an earlier svc converges", func(t *testing.T) {
		const app = "app-legacy"
		legacy := jobtemplates.DeploymentJobID(app, "dep_old")
		registerLegacy(t, addr, legacy, app, "dep_old")
		waitUntil(t, "the legacy job running", func() bool { return running("dep_old") })
		t.Cleanup(func() { _ = e.rt.Stop(context.Background(), "dep_new") })
		if _, err := e.rt.Run(ctx, job(app, "dep_new", "exec sleep 1000")); err != nil {
			t.Fatalf("run beside the legacy job: %v", err)
		}
		if !running("dep_old") {
			t.Fatalf("the legacy job stopped before the new one was healthy")
		}
		if err := e.rt.Stop(ctx, "dep_old"); err != nil {
			t.Fatalf("stop the legacy job: %v", err)
		}
		if !running("dep_new") {
			t.Fatalf("the app's job does not run")
		}
		if err := e.rt.RemoveJobLogs(ctx, "dep_old"); err != nil {
			t.Fatalf("remove the legacy job's logs: %v", err)
		}
		resp, err := http.Get(addr + "/v1/job/" + legacy)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("the legacy job after its logs were removed: HTTP %d, want 404 (purged)", resp.StatusCode)
		}
	})
}

// registerLegacy registers a job as svc registered one per deployment.
func registerLegacy(t *testing.T, addr, id, appID, depID string) {
	t.Helper()
	job := map[string]any{"Job": map[string]any{
		"ID": id, "Name": id, "Type": "service", "Datacenters": []string{"*"},
		"Meta": map[string]string{jobtemplates.MetaManagedBy: jobtemplates.ManagedBy, jobtemplates.MetaAppID: appID,
			jobtemplates.MetaAppSlug: appID, jobtemplates.MetaDeploymentID: depID},
		"TaskGroups": []any{map[string]any{"Name": "web", "Count": 1,
			"Tasks": []any{map[string]any{"Name": "web", "Driver": "raw_exec",
				"Config":    map[string]any{"command": "/bin/sh", "args": []string{"-c", "exec sleep 1000"}},
				"Resources": map[string]any{"CPU": 50, "MemoryMB": 32}}}}},
	}}
	b, _ := json.Marshal(job)
	req, _ := http.NewRequest(http.MethodPut, addr+"/v1/jobs", strings.NewReader(string(b)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register the legacy job: HTTP %d", resp.StatusCode)
	}
}

// TestNomadReasonsRealAgent: against a real agent whose workload
// identities log in to a real Vault, a deploy whose secrets template
// cannot read its Vault path fails at once naming the path, and one that
// asks for more memory than any node has is refused with the dimension
// Nomad found exhausted.
func TestNomadReasonsRealAgent(t *testing.T) {
	v := vaulttest.Start(t)
	a := nomadtest.Start(t, nomadtest.Options{Skip: "the reasons were tested on payloads captured from a real agent (TestTaskFailureFromNomad)",
		Config: map[string]any{"vault": map[string]any{"enabled": true, "address": v.Addr, "jwt_auth_backend_path": "jwt-nomad",
			"default_identity": map[string]any{"aud": []string{"vault.io"}, "ttl": "1h"}}}})
	waitAgent(t, a.Addr)
	root := func(method, path string, body any) {
		if code, out := vaultRequest(t, v.Addr, v.RootToken, method, path, body); code/100 != 2 {
			t.Fatalf("vault %s %s: HTTP %d %v", method, path, code, out)
		}
	}
	// Vault's JWT auth method trusts the agent's workload identities
	// (docs/cluster-mode.md gives the same recipe).
	root(http.MethodPost, "sys/auth/jwt-nomad", map[string]any{"type": "jwt"})
	root(http.MethodPost, "auth/jwt-nomad/config", map[string]any{"jwks_url": a.Addr + "/.well-known/jwks.json",
		"jwt_supported_algs": []string{"RS256", "EdDSA"}, "default_role": "nomad-workloads"})
	root(http.MethodPut, "sys/policies/acl/svc-workloads", map[string]any{"policy": `path "secret/data/svc/apps/*" { capabilities = ["read"] }`})
	root(http.MethodPost, "auth/jwt-nomad/role/nomad-workloads", map[string]any{"role_type": "jwt", "bound_audiences": []string{"vault.io"},
		"user_claim": "/nomad_job_id", "user_claim_json_pointer": true, "token_type": "service", "token_policies": []string{"svc-workloads"}, "token_period": "30m"})
	e := newEnv(t, options{address: a.Addr, runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad }})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	art := buildTrue(ctx, t, e)

	t.Run("a Vault path the template cannot read", func(t *testing.T) {
		root(http.MethodPost, "secret/data/svc/apps/app-vault/PRESENT", map[string]any{"data": map[string]any{"value": "x"}})
		_, err := e.rt.Run(ctx, scheduler.Job{ID: "dep_vault", AppID: "app-vault", Workloads: map[string]scheduler.Task{"web": {
			Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
			Env:       map[string]string{"PRESENT": "x", "ABSENT": "y"},
			SecretEnv: map[string]string{"PRESENT": "PRESENT", "ABSENT": "ABSENT"},
		}}})
		ce, ok := errcode.As(err)
		if !ok || ce.Code != errcode.AdapterFailed || !strings.Contains(ce.Message, "secret/data/svc/apps/app-vault/ABSENT") {
			t.Fatalf("run = %v, want ADAPTER_FAILED naming the Vault path", err)
		}
		t.Logf("%s: %s (remedy: %s)", ce.Code, ce.Message, ce.Remedy)
		if _, err := e.rt.Status(ctx, "dep_vault"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("status after the failed run = %v, want NOT_FOUND (stopped)", err)
		}
	})
	t.Run("an impossible memory ask", func(t *testing.T) {
		_, err := e.rt.Run(ctx, scheduler.Job{ID: "dep_huge", AppID: "app-huge", Workloads: map[string]scheduler.Task{"web": {
			Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
			Resources: &spec.Resources{MemoryBytes: 1 << 50},
		}}})
		ce, ok := errcode.As(err)
		if !ok || ce.Code != errcode.CapacityOversubscribe || !strings.Contains(ce.Message, "memory on 1 node(s)") || ce.Details["dimensions_exhausted"] == nil {
			t.Fatalf("run = %v (%+v), want CAPACITY_WOULD_OVERSUBSCRIBE naming memory", err, ce)
		}
		t.Logf("%s: %s (details: %v)", ce.Code, ce.Message, ce.Details)
	})
	t.Run("a constraint no node meets", func(t *testing.T) {
		// An operator's job template asks for a node attribute no client
		// has: Nomad filters every node out, and the refusal names the
		// constraint and how many nodes it filtered.
		b, err := os.ReadFile(filepath.Join("..", "..", "jobs-templates", "templates", "service.json.tmpl"))
		if err != nil {
			t.Fatal(err)
		}
		const anchor = `"Datacenters": {{ json .Datacenters }},`
		if !strings.Contains(string(b), anchor) {
			t.Fatalf("the service template has no %s line", anchor)
		}
		picky := strings.Replace(string(b), anchor, anchor+`
  "Constraints": [{"LTarget": "${attr.kernel.name}", "RTarget": "windows", "Operand": "="}],`, 1)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "service.json.tmpl"), []byte(picky), 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := jobtemplates.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		e2 := newEnv(t, options{address: a.Addr, runtime: func(c *nomad.Config) { c.ServiceProvider = jobtemplates.ProviderNomad; c.Templates = set }})
		_, err = e2.rt.Run(ctx, scheduler.Job{ID: "dep_picky", AppID: "app-picky", Workloads: map[string]scheduler.Task{"web": {
			Artifact: buildTrue(ctx, t, e2), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		}}})
		ce, ok := errcode.As(err)
		if !ok || ce.Code != errcode.AdapterFailed || !strings.Contains(ce.Message, "${attr.kernel.name} = windows") || ce.Details["constraints_filtered"] == nil {
			t.Fatalf("run = %v (%+v), want ADAPTER_FAILED naming the constraint that filtered the nodes", err, ce)
		}
		t.Logf("%s: %s (remedy: %s)", ce.Code, ce.Message, ce.Remedy)
	})
}
