package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
