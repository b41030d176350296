package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/errcode"
)

// exampleYAML is the API contract's example, filled in so that it is valid.
const exampleYAML = `
env: {LOG_LEVEL: info}                 # for every workload
workloads:
  web:
    primary: true
    build: {kind: go, context: ., command: "go build -o app ."}
    run: {command: ["./app"], port: 8080, health: {path: /healthz, interval: 10s, timeout: 2s}}
    env: {PORT: "8080", DATABASE_URL: {slot: db, field: url}, API_KEY: {secret: API_KEY}}
    mounts: [{volume: data, path: /data}]
    depends_on: [worker]
    resources: {cpu_millis: 500, memory_bytes: 268435456, disk_bytes: 1073741824}
  worker: {build: {kind: command, command: "make worker"}, run: {command: ["./worker"]}}
volumes: {data: {size_bytes: 1073741824}}
slots: {db: {type: postgres, required: true}}
`

func mustParse(t testing.TB, s string) Document {
	t.Helper()
	d, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return d
}

func TestParseReadsTheContractsExample(t *testing.T) {
	d := mustParse(t, exampleYAML)
	web := d.Workloads["web"]
	want := Workload{
		Primary: Bool(true),
		Build:   &Build{Kind: BuildGo, Context: ".", Command: "go build -o app ."},
		Run: Run{Command: []string{"./app"}, Port: 8080,
			Health: &Health{Path: "/healthz", Interval: Duration(10 * time.Second), Timeout: Duration(2 * time.Second)}},
		Env: map[string]EnvValue{
			"PORT":         Literal("8080"),
			"DATABASE_URL": {Slot: "db", Field: "url"},
			"API_KEY":      {Secret: "API_KEY"},
		},
		Mounts:    []Mount{{Volume: "data", Path: "/data"}},
		DependsOn: []string{"worker"},
		Resources: &Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30},
	}
	if diff := cmp.Diff(want, web); diff != "" {
		t.Errorf("workload web (-want +got):\n%s", diff)
	}
	if d.Env["LOG_LEVEL"] != Literal("info") || d.Volumes["data"].SizeBytes != 1<<30 || d.Slots["db"] != (Slot{Type: "postgres", Required: true}) {
		t.Errorf("document = %+v", d)
	}
	if err := Validate(d); err != nil {
		t.Errorf("the example does not validate: %v", err)
	}
}

func TestParseReadsJSONAndYAMLAlike(t *testing.T) {
	d := mustParse(t, exampleYAML)
	b, err := json.MarshalIndent(d, "", "\t") // tabs: JSON that YAML itself would refuse
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := mustParse(t, string(b))
	if diff := cmp.Diff(d, fromJSON); diff != "" {
		t.Errorf("JSON differs from YAML (-yaml +json):\n%s", diff)
	}
	y, err := MarshalYAML(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, mustParse(t, string(y))); diff != "" {
		t.Errorf("written as YAML and read back (-want +got):\n%s\n%s", diff, y)
	}
	// JSON escapes YAML does not know, and YAML flow style starting with {.
	if d := mustParse(t, `{"workloads":{"web":{"run":{"command":["a\/b"]}}}}`); d.Workloads["web"].Run.Command[0] != "a/b" {
		t.Errorf(`"a\/b" read as %q`, d.Workloads["web"].Run.Command[0])
	}
	if d := mustParse(t, `{workloads: {web: {run: {port: 80}}}}`); d.Workloads["web"].Run.Port != 80 {
		t.Errorf("flow YAML: %+v", d)
	}
}

func TestParseKeepsNumbersAsWritten(t *testing.T) {
	d := mustParse(t, "env: {VERSION: 1.10, RATIO: 1e3, ON: true, N: 007}\nworkloads: {web: {run: {port: 0x1F90}}}")
	want := map[string]EnvValue{"VERSION": Literal("1.10"), "RATIO": Literal("1e3"), "ON": Literal("true"), "N": Literal("7")}
	if diff := cmp.Diff(want, d.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if p := d.Workloads["web"].Run.Port; p != 8080 {
		t.Errorf("port 0x1F90 = %d", p)
	}
}

func TestParseRefuses(t *testing.T) {
	deep := strings.Repeat("{a: ", 40) + "1" + strings.Repeat("}", 40)
	many := func(section, entry string, n int) string {
		var b strings.Builder
		b.WriteString(section + ":\n")
		for i := range n {
			fmt.Fprintf(&b, "  "+entry+"\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, doc string
		code      errcode.Code
		field     string
	}{
		{"unknown field", "workloads: {web: {run: {prot: 1}}}", errcode.ValidInvalid, "workloads.web.run.prot"},
		{"unknown field, other case", "Workloads: {}", errcode.ValidInvalid, "Workloads"},
		{"unknown field in JSON", `{"workloads":{"web":{"run":{"port":1,"x":2}}}}`, errcode.ValidInvalid, "workloads.web.run.x"},
		{"string for a number", `workloads: {web: {run: {port: "80"}}}`, errcode.ValidInvalid, "workloads.web.run.port"},
		{"fraction for a number", `{"workloads":{"web":{"run":{"port":80.5}}}}`, errcode.ValidInvalid, "workloads.web.run.port"},
		{"number out of range", "workloads: {web: {resources: {cpu_millis: 99999999999999999999}}}", errcode.ValidInvalid, "workloads.web.resources.cpu_millis"},
		{"infinity", "workloads: {web: {run: {port: .inf}}}", errcode.ValidInvalid, "workloads.web.run.port"},
		{"yes is not a boolean", "workloads: {web: {primary: yes}}", errcode.ValidInvalid, "workloads.web.primary"},
		{"null boolean", "workloads: {web: {primary: }}", errcode.ValidInvalid, "workloads.web.primary"},
		{"list element", "workloads: {web: {mounts: [{volume: d, path: /d}, {volume: d, path: 5}]}}", errcode.ValidInvalid, "workloads.web.mounts[1].path"},
		{"object for a list", "workloads: {web: {depends_on: {a: 1}}}", errcode.ValidInvalid, "workloads.web.depends_on"},
		{"list for an object", "workloads: [web]", errcode.ValidInvalid, "workloads"},
		{"env list", "env: {A: [1]}", errcode.ValidInvalid, "env.A"},
		{"env null", "env: {A: null}", errcode.ValidInvalid, "env.A"},
		{"env slot without field", "env: {A: {slot: db}}", errcode.ValidInvalid, "env.A"},
		{"env secret and slot", "env: {A: {slot: db, field: url, secret: S}}", errcode.ValidInvalid, "env.A"},
		{"env empty secret", `env: {A: {secret: ""}}`, errcode.ValidInvalid, "env.A.secret"},
		{"env reference field", "env: {A: {secret: S, other: x}}", errcode.ValidInvalid, "env.A.other"},
		{"duration", `workloads: {web: {run: {health: {path: /, interval: "10 parsecs"}}}}`, errcode.ValidInvalid, "workloads.web.run.health.interval"},
		{"negative duration", `workloads: {web: {run: {health: {path: /, timeout: "-1s"}}}}`, errcode.ValidInvalid, "workloads.web.run.health.timeout"},
		{"number for a duration", `workloads: {web: {run: {health: {path: /, timeout: 5}}}}`, errcode.ValidInvalid, "workloads.web.run.health.timeout"},
		{"alias", "base: &b {run: {port: 1}}\nworkloads: {web: *b}", errcode.ValidInvalid, "workloads.web"},
		{"alias in known fields", "workloads: {web: &b {run: {port: 1}}, api: *b}", errcode.ValidInvalid, "workloads.api"},
		{"merge key", "workloads: {web: {<<: {run: {}}}}", errcode.ValidInvalid, "workloads.web"},
		{"custom tag", "workloads: !thing {}", errcode.ValidInvalid, "workloads"},
		{"duplicate key", "workloads: {}\nworkloads: {}", errcode.ValidInvalid, "workloads"},
		{"duplicate key in JSON", `{"volumes":{"a":{"size_bytes":1},"a":{"size_bytes":2}}}`, errcode.ValidInvalid, "volumes.a"},
		{"a variable set twice", "env:\n  A: one\n  A: two\n", errcode.ValidEnvAmbiguous, "env.A"},
		{"a variable set twice in JSON", `{"workloads":{"web":{"env":{"A":"1","A":"2"}}}}`, errcode.ValidEnvAmbiguous, "workloads.web.env.A"},
		{"invalid workload name", "workloads: {Web: {}}", errcode.ValidInvalid, "workloads.Web"},
		{"long volume name", "volumes: {" + strings.Repeat("v", 32) + ": {size_bytes: 1}}", errcode.ValidInvalid, "volumes." + strings.Repeat("v", 32)},
		{"slot name", "slots: {1db: {type: postgres}}", errcode.ValidInvalid, "slots.1db"},
		{"too many workloads", many("workloads", "w%d: {}", MaxWorkloads+1), errcode.ValidInvalid, "workloads"},
		{"too many volumes", many("volumes", "v%d: {size_bytes: 1}", MaxVolumes+1), errcode.ValidInvalid, "volumes"},
		{"too many slots", many("slots", "s%d: {type: x}", MaxSlots+1), errcode.ValidInvalid, "slots"},
		{"too many variables", many("env", "V%d: x", MaxEnvVars+1), errcode.ValidInvalid, "env"},
		{"too many workload variables", "workloads:\n  web:\n    " + strings.ReplaceAll(many("env", "V%d: x", MaxEnvVars+1), "\n", "\n    "), errcode.ValidInvalid, "workloads.web.env"},
		{"nested too deeply", deep, errcode.ValidInvalid, ""},
		{"two documents", "workloads: {}\n---\nworkloads: {}\n", errcode.ValidInvalid, ""},
		{"empty", "", errcode.ValidInvalid, ""},
		{"only a comment", "  \n# nothing\n", errcode.ValidInvalid, ""},
		{"a list", "[1, 2]", errcode.ValidInvalid, ""},
		{"a scalar", "hello", errcode.ValidInvalid, ""},
		{"null", "null", errcode.ValidInvalid, ""},
		{"trailing JSON", `{"workloads":{}} {}`, errcode.ValidInvalid, ""},
		{"truncated JSON", `{"workloads": {`, errcode.ValidInvalid, ""},
		{"bad YAML", "workloads: [\n", errcode.ValidInvalid, ""},
		{"not UTF-8", "env: {A: \"\xff\"}", errcode.ValidInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			e, ok := errcode.As(err)
			if !ok {
				t.Fatalf("err = %v, want a coded error", err)
			}
			if e.Code != c.code {
				t.Errorf("code = %s, want %s (%s)", e.Code, c.code, e.Message)
			}
			if got, _ := e.Details["field"].(string); c.field != "" && got != c.field {
				t.Errorf("details.field = %q, want %q (%s)", got, c.field, e.Message)
			}
			if e.Message == "" || e.Message != strings.TrimSpace(e.Message) {
				t.Errorf("message = %q", e.Message)
			}
		})
	}
}

func TestParseAcceptsARepeatedEqualVariable(t *testing.T) {
	d := mustParse(t, "env:\n  PORT: 8080\n  PORT: \"8080\"\n")
	if d.Env["PORT"] != Literal("8080") {
		t.Errorf("env = %v", d.Env)
	}
}

func TestParseRefusesOversizeDocuments(t *testing.T) {
	doc := "env: {A: \"" + strings.Repeat("x", MaxDocumentBytes) + "\"}"
	_, err := Parse([]byte(doc))
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.ValidInvalid || e.Status() != http.StatusRequestEntityTooLarge || e.Details["limit_bytes"] != MaxDocumentBytes {
		t.Fatalf("err = %#v", err)
	}
}

// An alias bomb is refused at once: aliases are never expanded.
func TestParseRefusesAliasBombs(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	_, err := Parse([]byte(b.String()))
	if !errcode.Has(err, errcode.ValidInvalid) || !strings.Contains(err.Error(), "aliases") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing the bomb took %v", d)
	}
}

func seeds() []string {
	return []string{
		exampleYAML,
		`{"workloads":{"web":{"primary":true,"build":{"kind":"static"},"run":{"port":80}}}}`,
		"env: {A: 1.10, B: {secret: B}}\nworkloads: {w: {run: {command: [a, b]}, mounts: [{volume: v, path: /v}]}}\nvolumes: {v: {size_bytes: 1}}",
		"runtime: {adapter: process, isolation: vm}\nworkloads: {w: {}}",
		"lifecycle: {idle_days: 7, idle_action: delete}\nworkloads: {w: {}}",
		`{"lifecycle":{"idle_days":0},"workloads":{}}`,
		"a: &x 1\nb: *x",
		`{"env":{"A":"1","A":"1"}}`,
		"workloads: {web: {run: {health: {path: /, interval: 1m, timeout: 1s}}}}",
	}
}

// FuzzParse: Parse never panics, refuses only with VALID_ codes, and
// whatever it accepts re-encodes (as JSON and as YAML) to a document it
// reads back equal. Validate and Diff never panic on it either.
func FuzzParse(f *testing.F) {
	for _, s := range seeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			var e *errcode.Error
			if !errors.As(err, &e) || !strings.HasPrefix(string(e.Code), "VALID_") || e.Message == "" {
				t.Fatalf("refusal is not a VALID_ error: %#v", err)
			}
			return
		}
		j, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Parse(j)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", j, err)
		}
		if !reflect.DeepEqual(d, again) {
			t.Fatalf("round trip through JSON changed the document:\n%s", cmp.Diff(d, again))
		}
		y, err := MarshalYAML(d)
		if err != nil {
			t.Fatalf("marshal YAML: %v", err)
		}
		if fromYAML, err := Parse(y); err != nil || !reflect.DeepEqual(d, fromYAML) {
			t.Fatalf("round trip through YAML: %v\n%s\n%s", err, y, cmp.Diff(d, fromYAML))
		}
		if err := Validate(d); err != nil && !strings.HasPrefix(string(errcode.CodeOf(err)), "VALID_") {
			t.Fatalf("validate: %v", err)
		}
		if r := Diff(d, again); r.Effect != EffectNone || len(r.Changes) != 0 {
			t.Fatalf("a document differs from itself: %+v", r)
		}
		Diff(Document{}, d)
	})
}
