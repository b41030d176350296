package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/scanners/ai/fakeai"
)

// TestSecurityAIScreening: an AI screening adapter configured through
// the adapters API (kind openai, its endpoint a fake OpenAI-compatible
// server over real HTTP) is asked after the built-in scanner once a
// restart loaded it. Its finding (the Dockerfile's download piped into a
// shell, which the fake reports from the summary it parsed) is in GET
// …/security with the scanner in the basis and counted in the score; the
// key went as a bearer and is in no log line, event, audit entry or
// answer; the planted token is in no request body. A failing endpoint
// leaves the built-in findings and names the failure in the basis; with
// disable_ai_screening no request reaches the endpoint and the basis says
// AI screening is off by policy.
func TestSecurityAIScreening(t *testing.T) {
	fake := fakeai.New()
	defer fake.Close()
	const key = "sk-canary-ai-screening-key-93e1"
	h := newHarness(t)
	a := h.send("POST", api+"/adapters", jsonOf(map[string]any{
		"category": "scanner", "kind": "openai",
		"config":      map[string]any{"endpoint": fake.URL, "model": "gpt-test", "timeout_seconds": "10"},
		"credentials": map[string]string{"api_key": key},
	}))
	wantStatus(t, "configure the AI scanner", a, http.StatusCreated)
	adapterID := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	h.restart()

	token := plantedToken(t)
	app := h.app(t, "screened")
	src := tarGz(t, tarFile{name: "index.html", body: "<h1>hello</h1>\n"},
		tarFile{name: "index.js", body: "const github = '" + token + "';\n"},
		tarFile{name: "Dockerfile", body: "FROM alpine\nRUN wget -qO- https://get.example.com/setup | sh\n"})
	if up := h.upload(api+"/apps/"+app+"/source", "application/gzip", src); up.status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	h.pinSpec(t, app, h.writeSpec(t, app, siteSpec("", 0)))

	v := h.scanned(t, app)
	scanner := "ai:" + adapterID
	aiFinding := func(v security.View) *scan.Finding {
		for i, f := range v.Findings {
			if strings.HasPrefix(f.ID, scanner+":") {
				return &v.Findings[i]
			}
		}
		return nil
	}
	basisOf := func(v security.View, name string) string {
		i := slices.IndexFunc(v.Basis, func(b scan.Basis) bool { return b.Scanner == name })
		if i < 0 {
			t.Fatalf("no %s in the basis %+v", name, v.Basis)
		}
		return v.Basis[i].What
	}
	f := aiFinding(v)
	if v.State != security.Done || f == nil || f.Severity != scan.High || f.Path == nil || *f.Path != "Dockerfile" || !f.Fixable {
		t.Fatalf("the AI finding: %+v", v)
	}
	if !slices.ContainsFunc(v.Findings, func(f scan.Finding) bool { return f.ID == "secret:github-token:index.js:1" }) {
		t.Fatalf("the built-in finding is gone: %+v", v.Findings)
	}
	if *v.Score != scan.Score(v.Findings, false) || v.Counts.High < 2 {
		t.Fatalf("score %d, counts %+v for %+v", *v.Score, v.Counts, v.Findings)
	}
	if what := basisOf(v, scanner); !strings.Contains(what, "model gpt-test at "+strings.TrimPrefix(fake.URL, "http://")) {
		t.Fatalf("basis %q", what)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Authorization != "Bearer "+key {
		t.Fatalf("%d requests; the first's authorization %q", len(reqs), reqs[0].Authorization)
	}
	if body := string(reqs[0].Body); strings.Contains(body, token[4:]) || !strings.Contains(body, "withheld") {
		t.Fatal("the request body carries the planted token, or does not say index.js was withheld")
	}
	for what, text := range map[string]string{"the logs": h.logs.String(), "the events": jsonOf(h.allEvents(t)), "the audit log": jsonOf(h.auditEntries(t)),
		"the adapters": string(h.send("GET", api+"/adapters", "").body), "the result": string(h.send("GET", api+"/apps/"+app+"/security", "").body)} {
		if strings.Contains(text, key) || strings.Contains(text, token[4:]) {
			t.Errorf("%s carry the key or the token", what)
		}
	}

	t.Run("a failing endpoint", func(t *testing.T) {
		fake.Respond(func(w http.ResponseWriter, r fakeai.Request) {
			http.Error(w, "invalid key "+strings.TrimPrefix(r.Authorization, "Bearer "), http.StatusInternalServerError)
		})
		defer fake.Respond(nil)
		v := h.scanned(t, app)
		if v.State != security.Done || aiFinding(v) != nil || !slices.ContainsFunc(v.Findings, func(f scan.Finding) bool { return f.ID == "secret:github-token:index.js:1" }) {
			t.Fatalf("after a failed screening: %+v", v)
		}
		if what := basisOf(v, scanner); !strings.HasPrefix(what, "failed") || !strings.Contains(what, "answered HTTP 500") {
			t.Fatalf("basis %q", what)
		}
		if *v.Score != scan.Score(v.Findings, false) {
			t.Fatalf("score %d for %+v", *v.Score, v.Findings)
		}
		if strings.Contains(h.logs.String(), key) {
			t.Fatal("the logs carry the key")
		}
	})

	t.Run("disable_ai_screening: no request", func(t *testing.T) {
		h.setPolicy(t, map[string]any{"disable_ai_screening": true})
		before := fake.Hits()
		v := h.scanned(t, app)
		if n := fake.Hits() - before; n != 0 {
			t.Fatalf("%d requests reached the endpoint", n)
		}
		if v.State != security.Done || aiFinding(v) != nil {
			t.Fatalf("with AI screening off: %+v", v)
		}
		if what := basisOf(v, security.ScannerAI); !strings.Contains(what, "disable_ai_screening") {
			t.Fatalf("basis %q", what)
		}
		h.setPolicy(t, map[string]any{"disable_ai_screening": false})
		if v := h.scanned(t, app); aiFinding(v) == nil || fake.Hits() != before+1 {
			t.Fatalf("with AI screening on again: %d hits, %+v", fake.Hits()-before, v)
		}
	})
}
