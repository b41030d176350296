package spec

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	cases := []struct {
		name   string
		edit   func(d *Document, web, worker *Workload)
		effect string
		want   []Change
	}{
		{"nothing", func(*Document, *Workload, *Workload) {}, EffectNone, []Change{}},
		{"a build command", func(_ *Document, web, _ *Workload) { web.Build.Command = "go build ./cmd/app" }, EffectRebuild,
			[]Change{{"workloads.web.build.command", "go build -o app .", "go build ./cmd/app", EffectRebuild}}},
		{"a build kind and image", func(_ *Document, _, worker *Workload) { worker.Build = &Build{Kind: BuildImage, Image: "worker:1"} }, EffectRebuild,
			[]Change{
				{"workloads.worker.build.command", "make worker", nil, EffectRebuild},
				{"workloads.worker.build.image", nil, "worker:1", EffectRebuild},
				{"workloads.worker.build.kind", "command", "image", EffectRebuild},
			}},
		{"a port", func(_ *Document, web, _ *Workload) { web.Run.Port = 9090 }, EffectRestart,
			[]Change{{"workloads.web.run.port", n("8080"), n("9090"), EffectRestart}}},
		{"a run command", func(_ *Document, _, worker *Workload) { worker.Run.Command = []string{"./worker", "-v"} }, EffectRestart,
			[]Change{{"workloads.worker.run.command", []any{"./worker"}, []any{"./worker", "-v"}, EffectRestart}}},
		{"a health interval", func(_ *Document, web, _ *Workload) { web.Run.Health.Interval = Duration(30e9) }, EffectRestart,
			[]Change{{"workloads.web.run.health.interval", "10s", "30s", EffectRestart}}},
		{"an idle lifecycle set", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleDays: 30, IdleAction: IdleDelete} }, EffectNone,
			[]Change{
				{"lifecycle.idle_action", nil, "delete", EffectNone},
				{"lifecycle.idle_days", nil, n("30"), EffectNone},
			}},
		{"the app's env", func(d *Document, _, _ *Workload) { d.Env["LOG_LEVEL"] = Literal("debug") }, EffectRestart,
			[]Change{{"env.LOG_LEVEL", "info", "debug", EffectRestart}}},
		{"a workload's env, added and a reference changed", func(_ *Document, web, _ *Workload) {
			web.Env["NEW"] = Literal("x")
			web.Env["API_KEY"] = EnvValue{Secret: "OTHER_KEY"}
		}, EffectRestart, []Change{
			{"workloads.web.env.API_KEY.secret", "API_KEY", "OTHER_KEY", EffectRestart},
			{"workloads.web.env.NEW", nil, "x", EffectRestart},
		}},
		{"mounts", func(_ *Document, web, _ *Workload) { web.Mounts[0].Path = "/var/data" }, EffectRestart,
			[]Change{{"workloads.web.mounts", []any{map[string]any{"volume": "data", "path": "/data"}}, []any{map[string]any{"volume": "data", "path": "/var/data"}}, EffectRestart}}},
		{"resources and depends_on", func(_ *Document, web, _ *Workload) {
			web.Resources.CPUMillis = 1000
			web.DependsOn = nil
		}, EffectRestart, []Change{
			{"workloads.web.depends_on", []any{"worker"}, nil, EffectRestart},
			{"workloads.web.resources.cpu_millis", n("500"), n("1000"), EffectRestart},
		}},
		{"the primary", func(_ *Document, web, worker *Workload) { web.Primary, worker.Primary = nil, Bool(true) }, EffectRestart,
			[]Change{
				{"workloads.web.primary", true, nil, EffectRestart},
				{"workloads.worker.primary", nil, true, EffectRestart},
			}},
		{"primary: false written on the other workload", func(_ *Document, _, worker *Workload) { worker.Primary = Bool(false) }, EffectNone, []Change{}},
		{"the primary moved, the old one saying false", func(_ *Document, web, worker *Workload) { web.Primary, worker.Primary = Bool(false), Bool(true) }, EffectRestart,
			[]Change{
				{"workloads.web.primary", true, nil, EffectRestart},
				{"workloads.worker.primary", nil, true, EffectRestart},
			}},
		{"a workload added", func(d *Document, _, _ *Workload) {
			d.Workloads["cron"] = Workload{Build: &Build{Kind: BuildStatic}}
		}, EffectRebuild, []Change{{"workloads.cron", nil, map[string]any{"build": map[string]any{"kind": "static"}, "run": map[string]any{}}, EffectRebuild}}},
		{"a workload removed", func(d *Document, _, _ *Workload) { delete(d.Workloads, "worker") }, EffectRebuild,
			[]Change{{"workloads.worker", map[string]any{"build": map[string]any{"kind": "command", "command": "make worker"}, "run": map[string]any{"command": []any{"./worker"}}}, nil, EffectRebuild}}},
		{"a mounted volume's size", func(d *Document, _, _ *Workload) { d.Volumes["data"] = Volume{SizeBytes: 2 << 30} }, EffectRestart,
			[]Change{{"volumes.data.size_bytes", n("1073741824"), n("2147483648"), EffectRestart}}},
		{"a volume nothing mounts", func(d *Document, _, _ *Workload) { d.Volumes["spare"] = Volume{SizeBytes: 1} }, EffectNone,
			[]Change{{"volumes.spare.size_bytes", nil, n("1"), EffectNone}}},
		{"a slot in use", func(d *Document, _, _ *Workload) { d.Slots["db"] = Slot{Type: "postgres"} }, EffectRestart,
			[]Change{{"slots.db.required", true, nil, EffectRestart}}},
		{"a slot nothing uses", func(d *Document, _, _ *Workload) { d.Slots["cache"] = Slot{Type: "redis"} }, EffectNone,
			[]Change{{"slots.cache.type", nil, "redis", EffectNone}}},
		{"the runtime's adapter and isolation", func(d *Document, _, _ *Workload) { d.Runtime = &Runtime{Adapter: "docker", Isolation: "sandbox"} }, EffectRebuild,
			[]Change{
				{"runtime.adapter", nil, "docker", EffectRebuild},
				{"runtime.isolation", nil, "sandbox", EffectRestart},
			}},
		{"everything at once, ordered by path", func(d *Document, web, worker *Workload) {
			worker.Build.Command = "make"
			web.Run.Port = 1
			d.Env["LOG_LEVEL"] = Literal("warn")
		}, EffectRebuild, []Change{
			{"env.LOG_LEVEL", "info", "warn", EffectRestart},
			{"workloads.web.run.port", n("8080"), n("1"), EffectRestart},
			{"workloads.worker.build.command", "make worker", "make", EffectRebuild},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := mustParse(t, exampleYAML)
			b := edit(t, c.edit)
			got := Diff(a, b)
			if got.Effect != c.effect {
				t.Errorf("effect = %s, want %s", got.Effect, c.effect)
			}
			if diff := cmp.Diff(c.want, got.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			back := Diff(b, a)
			if back.Effect != got.Effect || len(back.Changes) != len(got.Changes) {
				t.Errorf("the reverse diff differs in effect or size: %+v", back)
			}
		})
	}
}

func TestDiffEncodesAsTheContractSays(t *testing.T) {
	a := mustParse(t, exampleYAML)
	b, _ := json.Marshal(Diff(a, a))
	if string(b) != `{"effect":"none","changes":[]}` {
		t.Errorf("no difference encodes as %s", b)
	}
	c := edit(t, func(_ *Document, web, _ *Workload) { web.Run.Port = 81 })
	b, _ = json.Marshal(Diff(a, c))
	if string(b) != `{"effect":"restart","changes":[{"path":"workloads.web.run.port","from":8080,"to":81,"effect":"restart"}]}` {
		t.Errorf("a port change encodes as %s", b)
	}
}

// TestDiffOfTheOnlyWorkloadsPrimaryFlag: the only workload is primary
// whether its document leaves the field out or says true, so writing it
// changes nothing; saying false takes the primary away (from true, as the
// field's absence meant, to false as written: that document is not valid).
func TestDiffOfTheOnlyWorkloadsPrimaryFlag(t *testing.T) {
	one := func(p *bool) Document {
		return Document{Workloads: map[string]Workload{"solo": {Primary: p, Build: &Build{Kind: BuildStatic}}}}
	}
	if got := Diff(one(nil), one(Bool(true))); got.Effect != EffectNone || len(got.Changes) != 0 {
		t.Errorf("absent to true on the only workload: %+v, want no change", got)
	}
	got := Diff(one(nil), one(Bool(false)))
	want := []Change{{"workloads.solo.primary", true, false, EffectRestart}}
	if diff := cmp.Diff(want, got.Changes); diff != "" {
		t.Errorf("absent to false on the only workload (-want +got):\n%s", diff)
	}
}
