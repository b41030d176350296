package nomad_test

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
	"github.com/svchost/svc/scheduler/process"
)

func testKind(t *testing.T) adapters.Kind {
	t.Helper()
	builder, err := process.New(process.Config{WorkDir: t.TempDir(), Isolation: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = builder.Close() })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := t.TempDir()
	return nomad.KindFor(nomad.KindDeps{
		Builder:         builder,
		Artifacts:       func() (*nomad.Artifacts, error) { return nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: dir, Key: key}) },
		ArtifactBaseURL: "http://127.0.0.1:8080",
	})
}

func withDefaults(k adapters.Kind, s map[string]string) map[string]string {
	out := map[string]string{}
	for _, st := range k.Settings {
		if st.Default != "" {
			out[st.Name] = st.Default
		}
	}
	for n, v := range s {
		out[n] = v
	}
	return out
}

// brokenTemplates is an operator directory whose service template does
// not parse.
func brokenTemplates(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "service.json.tmpl"), []byte(`{"ID": {{ json .ID }`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestKindValidate(t *testing.T) {
	k := testKind(t)
	if k.Category != adapters.CategoryRuntime || k.Name != "nomad" || k.Default {
		t.Fatalf("kind = %s/%s default %v", k.Category, k.Name, k.Default)
	}
	for name, s := range map[string]map[string]string{
		"no address":       {},
		"not a URL":        {"address": "nomad:4646"},
		"bad driver":       {"address": "http://n:4646", "driver": "docker"},
		"bad builds":       {"address": "http://n:4646", "builds": "laptop"},
		"zero build cpu":   {"address": "http://n:4646", "build_cpu_millis": "0"},
		"bad build memory": {"address": "http://n:4646", "build_memory_mb": "lots"},
		"bad provider":     {"address": "http://n:4646", "service_provider": "etcd"},
		"bad artifact URL": {"address": "http://n:4646", "artifact_url": "ftp://x"},
		"bad cpu":          {"address": "http://n:4646", "cpu_mhz_per_core": "-1"},
		"no templates dir": {"address": "http://n:4646", "templates_dir": "/nonexistent/svc-templates"},
		"broken template":  {"address": "http://n:4646", "templates_dir": brokenTemplates(t)},
	} {
		if err := k.Validate(withDefaults(k, s), nil); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%s: Validate = %v, want VALID_INVALID", name, err)
		}
	}
	if err := k.Validate(withDefaults(k, map[string]string{"address": "https://nomad.example.com:4646", "driver": "exec"}), []string{"token"}); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
	for _, s := range k.Settings {
		if s.Name == "token" && !s.Credential {
			t.Errorf("the token is not a credential")
		}
	}
}

// TestKindTemplatesDir: an operator's template directory replaces the
// embedded templates of the runtime the kind opens.
func TestKindTemplatesDir(t *testing.T) {
	embedded, err := os.ReadFile(filepath.Join("..", "..", "jobs-templates", "templates", "build.json.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	custom := strings.Replace(string(embedded), `"Type": "batch",`, `"Type": "batch", "Priority": 77,`, 1)
	if custom == string(embedded) {
		t.Fatal("the embedded build template has no Type line to change")
	}
	if err := os.WriteFile(filepath.Join(dir, "build.json.tmpl"), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	fake, err := fakenomad.Start(fakenomad.Config{DataDir: t.TempDir(), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	k := testKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, err := k.Open(ctx, adapters.Config{ID: "adp_x", Settings: withDefaults(k, map[string]string{"address": fake.URL(), "templates_dir": dir})})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	// The held build never runs: its time limit ends it, after the job
	// was registered from the operator's template.
	_, err = inst.(scheduler.Builder).Build(ctx, scheduler.BuildRequest{Source: t.TempDir(), Build: buildCommandTrue, Timeout: time.Second})
	if errcode.CodeOf(err) != errcode.BuildTimeout {
		t.Fatalf("build = %v, want BUILD_TIMEOUT", err)
	}
	if !strings.Contains(string(fake.State()), `"Priority":77`) {
		t.Errorf("the build job was not rendered from the operator's template: %s", fake.State())
	}
}

func TestKindOpenCheckCapabilities(t *testing.T) {
	k := testKind(t)
	fake, err := fakenomad.Start(fakenomad.Config{DataDir: t.TempDir(), Token: "right-token", Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(settings map[string]string, token string) adapters.Instance {
		t.Helper()
		inst, err := k.Open(ctx, adapters.Config{ID: "adp_x", Settings: withDefaults(k, settings), Credentials: map[string]string{"token": token}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return inst
	}
	inst := open(map[string]string{"address": fake.URL()}, "right-token")
	if _, ok := inst.(scheduler.Runtime); !ok {
		t.Fatalf("instance %T is not a scheduler.Runtime", inst)
	}
	_, logs := inst.(scheduler.LogReader)
	_, usage := inst.(scheduler.UsageReader)
	_, host := inst.(scheduler.HostReader)
	_, execs := inst.(scheduler.Execer)
	if !logs || !usage || !host || !execs {
		t.Errorf("instance reads logs %v, usage %v, host %v, execs %v; want all", logs, usage, host, execs)
	}
	if err := inst.Check(ctx); err != nil {
		t.Errorf("check: %v", err)
	}
	caps := inst.Capabilities()
	if caps["isolation"] != policy.IsolationNone || caps["exec"] != true || caps["logs"] != true || caps["restarts"] != true || caps["usage"] != true {
		t.Errorf("raw_exec capabilities = %v", caps)
	}
	h, err := inst.(scheduler.HostReader).Host(ctx)
	if err != nil || h.CPUMillis <= 0 || h.MemoryBytes <= 0 {
		t.Errorf("host = %+v, %v; want the node's", h, err)
	}
	if c := open(map[string]string{"address": fake.URL(), "driver": "exec"}, "right-token").Capabilities(); c["isolation"] != policy.IsolationSandbox {
		t.Errorf("exec isolation = %v, want sandbox", c["isolation"])
	}
	capabilitiesAreTrue(t, open, fake.URL())

	wrong := open(map[string]string{"address": fake.URL()}, "wrong-token")
	err = wrong.Check(ctx)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.AdapterFailed || e.Remedy == "" {
		t.Errorf("check with a wrong token = %v, want ADAPTER_FAILED with a remedy", err)
	}
	if _, err := wrong.(scheduler.Runner).Status(ctx, "x"); errcode.CodeOf(err) != errcode.AdapterFailed {
		t.Errorf("status with a wrong token = %v, want ADAPTER_FAILED", err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if err := open(map[string]string{"address": "http://" + addr}, "").Check(ctx); errcode.CodeOf(err) != errcode.AdapterUnavailable {
		t.Errorf("check of an unreachable nomad = %v, want ADAPTER_UNAVAILABLE", err)
	}
}

// TestRunRefusedByThePlan: a job the cluster cannot place is refused
// before anything is registered: no room is CAPACITY_WOULD_OVERSUBSCRIBE,
// no node that can run it ADAPTER_FAILED. A build job is planned the same
// way.
func TestRunRefusedByThePlan(t *testing.T) {
	for _, tt := range []struct {
		name string
		fake func(*fakenomad.Config)
		res  *spec.Resources
		want errcode.Code
	}{
		{"no room", func(c *fakenomad.Config) { c.NodeMemoryMB = 256 }, &spec.Resources{MemoryBytes: 1 << 30}, errcode.CapacityOversubscribe},
		{"no driver", func(c *fakenomad.Config) { c.Drivers = []string{"exec"} }, nil, errcode.AdapterFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			nb := newEnv(t, options{fake: tt.fake})
			src := t.TempDir()
			if _, err := nb.rt.Build(ctx, scheduler.BuildRequest{Source: src, Build: buildCommandTrue}); errcode.CodeOf(err) != tt.want {
				t.Errorf("build on nomad = %v, want %s", err, tt.want)
			}
			if st := nb.fake.State(); strings.Contains(string(st), "-build-") {
				t.Errorf("a refused build registered a job: %s", st)
			}
			// The rest builds on the controller, to reach the run's plan.
			e := newEnv(t, options{fake: tt.fake, runtime: func(c *nomad.Config) { c.Builds = nomad.BuildsOnController }})
			_, err := e.rt.Run(ctx, scheduler.Job{ID: "job-plan", Workloads: map[string]scheduler.Task{"web": {
				Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true, Resources: tt.res,
			}}})
			if errcode.CodeOf(err) != tt.want {
				t.Fatalf("run = %v, want %s", err, tt.want)
			}
			if _, err := e.rt.Status(ctx, "job-plan"); errcode.CodeOf(err) != errcode.NotFound {
				t.Errorf("status after a refused plan = %v, want NOT_FOUND (nothing registered)", err)
			}
		})
	}
}

// capabilitiesAreTrue checks what each configuration's capabilities say
// against what the code does: builds run where the builds setting says (a
// Nomad batch job by default: build_location "nomad", with the kinds the
// build template runs and the driver's isolation; on the controller, the
// process runtime's kinds and isolation), volumes and enforced limits only
// with exec (raw_exec refuses mounts), the restart policy the job template
// gives a group, and no egress enforcement.
func capabilitiesAreTrue(t *testing.T, open func(map[string]string, string) adapters.Instance, addr string) {
	t.Helper()
	for _, tt := range []struct {
		settings                 map[string]string
		location, buildIsolation string
		volumes, limits          bool
	}{
		{map[string]string{"address": addr}, "nomad", policy.IsolationNone, false, false},
		{map[string]string{"address": addr, "driver": "exec"}, "nomad", policy.IsolationSandbox, true, true},
		{map[string]string{"address": addr, "driver": "exec", "builds": "controller"}, "controller", policy.IsolationNone, true, true},
	} {
		c := open(tt.settings, "right-token").Capabilities()
		if c["build_location"] != tt.location || c["build_isolation"] != tt.buildIsolation || c["volumes"] != tt.volumes ||
			c["resource_limits"] != tt.limits || c["egress_allowlist"] != false {
			t.Errorf("%v: capabilities = %v", tt.settings, c)
		}
		if _, ok := c["volume_kind"]; ok != tt.volumes {
			t.Errorf("%v: volume_kind %v with volumes %v", tt.settings, c["volume_kind"], tt.volumes)
		}
		builds, _ := c["builds"].([]string)
		if !slices.Equal(builds, []string{spec.BuildGo, spec.BuildNode, spec.BuildPython, spec.BuildStatic, spec.BuildCommand}) {
			t.Errorf("%v: builds = %v", tt.settings, c["builds"])
		}
		if p, _ := c["restart_policy"].(map[string]any); p["mode"] != "fail" || p["attempts"] == nil {
			t.Errorf("%v: restart_policy = %v", tt.settings, c["restart_policy"])
		}
	}
}
