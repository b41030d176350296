package spec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// edit returns a valid document (the contract's example) changed by fn.
func edit(t *testing.T, fn func(d *Document, w, worker *Workload)) Document {
	t.Helper()
	d := mustParse(t, exampleYAML)
	web, worker := d.Workloads["web"], d.Workloads["worker"]
	fn(&d, &web, &worker)
	if d.Workloads != nil {
		if _, ok := d.Workloads["web"]; ok {
			d.Workloads["web"] = web
		}
		if _, ok := d.Workloads["worker"]; ok {
			d.Workloads["worker"] = worker
		}
	}
	return d
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(d *Document, web, worker *Workload)
		code  errcode.Code // "" when valid
		field string
	}{
		{"the example", func(*Document, *Workload, *Workload) {}, "", ""},
		{"one workload, not marked primary", func(d *Document, _, _ *Workload) {
			d.Workloads = map[string]Workload{"only": {Build: &Build{Kind: BuildStatic}}}
		}, "", ""},
		{"one workload, primary: true", func(d *Document, _, _ *Workload) {
			d.Workloads = map[string]Workload{"only": {Primary: Bool(true), Build: &Build{Kind: BuildStatic}}}
		}, "", ""},
		{"one workload, primary: false", func(d *Document, _, _ *Workload) {
			d.Workloads = map[string]Workload{"only": {Primary: Bool(false), Build: &Build{Kind: BuildStatic}}}
		}, errcode.ValidPrimaryWorkload, "workloads.only.primary"},
		{"a static build runs without a command", func(_ *Document, web, _ *Workload) {
			web.Build, web.Run.Command = &Build{Kind: BuildStatic}, nil
		}, "", ""},
		{"the same value at app and workload level", func(_ *Document, web, _ *Workload) { web.Env["LOG_LEVEL"] = Literal("info") }, "", ""},

		{"a mount of an undeclared volume", func(_ *Document, web, _ *Workload) { web.Mounts[0].Volume = "cache" },
			errcode.ValidDanglingMount, "workloads.web.mounts[0].volume"},
		{"a reference to an undeclared slot", func(_ *Document, web, _ *Workload) { web.Env["DATABASE_URL"] = EnvValue{Slot: "cache", Field: "url"} },
			errcode.ValidDanglingSlotRef, "workloads.web.env.DATABASE_URL.slot"},
		{"an app-level reference to an undeclared slot", func(d *Document, _, _ *Workload) { d.Env["CACHE"] = EnvValue{Slot: "cache", Field: "url"} },
			errcode.ValidDanglingSlotRef, "env.CACHE.slot"},
		{"a dependency cycle", func(_ *Document, _, worker *Workload) { worker.DependsOn = []string{"web"} },
			errcode.ValidDependencyCycle, "workloads.web.depends_on"},
		{"a workload depending on itself", func(_ *Document, _, worker *Workload) { worker.DependsOn = []string{"worker"} },
			errcode.ValidDependencyCycle, "workloads.worker.depends_on"},
		{"a variable set differently at app and workload level", func(_ *Document, web, _ *Workload) { web.Env["LOG_LEVEL"] = Literal("debug") },
			errcode.ValidEnvAmbiguous, "workloads.web.env.LOG_LEVEL"},
		{"no primary among two", func(_ *Document, web, _ *Workload) { web.Primary = nil },
			errcode.ValidPrimaryWorkload, "workloads"},
		{"no primary among two, both saying false", func(_ *Document, web, worker *Workload) { web.Primary, worker.Primary = Bool(false), Bool(false) },
			errcode.ValidPrimaryWorkload, "workloads"},
		{"two primaries", func(_ *Document, _, worker *Workload) { worker.Primary = Bool(true) },
			errcode.ValidPrimaryWorkload, "workloads.worker.primary"},
		{"one primary, the other saying false", func(_ *Document, _, worker *Workload) { worker.Primary = Bool(false) }, "", ""},
		{"no workloads", func(d *Document, _, _ *Workload) { d.Workloads = nil },
			errcode.ValidPrimaryWorkload, "workloads"},

		{"a dependency on no workload", func(_ *Document, web, _ *Workload) { web.DependsOn = []string{"ghost"} },
			errcode.ValidInvalid, "workloads.web.depends_on[0]"},
		{"a dependency named twice", func(_ *Document, web, _ *Workload) { web.DependsOn = []string{"worker", "worker"} },
			errcode.ValidInvalid, "workloads.web.depends_on[1]"},
		{"idle for 30 days, stopped", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleDays: 30} }, "", ""},
		{"idle for 3650 days, deleted", func(d *Document, _, _ *Workload) {
			d.Lifecycle = &Lifecycle{IdleDays: MaxIdleDays, IdleAction: IdleDelete}
		}, "", ""},
		{"idle never", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleAction: IdleStop} }, "", ""},
		{"idle for a negative number of days", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleDays: -1} },
			errcode.ValidInvalid, "lifecycle.idle_days"},
		{"idle for more than ten years", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleDays: MaxIdleDays + 1} },
			errcode.ValidInvalid, "lifecycle.idle_days"},
		{"an unknown idle action", func(d *Document, _, _ *Workload) { d.Lifecycle = &Lifecycle{IdleDays: 3, IdleAction: "archive"} },
			errcode.ValidInvalid, "lifecycle.idle_action"},
		{"an unknown build kind", func(_ *Document, web, _ *Workload) { web.Build.Kind = "rust" },
			errcode.ValidInvalid, "workloads.web.build.kind"},
		{"no build", func(_ *Document, web, _ *Workload) { web.Build = nil },
			errcode.ValidInvalid, "workloads.web.build"},
		{"an image build without an image", func(_ *Document, web, _ *Workload) { web.Build = &Build{Kind: BuildImage} },
			errcode.ValidInvalid, "workloads.web.build.image"},
		{"an image on a go build", func(_ *Document, web, _ *Workload) { web.Build.Image = "nginx:1" },
			errcode.ValidInvalid, "workloads.web.build.image"},
		{"a command build without a command", func(_ *Document, _, worker *Workload) { worker.Build.Command = " " },
			errcode.ValidInvalid, "workloads.worker.build.command"},
		{"a dockerfile on a go build", func(_ *Document, web, _ *Workload) { web.Build.Dockerfile = "Dockerfile" },
			errcode.ValidInvalid, "workloads.web.build.dockerfile"},
		{"a context outside the source", func(_ *Document, web, _ *Workload) { web.Build.Context = "../other" },
			errcode.ValidInvalid, "workloads.web.build.context"},
		{"an absolute context", func(_ *Document, web, _ *Workload) { web.Build.Context = "/src" },
			errcode.ValidInvalid, "workloads.web.build.context"},
		{"no run command for a go build", func(_ *Document, web, _ *Workload) { web.Run.Command = nil },
			errcode.ValidInvalid, "workloads.web.run.command"},
		{"an empty program", func(_ *Document, web, _ *Workload) { web.Run.Command = []string{""} },
			errcode.ValidInvalid, "workloads.web.run.command[0]"},
		{"a port above 65535", func(_ *Document, web, _ *Workload) { web.Run.Port = 70000 },
			errcode.ValidInvalid, "workloads.web.run.port"},
		{"a negative port", func(_ *Document, web, _ *Workload) { web.Run.Port = -1 },
			errcode.ValidInvalid, "workloads.web.run.port"},
		{"a health path without /", func(_ *Document, web, _ *Workload) { web.Run.Health.Path = "healthz" },
			errcode.ValidInvalid, "workloads.web.run.health.path"},
		{"a health check without a port", func(_ *Document, _, worker *Workload) { worker.Run.Health = &Health{Path: "/"} },
			errcode.ValidInvalid, "workloads.worker.run.health"},
		{"a timeout as long as the interval", func(_ *Document, web, _ *Workload) { web.Run.Health.Timeout = web.Run.Health.Interval },
			errcode.ValidInvalid, "workloads.web.run.health.timeout"},
		{"a timeout longer than the default interval", func(_ *Document, web, _ *Workload) {
			web.Run.Health = &Health{Path: "/", Timeout: Duration(time.Minute)}
		}, errcode.ValidInvalid, "workloads.web.run.health.timeout"},
		{"a negative interval", func(_ *Document, web, _ *Workload) { web.Run.Health.Interval = Duration(-time.Second) },
			errcode.ValidInvalid, "workloads.web.run.health.interval"},
		{"negative resources", func(_ *Document, web, _ *Workload) { web.Resources.MemoryBytes = -1 },
			errcode.ValidInvalid, "workloads.web.resources.memory_bytes"},
		{"a relative mount path", func(_ *Document, web, _ *Workload) { web.Mounts[0].Path = "data" },
			errcode.ValidInvalid, "workloads.web.mounts[0].path"},
		{"an unclean mount path", func(_ *Document, web, _ *Workload) { web.Mounts[0].Path = "/data/../etc" },
			errcode.ValidInvalid, "workloads.web.mounts[0].path"},
		{"a mount at /", func(_ *Document, web, _ *Workload) { web.Mounts[0].Path = "/" },
			errcode.ValidInvalid, "workloads.web.mounts[0].path"},
		{"two mounts at one path", func(_ *Document, web, _ *Workload) { web.Mounts = append(web.Mounts, web.Mounts[0]) },
			errcode.ValidInvalid, "workloads.web.mounts[1].path"},
		{"a variable name starting with a digit", func(_ *Document, web, _ *Workload) { web.Env["1PORT"] = Literal("1") },
			errcode.ValidInvalid, "workloads.web.env.1PORT"},
		{"a variable name with a dash", func(d *Document, _, _ *Workload) { d.Env["LOG-LEVEL"] = Literal("1") },
			errcode.ValidInvalid, "env.LOG-LEVEL"},
		{"a NUL in a value", func(d *Document, _, _ *Workload) { d.Env["LOG_LEVEL"] = Literal("a\x00b") },
			errcode.ValidInvalid, "env.LOG_LEVEL"},
		{"a secret reference that is not a key", func(_ *Document, web, _ *Workload) { web.Env["API_KEY"] = EnvValue{Secret: "api-key"} },
			errcode.ValidInvalid, "workloads.web.env.API_KEY.secret"},
		{"a slot field that is not a name", func(_ *Document, web, _ *Workload) { web.Env["DATABASE_URL"] = EnvValue{Slot: "db", Field: "URL"} },
			errcode.ValidInvalid, "workloads.web.env.DATABASE_URL.field"},
		{"a volume without a size", func(d *Document, _, _ *Workload) { d.Volumes["data"] = Volume{} },
			errcode.ValidInvalid, "volumes.data.size_bytes"},
		{"a slot without a type", func(d *Document, _, _ *Workload) { d.Slots["db"] = Slot{Required: true} },
			errcode.ValidInvalid, "slots.db.type"},
		{"an unknown isolation", func(d *Document, _, _ *Workload) { d.Runtime = &Runtime{Isolation: "chroot"} },
			errcode.ValidInvalid, "runtime.isolation"},
		{"a workload name that is not a name", func(d *Document, _, _ *Workload) { d.Workloads["Admin"] = Workload{Build: &Build{Kind: BuildStatic}} },
			errcode.ValidInvalid, "workloads.Admin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(edit(t, c.edit))
			if c.code == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			e, ok := errcode.As(err)
			if !ok {
				t.Fatalf("err = %v, want %s", err, c.code)
			}
			if e.Code != c.code || e.Details["field"] != c.field {
				t.Errorf("got %s at %v, want %s at %s: %s", e.Code, e.Details["field"], c.code, c.field, e.Message)
			}
			if ps, _ := e.Details["problems"].([]Problem); len(ps) == 0 || ps[0].Code != e.Code || ps[0].Field != c.field {
				t.Errorf("details.problems = %+v", e.Details["problems"])
			}
		})
	}
}

// Every problem is listed; the first leads.
func TestValidateListsEveryProblem(t *testing.T) {
	d := edit(t, func(d *Document, web, worker *Workload) {
		web.Run.Port = 0
		web.Run.Health = nil
		web.Mounts[0].Volume = "nope"
		worker.DependsOn = []string{"web"}
		d.Volumes["data"] = Volume{}
	})
	e, _ := errcode.As(Validate(d))
	if e == nil {
		t.Fatal("no error")
	}
	ps := e.Details["problems"].([]Problem)
	var got []string
	for _, p := range ps {
		got = append(got, string(p.Code)+" "+p.Field)
	}
	want := []string{
		"VALID_DANGLING_MOUNT workloads.web.mounts[0].volume",
		"VALID_INVALID volumes.data.size_bytes",
		"VALID_DEPENDENCY_CYCLE workloads.web.depends_on",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e.Code != errcode.ValidDanglingMount || e.Details["cycle"] != nil {
		t.Errorf("leading error %s, details %v", e.Code, e.Details)
	}
}

func TestValidateNamesTheCycle(t *testing.T) {
	d := edit(t, func(d *Document, web, worker *Workload) {
		d.Workloads["cron"] = Workload{Build: &Build{Kind: BuildStatic}, DependsOn: []string{"web"}}
		worker.DependsOn = []string{"cron"}
	})
	e, _ := errcode.As(Validate(d))
	if e == nil || e.Code != errcode.ValidDependencyCycle {
		t.Fatalf("err = %v", e)
	}
	if got := strings.Join(e.Details["cycle"].([]string), " "); got != "cron web worker cron" {
		t.Errorf("cycle = %s", got)
	}
}

func TestPrimary(t *testing.T) {
	d := mustParse(t, exampleYAML)
	if p := d.Primary(); p != "web" {
		t.Errorf("primary = %q", p)
	}
	one := Document{Workloads: map[string]Workload{"solo": {}}}
	if p := one.Primary(); p != "solo" {
		t.Errorf("the only workload: primary = %q", p)
	}
	if p := (Document{}).Primary(); p != "" {
		t.Errorf("no workloads: primary = %q", p)
	}
}

// threeWorkloads is a typical document: a web front, a worker and a cron
// job, with a database, a volume and secrets.
const threeWorkloads = `
env: {LOG_LEVEL: info}
workloads:
  web:
    primary: true
    build: {kind: go, context: ., command: "go build -o app ."}
    run: {command: ["./app"], port: 8080, health: {path: /healthz, interval: 10s, timeout: 2s}}
    env: {PORT: "8080", DATABASE_URL: {slot: db, field: url}, API_KEY: {secret: API_KEY}}
    mounts: [{volume: data, path: /data}]
    depends_on: [worker]
    resources: {cpu_millis: 500, memory_bytes: 268435456, disk_bytes: 1073741824}
  worker:
    build: {kind: command, command: "make worker"}
    run: {command: ["./worker", "--queue", "default"]}
    env: {DATABASE_URL: {slot: db, field: url}}
  cron:
    build: {kind: python, command: "pip install -r requirements.txt"}
    run: {command: [python, cron.py]}
    env: {SCHEDULE: "*/5 * * * *", DATABASE_URL: {slot: db, field: url}}
    depends_on: [worker]
volumes: {data: {size_bytes: 1073741824}}
slots: {db: {type: postgres, required: true}}
`

func BenchmarkParseValidate(b *testing.B) {
	doc := []byte(threeWorkloads)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Parse(doc)
		if err != nil {
			b.Fatal(err)
		}
		if err := Validate(d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPrimaryFlag: primary on a workload is absent, true or false, and the
// three mean different things only on a document's only workload: absent
// is primary there (as it always was), an explicit false names no primary.
// The document reads the same from YAML and JSON, and encodes back what it
// was given: absent stays absent, false stays false.
func TestPrimaryFlag(t *testing.T) {
	cases := []struct {
		name, yaml  string
		primary     string // Document.Primary
		code        errcode.Code
		field       string
		encodedFlag string // the flag as the document encodes it: "", "true" or "false"
	}{
		{"the only workload, absent", "workloads: {solo: {build: {kind: static}}}", "solo", "", "", ""},
		{"the only workload, true", "workloads: {solo: {primary: true, build: {kind: static}}}", "solo", "", "", "true"},
		{"the only workload, false", "workloads: {solo: {primary: false, build: {kind: static}}}", "", errcode.ValidPrimaryWorkload, "workloads.solo.primary", "false"},
		{"two, one true and one false", "workloads: {a: {primary: true, build: {kind: static}}, b: {primary: false, build: {kind: static}}}", "a", "", "", ""},
		{"two, both false", "workloads: {a: {primary: false, build: {kind: static}}, b: {primary: false, build: {kind: static}}}", "", errcode.ValidPrimaryWorkload, "workloads", ""},
		{"two, both absent", "workloads: {a: {build: {kind: static}}, b: {build: {kind: static}}}", "", errcode.ValidPrimaryWorkload, "workloads", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fromYAML := mustParse(t, c.yaml)
			asJSON, err := json.Marshal(fromYAML)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON := mustParse(t, string(asJSON))
			for form, d := range map[string]Document{"yaml": fromYAML, "json": fromJSON} {
				if got := d.Primary(); got != c.primary {
					t.Errorf("%s: Primary() = %q, want %q", form, got, c.primary)
				}
				e, _ := errcode.As(Validate(d))
				switch {
				case c.code == "" && e != nil:
					t.Errorf("%s: Validate = %v, want valid", form, e)
				case c.code != "" && (e == nil || e.Code != c.code || e.Details["field"] != c.field):
					t.Errorf("%s: Validate = %v, want %s at %s", form, e, c.code, c.field)
				}
			}
			if c.encodedFlag == "" && len(fromYAML.Workloads) == 1 {
				if strings.Contains(string(asJSON), `"primary"`) {
					t.Errorf("an absent flag encodes: %s", asJSON)
				}
			}
			if c.encodedFlag != "" && !strings.Contains(string(asJSON), `"primary":`+c.encodedFlag) {
				t.Errorf("encoded %s, want \"primary\":%s in it", asJSON, c.encodedFlag)
			}
		})
	}
}

// TestStoredDocumentsReadAsBefore: documents stored while primary was a
// bool with omitempty (absent, or true; never false) decode to the same
// meaning and encode to the same bytes, so content hashes and exports of
// stored revisions do not change.
func TestStoredDocumentsReadAsBefore(t *testing.T) {
	for _, stored := range []string{
		`{"workloads":{"web":{"build":{"kind":"static"},"run":{}}}}`,
		`{"workloads":{"web":{"primary":true,"build":{"kind":"static"},"run":{}}}}`,
		`{"workloads":{"web":{"primary":true,"build":{"kind":"static"},"run":{"port":8080}},"worker":{"build":{"kind":"command","command":"make"},"run":{"command":["./w"]}}}}`,
	} {
		var d Document
		if err := json.Unmarshal([]byte(stored), &d); err != nil {
			t.Fatal(err)
		}
		if d.Primary() != "web" || Validate(d) != nil {
			t.Errorf("%s: primary %q, validate %v; want web and valid", stored, d.Primary(), Validate(d))
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != stored {
			t.Errorf("stored %s encodes again as %s", stored, again)
		}
	}
}

// TestIdle: the days and action a document's lifecycle asks for, stop
// when it names none, never when it sets no days.
func TestIdle(t *testing.T) {
	cases := []struct {
		lc     *Lifecycle
		days   int
		action string
	}{
		{nil, 0, ""},
		{&Lifecycle{}, 0, ""},
		{&Lifecycle{IdleAction: IdleDelete}, 0, ""},
		{&Lifecycle{IdleDays: 7}, 7, IdleStop},
		{&Lifecycle{IdleDays: 7, IdleAction: IdleDelete}, 7, IdleDelete},
	}
	for _, c := range cases {
		days, action := Document{Lifecycle: c.lc}.Idle()
		if days != c.days || action != c.action {
			t.Errorf("%+v: Idle() = %d, %q; want %d, %q", c.lc, days, action, c.days, c.action)
		}
	}
}
