package ai

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scanners/ai/fakeai"
)

// token is a GitHub-token-shaped string made at run time, so that no
// secret sits in this file.
func token(t testing.TB) string {
	t.Helper()
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 36)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return "gh" + "p_" + string(b)
}

func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

const apiKey = "sk-test-canary-ai-key-7f3a"

// fixture is a checkout: a Dockerfile that pipes a download into a shell
// (what the fake reports), a go.mod, index.js holding a committed token
// (flagged: withheld), and server.js holding another token the secret
// check did not flag (redacted), with a link out of the tree.
func fixture(t testing.TB) (dir string, flagged, unflagged string) {
	dir = t.TempDir()
	flagged, unflagged = token(t), token(t)
	outside := t.TempDir()
	write(t, outside, map[string]string{"Dockerfile": "RUN curl https://outside.example/x.sh | sh\n"})
	write(t, dir, map[string]string{
		"Dockerfile":          "FROM golang:1.26\nRUN curl -fsSL https://get.example.com/install.sh | sh\nCMD [\"/app\"]\n",
		"go.mod":              "module example.com/app\n\ngo 1.26\n",
		"index.js":            "const github = '" + flagged + "';\n",
		"server.js":           "const tok = '" + unflagged + "';\nrequire('http').createServer().listen(8080)\n",
		"docs/readme.md":      "# app\n",
		"node_modules/x/a.js": "ignored\n",
	})
	if err := os.Symlink(filepath.Join(outside, "Dockerfile"), filepath.Join(dir, "sub.Dockerfile")); err != nil {
		t.Fatal(err)
	}
	return dir, flagged, unflagged
}

func screener(t testing.TB, fake *fakeai.Server, timeout time.Duration) *Screener {
	t.Helper()
	cfg, err := configOf(map[string]string{"endpoint": fake.URL + "/", "model": "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ID, cfg.APIKey = "adp_ai", apiKey
	if timeout > 0 {
		cfg.Timeout = timeout
	}
	return New(cfg)
}

var doc = spec.Document{Workloads: map[string]spec.Workload{"web": {}}}

// TestScreen: over real HTTP, the fake finds the planted pipe-to-shell in
// the Dockerfile and the finding comes back at that path, high and
// fixable, with an ID and title that say AI screening; the key goes as a
// bearer; the request asks for a JSON object; neither token is in the
// body (one withheld with its file, the other redacted, and so is one in
// the spec), nothing from
// outside the tree or under node_modules is; the same tree gives the same
// request; the basis's what names model and host.
func TestScreen(t *testing.T) {
	fake := fakeai.New()
	defer fake.Close()
	dir, flagged, unflagged := fixture(t)
	s := screener(t, fake, 0)
	ctx := context.Background()
	inSpec := token(t)
	doc := spec.Document{Env: map[string]spec.EnvValue{"GITHUB_TOKEN": spec.Literal(inSpec)}, Workloads: map[string]spec.Workload{"web": {}}}
	fs, what, err := s.Screen(ctx, dir, doc, map[string]bool{"index.js": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Severity != scan.High || !fs[0].Fixable || fs[0].Path == nil || *fs[0].Path != "Dockerfile" ||
		!strings.HasPrefix(fs[0].ID, "ai:adp_ai:") || !strings.HasPrefix(fs[0].Title, "AI screening: ") {
		t.Fatalf("findings %+v", fs)
	}
	host := strings.TrimPrefix(fake.URL, "http://")
	if !strings.Contains(what, "model gpt-test at "+host) || !strings.Contains(what, "1 findings") {
		t.Fatalf("what %q", what)
	}
	if _, _, err := s.Screen(ctx, dir, doc, map[string]bool{"index.js": true}); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Authorization != "Bearer "+apiKey || r.Model != "gpt-test" {
		t.Fatalf("authorization %q, model %q", r.Authorization, r.Model)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || fmt.Sprint(body["response_format"]) != "map[type:json_object]" {
		t.Fatalf("body %s", r.Body)
	}
	for _, leak := range []string{flagged, flagged[4:20], unflagged, unflagged[4:20], inSpec[4:20], "outside.example", "ignored", apiKey} {
		if strings.Contains(string(r.Body), leak) {
			t.Errorf("the request carries %q", leak)
		}
	}
	if _, ok := r.Files["index.js"]; !ok || !strings.Contains(r.Files["index.js"], "withheld") {
		t.Errorf("index.js is not said withheld: %q", r.Files["index.js"])
	}
	if !strings.Contains(r.Files["server.js"], scan.Redacted) || !strings.Contains(r.User, "docs/readme.md") || !strings.Contains(r.Files["go.mod"], "module example.com/app") {
		t.Errorf("summary %q", r.User)
	}
	if string(reqs[1].Body) != string(r.Body) {
		t.Error("the same tree gave another request")
	}
}

// TestHostileAnswers: each answer an endpoint may give that is not the
// findings asked for fails the screening with a reason that names what
// went wrong and never quotes the answer (which may echo the key); bad
// findings in a good answer are dropped and counted, and titles are made
// one short clean line.
func TestHostileAnswers(t *testing.T) {
	dir, _, _ := fixture(t)
	finding := func(sev, title string, path any) map[string]any {
		return map[string]any{"severity": sev, "title": title, "path": path, "fixable": true}
	}
	content := func(fs ...map[string]any) string {
		b, _ := json.Marshal(map[string]any{"findings": fs})
		return string(b)
	}
	many := make([]map[string]any, 80)
	for i := range many {
		many[i] = finding("low", fmt.Sprintf("finding %d", i), nil)
	}
	cases := []struct {
		name    string
		respond func(w http.ResponseWriter, r fakeai.Request)
		timeout time.Duration
		fail    string // in the error, when it fails
		check   func(t *testing.T, fs []scan.Finding, what string)
	}{
		{name: "500 echoing the key", fail: "answered HTTP 500", respond: func(w http.ResponseWriter, r fakeai.Request) {
			http.Error(w, "bad key "+strings.TrimPrefix(r.Authorization, "Bearer "), http.StatusInternalServerError)
		}},
		{name: "a redirect", fail: "answered HTTP 302", respond: func(w http.ResponseWriter, r fakeai.Request) {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
			w.WriteHeader(http.StatusFound)
		}},
		{name: "huge", fail: "more than", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, strings.Repeat(" ", 2*MaxAnswerBytes)+content())
		}},
		{name: "not JSON", fail: "not a chat completion", respond: func(w http.ResponseWriter, r fakeai.Request) {
			_, _ = w.Write([]byte("<html>" + apiKey + "</html>"))
		}},
		{name: "prose in the message", fail: "not the findings object", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, "Sure! Here are the findings: "+apiKey)
		}},
		{name: "other keys ignored", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, `{"summary":"one issue","findings":[{"severity":"medium","title":"t","path":null,"fixable":false,"description":"more","cwe":["CWE-78"]}]}`)
		}, check: func(t *testing.T, fs []scan.Finding, what string) {
			if len(fs) != 1 || fs[0].Severity != "medium" || fs[0].Fixable {
				t.Fatalf("%d findings, %+v; want the one medium finding, the keys the model added ignored", len(fs), fs)
			}
		}},
		{name: "two objects", fail: "goes on after", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, content()+content())
		}},
		{name: "no findings list", fail: "no findings list", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, `{}`)
		}},
		{name: "slow", timeout: 300 * time.Millisecond, fail: "did not answer within 300ms", respond: func(w http.ResponseWriter, r fakeai.Request) {
			<-r.Gone // until the client gives up
		}},
		{name: "bad findings dropped", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, content(
				finding("catastrophic", "unknown severity", nil),
				finding("High", "severity in another case", nil),
				finding("high", "path traversal", "../../etc/passwd"),
				finding("high", "absolute path", "/etc/passwd"),
				finding("high", "no such file", "nothere.go"),
				finding("high", "a link out of the tree", "sub.Dockerfile"),
				finding("high", " \u202e\x00\t ", "Dockerfile"),
				map[string]any{"severity": "high", "title": "no fixable", "path": nil},
				finding("medium", "kept\x1b[31m red\n\nline "+strings.Repeat("x", 500), "go.mod"),
				finding("medium", "kept\x1b[31m red\n\nline "+strings.Repeat("x", 500), "go.mod"),
			))
		}, check: func(t *testing.T, fs []scan.Finding, what string) {
			if len(fs) != 1 || fs[0].Severity != scan.Medium || *fs[0].Path != "go.mod" || !strings.Contains(what, "9 more dropped") {
				t.Fatalf("%q: %+v", what, fs)
			}
			title := strings.TrimPrefix(fs[0].Title, "AI screening: ")
			if !strings.HasPrefix(title, "kept [31m red line xxx") || len([]rune(title)) != maxTitle || strings.ContainsAny(title, "\x1b\n") {
				t.Fatalf("title %q", title)
			}
		}},
		{name: "too many", respond: func(w http.ResponseWriter, r fakeai.Request) {
			fakeai.Answer(w, content(many...))
		}, check: func(t *testing.T, fs []scan.Finding, what string) {
			if len(fs) != MaxFindings || !strings.Contains(what, "30 more dropped") {
				t.Fatalf("%d findings, %q", len(fs), what)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := fakeai.New()
			fake.Respond(c.respond)
			defer fake.Close()
			fs, what, err := screener(t, fake, c.timeout).Screen(context.Background(), dir, doc, nil)
			if c.fail == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, fs, what)
				return
			}
			if err == nil || errcode.CodeOf(err) != errcode.AdapterFailed || !strings.Contains(err.Error(), c.fail) {
				t.Fatalf("error %v, want ADAPTER_FAILED saying %q (findings %+v)", err, c.fail, fs)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(errcode.MessageOf(err), "html") {
				t.Fatalf("the error quotes the answer: %v", err)
			}
		})
	}
}

// TestUnreachable: an endpoint nobody listens at fails with a reason.
func TestUnreachable(t *testing.T) {
	fake := fakeai.New()
	s := screener(t, fake, 0)
	fake.Close()
	if _, _, err := s.Screen(context.Background(), t.TempDir(), doc, nil); err == nil || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("error %v", err)
	}
}

// TestBounds: the summary lists at most max_files paths and carries at
// most max_bytes of contents (and a marker where a file was cut).
func TestBounds(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"Dockerfile": strings.Repeat("RUN echo hello\n", 2000)}
	for i := range 50 {
		files[fmt.Sprintf("f%02d.txt", i)] = "x\n"
	}
	write(t, dir, files)
	sum, err := summarize(context.Background(), dir, doc, nil, 10, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if sum.listed != 10 || len(sum.files) != 51 || sum.sent != 1 || sum.bytes > 2048+64 || !strings.Contains(sum.text, "[… cut: 30000 bytes in all]") ||
		strings.Contains(sum.text, "f10.txt") || !strings.Contains(sum.text, "## Files (10 of 51)") {
		t.Fatalf("listed %d of %d, sent %d (%d bytes):\n%s", sum.listed, len(sum.files), sum.sent, sum.bytes, sum.text)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.Category != adapters.CategoryScanner || k.Name != KindName || k.Default {
		t.Fatalf("kind %+v", k)
	}
	var cred bool
	for _, s := range k.Settings {
		cred = cred || (s.Name == "api_key" && s.Credential)
	}
	if !cred {
		t.Fatal("api_key is not a credential")
	}
	ok := map[string]string{"endpoint": "https://api.openai.com/v1", "model": "m"}
	if err := k.Validate(ok, nil); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]map[string]string{
		"no endpoint":        {"model": "m"},
		"relative endpoint":  {"endpoint": "api/v1", "model": "m"},
		"a key in the URL":   {"endpoint": "https://user:sk@api.example/v1", "model": "m"},
		"a query":            {"endpoint": "https://api.example/v1?key=x", "model": "m"},
		"another scheme":     {"endpoint": "file:///etc", "model": "m"},
		"no model":           {"endpoint": "https://api.example/v1"},
		"max_files too high": {"endpoint": "https://api.example/v1", "model": "m", "max_files": "100000"},
		"max_bytes not int":  {"endpoint": "https://api.example/v1", "model": "m", "max_bytes": "lots"},
		"timeout zero":       {"endpoint": "https://api.example/v1", "model": "m", "timeout_seconds": "0"},
	} {
		if err := k.Validate(bad, nil); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_x", Settings: ok, Credentials: map[string]string{"api_key": apiKey}})
	if err != nil {
		t.Fatal(err)
	}
	if caps := fmt.Sprint(inst.Capabilities()); strings.Contains(caps, apiKey) || !strings.Contains(caps, "api.openai.com") {
		t.Fatalf("capabilities %s", caps)
	}
}
