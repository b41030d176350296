package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// cliRun runs the built svc as a client with stdin, in a home of its own
// (its config directory is config) and no SVC_ variables but extra; it
// returns stdout, stderr and the exit code.
func cliRun(t *testing.T, config, stdin string, extra []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(svcBin, args...)
	cmd.Env = append(childEnv(nil), "XDG_CONFIG_HOME="+config, "HOME="+config, "SVC_ADMIN_PASSWORD=", "NO_COLOR=1")
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("svc %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

// TestCLIAgainstARealServer drives the built binary the way a person
// does: svc login with a password keeps a token 0600 and later commands
// need no flags; --output json prints exactly the API's bytes; tables are
// readable; a refusal exits 1 with its code and remedy, a usage error 2;
// svc deploy --follow of a sample streams its log and ends with the
// outcome; svc logout revokes the token.
func TestCLIAgainstARealServer(t *testing.T) {
	srv := startAppServer(t, "cli")
	base := srv.p.Base()
	config := t.TempDir()
	out, errs, code := cliRun(t, config, adminPassword+"\n", nil, "login", "--addr", base, "--username", "admin")
	if code != 0 || !strings.Contains(out, "Signed in to "+base+" as admin") {
		t.Fatalf("svc login: exit %d, %q %q", code, out, errs)
	}
	path := filepath.Join(config, "svc", "config.json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v; want mode 0600", fi, err)
	}
	var kept struct{ Addr, Token string }
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &kept); err != nil || kept.Addr != base || kept.Token == "" {
		t.Fatalf("config file holds %s (%v)", b, err)
	}
	if strings.Contains(out+errs, kept.Token) {
		t.Errorf("svc login printed the token")
	}

	out, errs, code = cliRun(t, config, "", nil, "apps", "create", "CLI Demo", "--slug", "cli-demo", "-o", "json")
	if code != 0 || !strings.Contains(out, `"slug":"cli-demo"`) {
		t.Fatalf("svc apps create: exit %d, %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		path string
	}{
		{[]string{"apps", "list", "-o", "json"}, "/api/v1/apps"},
		{[]string{"apps", "get", "cli-demo", "-o", "json"}, ""},
	} {
		out, errs, code := cliRun(t, config, "", nil, tc.args...)
		if code != 0 {
			t.Fatalf("svc %v: exit %d %q", tc.args, code, errs)
		}
		if tc.path == "" {
			var a struct{ App struct{ ID string } }
			mustJSON(t, []byte(out), &a)
			tc.path = "/api/v1/apps/" + a.App.ID
		}
		r := sendToken(kept.Token, "GET", base+tc.path, nil)
		if r.err != nil || out != string(r.body) {
			t.Errorf("svc %v printed %q; the API answers %q (%v)", tc.args, out, r.body, r.err)
		}
	}
	out, _, code = cliRun(t, config, "", nil, "apps", "list")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "SLUG ") ||
		!strings.HasPrefix(lines[1], "cli-demo ") || strings.Index(lines[0], "NAME") != strings.Index(lines[1], "CLI Demo") {
		t.Errorf("svc apps list: exit %d, table:\n%s", code, out)
	}
	if _, errs, code := cliRun(t, config, "", nil, "apps", "get", "no-such-app"); code != 1 || !strings.HasPrefix(errs, "NOT_FOUND: ") {
		t.Errorf("svc apps get no-such-app: exit %d, stderr %q; want 1 and NOT_FOUND: …", code, errs)
	}
	if _, errs, code := cliRun(t, config, "", nil, "apps", "get"); code != 2 || errs == "" {
		t.Errorf("svc apps get (no app): exit %d, stderr %q; want 2", code, errs)
	}
	if _, _, code := cliRun(t, config, "", []string{"SVC_TOKEN=not-a-token"}, "apps", "list"); code != 1 {
		t.Errorf("svc apps list with a bad SVC_TOKEN: exit %d; want 1 (the environment wins over the file)", code)
	}

	id, _ := srv.onboard(t, "cli-go", "go-hello", "go", helloValues("greeting-cli", "token-cli")...)
	var a struct{ App struct{ Slug string } }
	srv.must(t, "GET", "/apps/"+id, nil, 200, &a)
	out, errs, code = cliRun(t, config, "", nil, "deploy", a.App.Slug, "--follow")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[0], "Deploying "+a.App.Slug+" revision 1") ||
		!strings.Contains(lines[len(lines)-1], "succeeded") || !strings.Contains(out, "system | ") || !strings.Contains(out, "run    | ") {
		t.Errorf("svc deploy --follow: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if out, _, code := cliRun(t, config, "", nil, "status", a.App.Slug); code != 0 || !strings.Contains(out, "web") {
		t.Errorf("svc status: exit %d:\n%s", code, out)
	}

	if out, errs, code := cliRun(t, config, "", nil, "logout"); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("svc logout: exit %d, %q %q", code, out, errs)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after logout the config file is still there: %v", err)
	}
	if r := sendToken(kept.Token, "GET", base+"/api/v1/me", nil); r.status != 401 {
		t.Errorf("the logged-out token still works: %d %s", r.status, r.body)
	}
}

// TestCLILaunchAGoSample is the README's first steps with the built
// binary: svc login, then svc launch samples/go-hello creates the app,
// uploads the directory, shows detection's proposal, accepts it with a
// value, deploys with the log followed and prints a URL at which the app
// answers over HTTP; svc logs shows the app's own output (the request
// just made) and svc open prints the same URL (stdout is no terminal: no
// browser). A directory detection knows nothing of fails with exit 1.
func TestCLILaunchAGoSample(t *testing.T) {
	first, err := testserver.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "cli-launch", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+1))
	base := srv.p.Base()
	config := t.TempDir()
	if out, errs, code := cliRun(t, config, adminPassword+"\n", nil, "login", "--addr", base, "--username", "admin"); code != 0 {
		t.Fatalf("svc login: exit %d, %q %q", code, out, errs)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	greeting := "greeting-launch-" + randomHex(t)
	out, errs, code := cliRun(t, config, "", nil, "launch", filepath.Join(root, "samples", "go-hello"), "--set", "GREETING="+greeting)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if code != 0 || !strings.HasPrefix(lines[0], "Created app go-hello ") || !strings.Contains(out, "Detected go ") ||
		!strings.Contains(out, "WORKLOAD") || !strings.Contains(out, "go build") || !strings.Contains(out, "Accepted the proposal as revision 1") ||
		!strings.Contains(out, "system | ") || !strings.HasPrefix(last, "go-hello is running at http") {
		t.Fatalf("svc launch: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	appURL := strings.TrimPrefix(last, "go-hello is running at ")
	var a struct{ App struct{ ID string } }
	mustJSON(t, []byte(cliOut(t, config, "apps", "get", "go-hello", "-o", "json")), &a)
	srv.must(t, "POST", "/apps/"+a.App.ID+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous"}, http.StatusCreated, nil)
	u, err := url.Parse(appURL)
	if err != nil {
		t.Fatal(err)
	}
	body := waitAnswer(t, u.Host, u.Path, "hello from go")
	if !strings.Contains(body, greeting) {
		t.Errorf("GET %s = %q; want the greeting set at launch", appURL, body)
	}

	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		out := cliOut(t, config, "logs", "go-hello", "--tail", "50")
		if strings.Contains(out, "GET /") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc logs go-hello: no request line within %s:\n%s", scaled(30*time.Second), out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := cliOut(t, config, "open", "go-hello"); out != appURL+"\n" {
		t.Errorf("svc open go-hello printed %q; want %q", out, appURL+"\n")
	}
	// Launching again into the same app replaces its configuration.
	out = cliOut(t, config, "launch", filepath.Join(root, "samples", "go-hello"), "--app", "go-hello", "--set", "GREETING=again-"+greeting)
	if !strings.Contains(out, "Accepted the proposal as revision 2") || !strings.HasSuffix(out, "go-hello is running at "+appURL+"\n") {
		t.Errorf("svc launch --app go-hello:\n%s", out)
	}
	waitAnswer(t, u.Host, u.Path, "again-"+greeting)

	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "notes.bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cliRun(t, config, "", nil, "launch", empty, "--name", "nothing-here"); code != 1 || !strings.Contains(errs, "detection") {
		t.Errorf("svc launch of a directory nothing detects: exit %d, stderr %q, stdout %q; want 1", code, errs, out)
	}
	if _, errs, code := cliRun(t, config, "", nil, "launch", filepath.Join(empty, "missing")); code != 2 {
		t.Errorf("svc launch of a missing directory: exit %d, %q; want 2", code, errs)
	}
}

// cliOut runs the built svc and fails the test unless it exits 0.
func cliOut(t *testing.T, config string, args ...string) string {
	t.Helper()
	out, errs, code := cliRun(t, config, "", nil, args...)
	if code != 0 {
		t.Fatalf("svc %s: exit %d, %q", strings.Join(args, " "), code, errs)
	}
	return out
}
