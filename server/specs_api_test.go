package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// specExampleYAML is the API contract's example document, made valid.
const specExampleYAML = `env: {LOG_LEVEL: info}
workloads:
  web:
    primary: true
    build: {kind: go, context: ., command: "go build -o app ."}
    run: {command: ["./app"], port: 8080, health: {path: /healthz, interval: 10s, timeout: 2s}}
    env: {PORT: "8080", DATABASE_URL: {slot: db, field: url}, API_KEY: {secret: API_KEY}}
    mounts: [{volume: data, path: /data}]
    depends_on: [worker]
  worker: {build: {kind: command, command: "make worker"}, run: {command: ["./worker"]}}
volumes: {data: {size_bytes: 1073741824}}
slots: {db: {type: postgres, required: true}}
`

// specExampleJSON is the same document as a POST /specs body.
const specExampleJSON = `{"spec": {
  "env": {"LOG_LEVEL": "info"},
  "workloads": {
    "web": {
      "primary": true,
      "build": {"kind": "go", "context": ".", "command": "go build -o app ."},
      "run": {"command": ["./app"], "port": 8080, "health": {"path": "/healthz", "interval": "10s", "timeout": "2s"}},
      "env": {"PORT": "8080", "DATABASE_URL": {"slot": "db", "field": "url"}, "API_KEY": {"secret": "API_KEY"}},
      "mounts": [{"volume": "data", "path": "/data"}],
      "depends_on": ["worker"]
    },
    "worker": {"build": {"kind": "command", "command": "make worker"}, "run": {"command": ["./worker"]}}
  },
  "volumes": {"data": {"size_bytes": 1073741824}},
  "slots": {"db": {"type": "postgres", "required": true}}
}}`

type specListAnswer struct {
	Items          []spec.Summary `json:"items"`
	NextCursor     string         `json:"next_cursor"`
	PinnedRevision *uint64        `json:"pinned_revision"`
}

// specRevision writes the example document as a new revision of the app,
// as the administrator, and returns its number.
func (h *harness) specRevision(t testing.TB, appID string) uint64 {
	t.Helper()
	a := h.send("POST", api+"/apps/"+appID+"/specs", specExampleJSON)
	if a.status != http.StatusCreated {
		t.Fatalf("create a spec revision: %d %s", a.status, a.body)
	}
	return decodeAs[specAnswer](t, a).Spec.Number
}

func postYAML(h *harness, path, body string) answer {
	return h.do("POST", path, strings.NewReader(body), "Content-Type", "application/yaml")
}

func TestSpecsAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Spec App")
	base := api + "/apps/" + app + "/specs"

	before := h.auditEntries(t)
	a := h.send("POST", base, specExampleJSON)
	wantStatus(t, "create", a, http.StatusCreated)
	r1 := decodeAs[specAnswer](t, a).Spec
	if r1.Number != 1 || r1.Pinned || r1.AppID != app || !strings.HasPrefix(r1.ID, "spec_") || r1.CreatedBy == "" || r1.Spec.Workloads["web"].Run.Port != 8080 {
		t.Fatalf("created %s", a.body)
	}
	for _, field := range []string{`"revision":1`, `"pinned":false`, `"created_at":`, `"interval":"10s"`, `"DATABASE_URL":{"field":"url","slot":"db"}`} {
		if !strings.Contains(string(a.body), field) {
			t.Errorf("the answer lacks %s: %s", field, a.body)
		}
	}
	if got := newEntries(before, h.auditEntries(t)); len(got) != 1 || got[0].Action != "spec.create" || *got[0].TargetID != r1.ID {
		t.Errorf("audit = %v", actionsOf(got))
	}
	if n := countEvents(h, t); n != 0 {
		t.Errorf("creating a revision emitted %d spec events", n)
	}

	a = postYAML(h, base, strings.Replace(specExampleYAML, "port: 8080", "port: 9090", 1))
	wantStatus(t, "create from YAML", a, http.StatusCreated)
	if r2 := decodeAs[specAnswer](t, a).Spec; r2.Number != 2 || r2.Spec.Workloads["web"].Run.Port != 9090 {
		t.Fatalf("created from YAML: %s", a.body)
	}

	a = h.send("GET", base, "")
	wantStatus(t, "list", a, http.StatusOK)
	l := decodeAs[specListAnswer](t, a)
	if len(l.Items) != 2 || l.Items[0].Number != 2 || l.Items[1].Number != 1 || l.PinnedRevision != nil || strings.Contains(string(a.body), `"spec"`) {
		t.Fatalf("list = %s", a.body)
	}
	if !strings.Contains(string(a.body), `"pinned_revision":null`) {
		t.Errorf("pinned_revision is not null: %s", a.body)
	}
	page := decodeAs[specListAnswer](t, h.send("GET", base+"?limit=1", ""))
	if len(page.Items) != 1 || page.Items[0].Number != 2 || page.NextCursor == "" {
		t.Fatalf("first page = %+v", page)
	}
	page = decodeAs[specListAnswer](t, h.send("GET", base+"?limit=1&cursor="+page.NextCursor, ""))
	if len(page.Items) != 1 || page.Items[0].Number != 1 || page.NextCursor != "" {
		t.Fatalf("second page = %+v", page)
	}

	a = h.send("GET", base+"/1", "")
	wantStatus(t, "get", a, http.StatusOK)
	if got := decodeAs[specAnswer](t, a).Spec; got.ID != r1.ID || got.Spec.Workloads["worker"].Build.Command != "make worker" {
		t.Fatalf("get = %s", a.body)
	}

	before = h.auditEntries(t)
	a = h.send("POST", base+"/1/pin", "")
	wantStatus(t, "pin", a, http.StatusOK)
	if got := decodeAs[specAnswer](t, a).Spec; !got.Pinned || got.Number != 1 {
		t.Fatalf("pin = %s", a.body)
	}
	if got := newEntries(before, h.auditEntries(t)); len(got) != 1 || got[0].Action != "spec.pin" {
		t.Errorf("audit = %v", actionsOf(got))
	}
	pinned := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App.Pinned
	if pinned == nil || *pinned != (apps.Pin{SpecID: r1.ID, Revision: 1}) {
		t.Errorf("the app's pinned = %+v, want %s revision 1", pinned, r1.ID)
	}
	l = decodeAs[specListAnswer](t, h.send("GET", base, ""))
	if l.PinnedRevision == nil || *l.PinnedRevision != 1 || !l.Items[1].Pinned || l.Items[0].Pinned {
		t.Errorf("list after the pin = %+v", l)
	}

	a = h.send("GET", base+"/1/diff/2", "")
	wantStatus(t, "diff", a, http.StatusOK)
	if string(a.body) != `{"effect":"restart","changes":[{"path":"workloads.web.run.port","from":8080,"to":9090,"effect":"restart"}]}`+"\n" {
		t.Errorf("diff = %s", a.body)
	}
	if d := decodeAs[spec.DiffResult](t, h.send("GET", base+"/2/diff/2", "")); d.Effect != "none" || len(d.Changes) != 0 {
		t.Errorf("a revision against itself = %+v", d)
	}
}

func countEvents(h *harness, t *testing.T) int {
	n := 0
	for _, e := range h.allEvents(t) {
		if strings.HasPrefix(e.Type, "spec") {
			n++
		}
	}
	return n
}

func TestSpecsAPIRefuses(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Refusals")
	base := api + "/apps/" + app + "/specs"
	h.specRevision(t, app)
	ghost := api + "/apps/app_01JZZZZZZZZZZZZZZZZZZZZZZZ"
	yaml := func(from, to string) string {
		if !strings.Contains(specExampleYAML, from) {
			panic("the example lacks " + from)
		}
		return strings.Replace(specExampleYAML, from, to, 1)
	}
	huge := "env: {A: \"" + strings.Repeat("x", spec.MaxDocumentBytes) + "\"}\n"
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            errcode.Code
		field                           string
	}{
		// Every VALID_ code of the document, with the field it is about.
		{"dangling mount", "POST", base, "yaml", yaml("{volume: data,", "{volume: cache,"), 400, errcode.ValidDanglingMount, "workloads.web.mounts[0].volume"},
		{"dangling slot reference", "POST", base, "yaml", yaml("{slot: db,", "{slot: cache,"), 400, errcode.ValidDanglingSlotRef, "workloads.web.env.DATABASE_URL.slot"},
		{"dependency cycle", "POST", base, "yaml", yaml(`run: {command: ["./worker"]}}`, `run: {command: ["./worker"]}, depends_on: [web]}`), 400, errcode.ValidDependencyCycle, "workloads.web.depends_on"},
		{"env ambiguous", "POST", base, "yaml", yaml(`PORT: "8080"`, `PORT: "8080", LOG_LEVEL: debug`), 400, errcode.ValidEnvAmbiguous, "workloads.web.env.LOG_LEVEL"},
		{"env set twice", "POST", base, "json", `{"spec":{"env":{"A":"1","A":"2"},"workloads":{}}}`, 400, errcode.ValidEnvAmbiguous, "env.A"},
		{"no primary", "POST", base, "yaml", yaml("primary: true", "primary: false"), 400, errcode.ValidPrimaryWorkload, "workloads"},
		{"the only workload says primary: false (JSON)", "POST", base, "json", `{"spec":{"workloads":{"site":{"primary":false,"build":{"kind":"static"}}}}}`, 400, errcode.ValidPrimaryWorkload, "workloads.site.primary"},
		{"the only workload says primary: false (YAML)", "POST", base, "yaml", "workloads: {site: {primary: false, build: {kind: static}}}", 400, errcode.ValidPrimaryWorkload, "workloads.site.primary"},
		{"two primaries", "POST", base, "yaml", yaml("worker: {build:", "worker: {primary: true, build:"), 400, errcode.ValidPrimaryWorkload, "workloads.worker.primary"},
		{"build kind", "POST", base, "yaml", yaml("kind: go", "kind: rust"), 400, errcode.ValidInvalid, "workloads.web.build.kind"},
		{"port", "POST", base, "json", strings.Replace(specExampleJSON, `"port": 8080`, `"port": 70000`, 1), 400, errcode.ValidInvalid, "workloads.web.run.port"},
		{"unknown field in the document", "POST", base, "json", strings.Replace(specExampleJSON, `"port": 8080`, `"prot": 8080`, 1), 400, errcode.ValidInvalid, "workloads.web.run.prot"},
		{"wrong type in the document", "POST", base, "json", strings.Replace(specExampleJSON, `"port": 8080`, `"port": "8080"`, 1), 400, errcode.ValidInvalid, "workloads.web.run.port"},
		{"health path", "POST", base, "yaml", yaml("path: /healthz", "path: healthz"), 400, errcode.ValidInvalid, "workloads.web.run.health.path"},
		{"mount path", "POST", base, "yaml", yaml("path: /data}", "path: data}"), 400, errcode.ValidInvalid, "workloads.web.mounts[0].path"},
		{"secret key", "POST", base, "yaml", yaml("{secret: API_KEY}", "{secret: api-key}"), 400, errcode.ValidInvalid, "workloads.web.env.API_KEY.secret"},
		{"YAML alias", "POST", base, "yaml", "x: &a {}\nworkloads: {web: *a}", 400, errcode.ValidInvalid, "workloads.web"},
		// The body.
		{"no spec", "POST", base, "json", `{}`, 400, errcode.ValidInvalid, "spec"},
		{"null spec", "POST", base, "json", `{"spec":null}`, 400, errcode.ValidInvalid, "spec"},
		{"spec is not an object", "POST", base, "json", `{"spec":[1]}`, 400, errcode.ValidInvalid, "spec"},
		{"spec is empty", "POST", base, "json", `{"spec":""}`, 400, errcode.ValidInvalid, "spec"},
		{"unknown field in the body", "POST", base, "json", `{"spec":{},"pin":true}`, 400, errcode.ValidInvalid, "pin"},
		{"malformed JSON", "POST", base, "json", `{"spec":{`, 400, errcode.ValidInvalid, ""},
		{"malformed YAML", "POST", base, "yaml", "workloads: [", 400, errcode.ValidInvalid, ""},
		{"empty YAML", "POST", base, "yaml", "", 400, errcode.ValidInvalid, ""},
		{"wrong content type", "POST", base, "text/plain", specExampleJSON, 415, errcode.ValidInvalid, ""},
		{"document over 256 KiB", "POST", base, "yaml", huge, 413, errcode.ValidInvalid, ""},
		{"body over the limit", "POST", base, "json", `{"spec":{"env":{"A":"` + strings.Repeat("x", specBodyLimit) + `"}}}`, 413, errcode.ValidInvalid, ""},
		// Revisions and apps.
		{"revision not a number", "GET", base + "/latest", "", "", 400, errcode.ValidInvalid, "rev"},
		{"revision zero", "GET", base + "/0", "", "", 400, errcode.ValidInvalid, "rev"},
		{"revision out of range", "GET", base + "/99999999999999999999", "", "", 400, errcode.ValidInvalid, "rev"},
		{"unknown revision", "GET", base + "/7", "", "", 404, errcode.NotFound, ""},
		{"pin an unknown revision", "POST", base + "/7/pin", "", "", 404, errcode.NotFound, ""},
		{"pin a malformed revision", "POST", base + "/-1/pin", "", "", 400, errcode.ValidInvalid, "rev"},
		{"diff with a malformed revision", "GET", base + "/1/diff/x", "", "", 400, errcode.ValidInvalid, "b"},
		{"diff with an unknown revision", "GET", base + "/1/diff/9", "", "", 404, errcode.NotFound, ""},
		{"bad cursor", "GET", base + "?cursor=" + encodeCursor("abc"), "", "", 400, errcode.ValidInvalid, "cursor"},
		{"export format", "GET", api + "/apps/" + app + "/export?format=xml", "", "", 400, errcode.ValidInvalid, "format"},
		{"list of an unknown app", "GET", ghost + "/specs", "", "", 404, errcode.NotFound, ""},
		{"create for an unknown app", "POST", ghost + "/specs", "json", specExampleJSON, 404, errcode.NotFound, ""},
		{"export of an unknown app", "GET", ghost + "/export", "", "", 404, errcode.NotFound, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a answer
			switch c.ctype {
			case "yaml":
				a = postYAML(h, c.path, c.body)
			case "json", "":
				a = h.send(c.method, c.path, c.body)
			default:
				a = h.do(c.method, c.path, strings.NewReader(c.body), "Content-Type", c.ctype)
			}
			e := wantError(t, c.name, a, c.status, c.code)
			if c.field != "" && e.Details["field"] != c.field {
				t.Errorf("details.field = %v, want %s: %s", e.Details["field"], c.field, a.body)
			}
		})
	}
	if l := decodeAs[specListAnswer](t, h.send("GET", base, "")); len(l.Items) != 1 {
		t.Errorf("refused requests left revisions: %+v", l.Items)
	}
}

// TestSpecsAPIPrimaryOfTheOnlyWorkload: the only workload is primary when
// its document leaves primary out or says true (what a client sends is
// stored as sent), and refused when it says false (TestSpecsAPIRefuses).
func TestSpecsAPIPrimaryOfTheOnlyWorkload(t *testing.T) {
	h := newHarness(t)
	base := api + "/apps/" + h.app(t, "Only Workload") + "/specs"
	for body, stored := range map[string]string{
		`{"spec":{"workloads":{"site":{"build":{"kind":"static"}}}}}`:                `"workloads":{"site":{"build":{"kind":"static"},"run":{}}}`,
		`{"spec":{"workloads":{"site":{"primary":true,"build":{"kind":"static"}}}}}`: `"workloads":{"site":{"primary":true,"build":{"kind":"static"},"run":{}}}`,
	} {
		a := h.send("POST", base, body)
		wantStatus(t, body, a, http.StatusCreated)
		if !strings.Contains(string(a.body), stored) {
			t.Errorf("%s: stored %s, want %s in it", body, a.body, stored)
		}
	}
}

// A document with several problems answers the first, and lists them all.
func TestSpecsAPIListsEveryProblem(t *testing.T) {
	h := newHarness(t)
	base := api + "/apps/" + h.app(t, "Problems") + "/specs"
	doc := strings.NewReplacer("kind: go", "kind: rust", "{volume: data,", "{volume: cache,", "size_bytes: 1073741824", "size_bytes: 0").Replace(specExampleYAML)
	e := wantError(t, "several problems", postYAML(h, base, doc), 400, errcode.ValidInvalid)
	problems, _ := e.Details["problems"].([]any)
	if e.Details["field"] != "workloads.web.build.kind" || len(problems) != 3 {
		t.Fatalf("details = %v", e.Details)
	}
	if p := problems[1].(map[string]any); p["code"] != string(errcode.ValidDanglingMount) || p["field"] != "workloads.web.mounts[0].volume" {
		t.Errorf("second problem = %v", p)
	}
}

func TestSpecsExportRedactsSecrets(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Export Me")
	const secretValue, literalValue = "sv-7f3a-never-shown", "lit-91bc-never-shown"
	h.putSecret(t, app, "API_KEY", secretValue)
	export := api + "/apps/" + app + "/export"

	a := h.send("GET", export, "")
	wantStatus(t, "export without revisions", a, http.StatusOK)
	if !strings.Contains(string(a.body), `"spec":null`) || !strings.Contains(string(a.body), `"revision":null`) {
		t.Errorf("export without revisions = %s", a.body)
	}

	doc := strings.Replace(specExampleYAML, `PORT: "8080"`, `PORT: "8080", DB_PASSWORD: `+literalValue, 1)
	wantStatus(t, "create", postYAML(h, api+"/apps/"+app+"/specs", doc), http.StatusCreated)
	h.specRevision(t, app)
	wantStatus(t, "pin 1", h.send("POST", api+"/apps/"+app+"/specs/1/pin", ""), http.StatusOK)

	before := h.auditEntries(t)
	a = h.send("GET", export, "")
	wantStatus(t, "export", a, http.StatusOK)
	e := decodeAs[spec.Export](t, a)
	if e.App.Name != "Export Me" || e.App.Slug != "export-me" || *e.Revision != 1 || e.Spec == nil {
		t.Fatalf("export = %s", a.body)
	}
	if len(e.Secrets) != 1 || e.Secrets[0] != (spec.ExportSecret{Key: "API_KEY", Value: spec.Redacted}) {
		t.Errorf("secrets = %+v", e.Secrets)
	}
	if v := e.Spec.Workloads["web"].Env["DB_PASSWORD"]; v != spec.Literal(spec.Redacted) {
		t.Errorf("DB_PASSWORD = %+v", v)
	}
	if v := e.Spec.Workloads["web"].Env["PORT"]; v != spec.Literal("8080") {
		t.Errorf("PORT = %+v", v)
	}
	y := h.send("GET", export+"?format=yaml", "")
	wantStatus(t, "export as YAML", y, http.StatusOK)
	if ct := y.header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type = %q", ct)
	}
	if !strings.HasPrefix(string(y.body), "app:\n  name: Export Me\n") || !strings.Contains(string(y.body), "DB_PASSWORD: <redacted>") {
		t.Errorf("YAML export:\n%s", y.body)
	}
	for _, body := range [][]byte{a.body, y.body} {
		for _, v := range []string{secretValue, literalValue} {
			if strings.Contains(string(body), v) {
				t.Fatalf("the export carries %q:\n%s", v, body)
			}
		}
	}
	if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
		t.Errorf("an export wrote audit entries %v", actionsOf(got))
	}
}

// A viewer reads revisions, diffs and exports; writing and pinning need
// app.spec.edit, which a developer holds.
func TestSpecsVerbsByRole(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Roles")
	base := api + "/apps/" + app + "/specs"
	h.specRevision(t, app)
	viewer := h.account(t, "viewer", nil, true)
	h.grantApp(t, app, "user", viewer.userID, "role_viewer")
	dev := h.account(t, "dev", nil, true)
	h.grantApp(t, app, "user", dev.userID, "role_developer")
	for _, path := range []string{base, base + "/1", base + "/1/diff/1", api + "/apps/" + app + "/export"} {
		wantStatus(t, "viewer reads "+path, h.send("GET", path, "", viewer.bearer()...), http.StatusOK)
	}
	wantError(t, "viewer creates", h.send("POST", base, specExampleJSON, viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "viewer pins", h.send("POST", base+"/1/pin", "", viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	a := h.send("POST", base, specExampleJSON, dev.bearer()...)
	wantStatus(t, "developer creates", a, http.StatusCreated)
	if by := decodeAs[specAnswer](t, a).Spec.CreatedBy; by == "" {
		t.Errorf("created_by is empty")
	}
	wantStatus(t, "developer pins", h.send("POST", fmt.Sprintf("%s/%d/pin", base, 2), "", dev.bearer()...), http.StatusOK)
	stranger := h.account(t, "stranger", nil, true)
	wantError(t, "stranger lists", h.send("GET", base, "", stranger.bearer()...), http.StatusNotFound, errcode.NotFound)
}
