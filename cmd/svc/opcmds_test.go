package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// seen is a request the test server received.
type seen struct {
	method, path, query, contentType string
	body                             []byte
}

// apiStub answers every request with answer and records it; an app
// looked up by slug is found in the list.
func apiStub(t *testing.T, answer string) (*[]seen, string) {
	t.Helper()
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), b})
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/apps/web":
			w.WriteHeader(404)
			io.WriteString(w, `{"code":"NOT_FOUND","message":"no app web"}`)
		case r.URL.Path == "/api/v1/apps" && r.Method == http.MethodGet:
			io.WriteString(w, `{"items":[{"id":"app_1","slug":"web"}],"next_cursor":""}`)
		case r.URL.Path == "/api/v1/apps/app_1":
			io.WriteString(w, `{"app":{"id":"app_1","slug":"web"}}`)
		default:
			io.WriteString(w, answer)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("SVC_ADDR", srv.URL)
	t.Setenv("SVC_TOKEN", "tok_x.y")
	return &got, srv.URL
}

func runCLI(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestOperationCommandSendsArgumentsFlagsAndBody(t *testing.T) {
	got, _ := apiStub(t, `{"secret":{"key":"K","version":2}}`)
	code, out, errs := runCLI("s3cret\n", "secrets", "set", "web", "K", "--value-stdin", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	last := (*got)[len(*got)-1]
	if last.method != http.MethodPut || last.path != "/api/v1/apps/app_1/secrets/K" {
		t.Errorf("sent %s %s: the slug web is resolved to app_1", last.method, last.path)
	}
	if string(last.body) != `{"value":"s3cret"}` {
		t.Errorf("body %s: the value comes from stdin less its newline", last.body)
	}
	if out != `{"secret":{"key":"K","version":2}}`+"\n" {
		t.Errorf("--output json printed %q, not the API's bytes", out)
	}
}

func TestOperationCommandBodyFileAndFlagsMerge(t *testing.T) {
	got, _ := apiStub(t, `{"token":{"id":"tok_1"},"secret":"x"}`)
	code, _, errs := runCLI(`{"name":"from-file","expires_in_days":3}`, "tokens", "create", "--body", "-", "--name", "bot", "--agent")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var body map[string]any
	if err := json.Unmarshal((*got)[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body["name"] != "bot" || body["agent"] != true || body["expires_in_days"] != float64(3) {
		t.Errorf("body %v: flags override --body's fields and keep the others", body)
	}
}

func TestOperationCommandQueryAndUsageErrors(t *testing.T) {
	got, _ := apiStub(t, `{"items":[],"next_before":""}`)
	if code, _, errs := runCLI("", "audit", "list", "--action", "app.create", "--limit", "5"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if q := (*got)[0].query; q != "action=app.create&limit=5" {
		t.Errorf("query %q", q)
	}
	for _, args := range [][]string{
		{"secrets", "set", "web"},                                      // a missing argument
		{"tokens", "create", "--expires-in-days", "soon"},              // not an integer
		{"tokens", "create", "--agent=maybe"},                          // not a boolean
		{"specs", "create", "web", "--body", "/nonexistent.json"},      // no such file
		{"secrets", "set", "web", "K", "--value-stdin", "--body", "-"}, // stdin twice
	} {
		if code, _, errs := runCLI("{}", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
}

func TestOperationCommandRefusalExits1(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		io.WriteString(w, `{"code":"STATE_INVALID","message":"the app is busy","remedy":"wait for its deploy","request_id":"req_1"}`)
	}))
	defer srv.Close()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("SVC_ADDR", srv.URL)
	code, out, errs := runCLI("", "keyring", "rotate")
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"STATE_INVALID: the app is busy", "remedy: wait for its deploy", "request: req_1"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
}

func TestJSONFlagTakesAFile(t *testing.T) {
	got, _ := apiStub(t, `{"spec":{"revision":2}}`)
	dir := t.TempDir()
	yamlFile, jsonFile := dir+"/svc.yaml", dir+"/svc.json"
	if err := os.WriteFile(yamlFile, []byte("name: web\nworkloads:\n  web:\n    port: 8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonFile, []byte(`{"name":"web"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{yamlFile: `{"spec":{"name":"web","workloads":{"web":{"port":8080}}}}`, jsonFile: `{"spec":{"name":"web"}}`} {
		if code, _, errs := runCLI("", "specs", "create", "web", "--spec", "@"+file); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if body := string((*got)[len(*got)-1].body); body != want {
			t.Errorf("%s: body %s, want %s", file, body, want)
		}
	}
	if code, _, _ := runCLI("", "specs", "create", "web", "--spec", "@"+dir+"/missing.yaml"); code != 2 {
		t.Errorf("a missing file: exit %d, want 2", code)
	}
}
