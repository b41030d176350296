package e2e

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/internal/testserver"
)

// cliAs is the built svc run by one person against one server: SVC_ADDR
// and SVC_TOKEN name the server and the token, the home is its own.
type cliAs struct {
	base, token, config string
}

func (c cliAs) run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return cliRun(t, c.config, stdin, []string{"SVC_ADDR=" + c.base, "SVC_TOKEN=" + c.token}, args...)
}

// ok runs svc and fails the test unless it exits 0 with nothing on stderr.
func (c cliAs) ok(t *testing.T, args ...string) string {
	t.Helper()
	return c.okIn(t, "", args...)
}

func (c cliAs) okIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errs, code := c.run(t, stdin, args...)
	if code != 0 || errs != "" {
		t.Fatalf("svc %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, errs, out)
	}
	return out
}

// decoded runs svc with --output json and decodes what it printed.
func (c cliAs) decoded(t *testing.T, out any, args ...string) {
	t.Helper()
	mustJSON(t, []byte(c.ok(t, append(args, "-o", "json")...)), out)
}

// get is the API's answer to GET path (under /api/v1) with the token.
func (c cliAs) get(t *testing.T, path string) []byte {
	t.Helper()
	r := sendToken(c.token, "GET", c.base+"/api/v1"+path, nil)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", path, r.status, r.body, r.err)
	}
	return r.body
}

// sameAsAPI runs svc with --output json and checks that it printed
// exactly the API's bytes for GET path (and a newline).
func (c cliAs) sameAsAPI(t *testing.T, path string, args ...string) []byte {
	t.Helper()
	out := c.ok(t, append(args, "-o", "json")...)
	want := c.get(t, path)
	if strings.TrimSuffix(out, "\n") != strings.TrimSuffix(string(want), "\n") || !strings.HasSuffix(out, "\n") {
		t.Errorf("svc %s -o json printed\n%s\nGET %s answers\n%s", strings.Join(args, " "), out, path, want)
	}
	return want
}

// refused runs svc and checks a refusal: exit 1, nothing on stdout, and
// on stderr the API's code first, then the remedy when wantRemedy.
func (c cliAs) refused(t *testing.T, code string, wantRemedy bool, args ...string) string {
	t.Helper()
	out, errs, exit := c.run(t, "", args...)
	if exit != 1 || out != "" || !strings.HasPrefix(errs, code+": ") || wantRemedy && !strings.Contains(errs, "\nremedy: ") {
		t.Errorf("svc %s: exit %d, stdout %q, stderr %q; want 1 and %s: … (remedy: %v)", strings.Join(args, " "), exit, out, errs, code, wantRemedy)
	}
	return errs
}

// misused runs svc and checks a usage error: exit 2, a reason on stderr.
func (c cliAs) misused(t *testing.T, stdin string, args ...string) {
	t.Helper()
	out, errs, exit := c.run(t, stdin, args...)
	if exit != 2 || strings.TrimSpace(errs) == "" {
		t.Errorf("svc %s: exit %d, stdout %q, stderr %q; want 2 and a reason", strings.Join(args, " "), exit, out, errs)
	}
}

var columnRE = regexp.MustCompile(`\S+(?: \S+)*`)

// checkTable checks a table for people (its first block of lines): the
// header's columns are aligned on every row (each cell starts where its
// header does, after a space), and some row has the cells pairs names
// (header, value that cell starts with, …).
func checkTable(t *testing.T, out string, pairs ...string) {
	t.Helper()
	block, _, _ := strings.Cut(strings.TrimLeft(out, "\n"), "\n\n")
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	if len(lines) < 2 {
		t.Errorf("not a table with rows:\n%s", out)
		return
	}
	cols := map[string]int{}
	for _, loc := range columnRE.FindAllStringIndex(lines[0], -1) {
		cols[lines[0][loc[0]:loc[1]]] = loc[0]
	}
	for _, line := range lines[1:] {
		row := []rune(line) // aligned on characters, not bytes
		for _, at := range cols {
			if at > 0 && (len(row) <= at || row[at-1] != ' ' || row[at] == ' ') {
				t.Errorf("row %q is not aligned on the header at column %d:\n%s", row, at, out)
				return
			}
		}
	}
	for _, line := range lines[1:] {
		row := []rune(line)
		found := true
		for i := 0; i+1 < len(pairs); i += 2 {
			at, ok := cols[pairs[i]]
			if !ok {
				t.Errorf("no column %s in the header %q", pairs[i], lines[0])
				return
			}
			if len(row) < at || !strings.HasPrefix(string(row[at:]), pairs[i+1]) {
				found = false
			}
		}
		if found {
			return
		}
	}
	t.Errorf("no row with %q in the table:\n%s", pairs, out)
}

// checkFields checks name: value lines for people: values aligned, and
// each of pairs (name, value) present.
func checkFields(t *testing.T, out string, pairs ...string) {
	t.Helper()
	block, _, _ := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	values := map[string]string{}
	valueAt := -1
	for _, l := range lines {
		name, rest, ok := strings.Cut(l, ":  ")
		if !ok {
			t.Errorf("line %q is not name:  value:\n%s", l, out)
			return
		}
		at := len(l) - len(strings.TrimLeft(rest, " "))
		if valueAt >= 0 && at != valueAt {
			t.Errorf("values not aligned at line %q:\n%s", l, out)
		}
		valueAt = at
		values[name] = strings.TrimSpace(rest)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if got, ok := values[pairs[i]]; !ok || got != pairs[i+1] {
			t.Errorf("field %s = %q (there: %v); want %q in:\n%s", pairs[i], got, ok, pairs[i+1], out)
		}
	}
}

// signInAs mints a token for a user by signing in with a password.
func signInAs(t *testing.T, base, username, password string) string {
	t.Helper()
	c, err := api.New(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, scaled(30*time.Second))
	if _, err := c.SignIn(ctx, username, password); err != nil {
		t.Fatalf("sign in as %s: %v", username, err)
	}
	_, secret, err := c.CreateToken(ctx, api.NewToken{Name: "e2e"}, false)
	if err != nil {
		t.Fatalf("mint a token as %s: %v", username, err)
	}
	return secret
}

// signInStatus is the status of a password sign-in.
func signInStatus(t *testing.T, base, username, password string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	resp, err := http.Post(base+"/api/v1/sessions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCLIGroups runs the built binary against one real server for every
// command group of `svc <resource> <verb>`: for each, --output json prints
// exactly the API's answer (a read compared byte for byte with the same
// GET), the default output is an aligned table or aligned fields with the
// values the test expects, a refusal exits 1 with its code (and remedy)
// on stderr, and a usage error (wrong arguments, a bad flag or value)
// exits 2. The groups share the server and run in order: later ones use
// the users, app and revisions earlier ones made.
func TestCLIGroups(t *testing.T) {
	first, err := testserver.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "cli-groups", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+3),
		"SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true") // the subscriptions' receiver is on loopback
	c := cliAs{base: srv.p.Base(), token: srv.token(), config: t.TempDir()}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	mustJSON(t, c.get(t, "/me"), &me)
	adminID := me.User.ID
	var bobID string
	const bobPassword = "bob-password-4242-x"

	t.Run("me", func(t *testing.T) {
		c.sameAsAPI(t, "/me", "me", "get")
		checkFields(t, c.ok(t, "me", "get"), "User username", "admin", "User role ID", "role_admin", "Token kind", "delegated")
		c.misused(t, "", "me", "get", "extra")
		c.misused(t, "", "me", "get", "-o", "yaml")
		if _, errs, code := cliRun(t, c.config, "", []string{"SVC_ADDR=" + c.base, "SVC_TOKEN=tok_nope.nope"}, "me", "get"); code != 1 || !strings.HasPrefix(errs, "AUTH_") {
			t.Errorf("svc me get with a bad token: exit %d, %q; want 1 and an AUTH_ code", code, errs)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		var made struct {
			Token struct {
				ID    string
				Agent bool
			}
			Secret string
		}
		c.decoded(t, &made, "tokens", "create", "--agent", "--name", "assistant")
		if !made.Token.Agent || made.Secret == "" {
			t.Fatalf("tokens create --agent: %+v", made)
		}
		c.sameAsAPI(t, "/tokens", "tokens", "list")
		checkTable(t, c.ok(t, "tokens", "list"), "ID", made.Token.ID, "NAME", "assistant", "AGENT", "true")
		if r := sendToken(made.Secret, "GET", c.base+"/api/v1/me", nil); r.status != http.StatusOK {
			t.Errorf("the agent token does not work: %d", r.status)
		}
		if out := c.ok(t, "tokens", "delete", made.Token.ID); !strings.HasPrefix(out, "Done: Revoke a token") {
			t.Errorf("tokens delete printed %q", out)
		}
		if r := sendToken(made.Secret, "GET", c.base+"/api/v1/me", nil); r.status != http.StatusUnauthorized {
			t.Errorf("the revoked token still works: %d", r.status)
		}
		c.refused(t, "NOT_FOUND", false, "tokens", "delete", made.Token.ID)
		c.misused(t, "", "tokens", "create", "--agent=maybe")
		c.misused(t, "", "tokens", "create", "--expires-in-days", "soon")
		c.misused(t, "", "tokens", "delete")
	})

	t.Run("users", func(t *testing.T) {
		var bob struct {
			User struct{ ID string }
		}
		mustJSON(t, []byte(c.okIn(t, bobPassword+"\n", "users", "create", "--username", "bob", "--password-stdin", "-o", "json")), &bob)
		bobID = bob.User.ID
		if code := signInStatus(t, c.base, "bob", bobPassword); code != http.StatusOK {
			t.Errorf("bob signs in with the password given on stdin: %d", code)
		}
		out := c.okIn(t, "carol-password-1234\n", "users", "create", "--username", "carol", "--email", "carol@example.com", "--password-stdin")
		checkFields(t, out, "Username", "carol", "Email", "carol@example.com", "Status", "active")
		var carol struct {
			Items []struct{ ID, Username string }
		}
		mustJSON(t, c.sameAsAPI(t, "/users", "users", "list"), &carol)
		carolID := ""
		for _, u := range carol.Items {
			if u.Username == "carol" {
				carolID = u.ID
			}
		}
		checkTable(t, c.ok(t, "users", "list"), "USERNAME", "carol", "ID", carolID, "EMAIL", "carol@example.com")
		c.sameAsAPI(t, "/users/"+carolID, "users", "get", carolID)
		checkFields(t, c.ok(t, "users", "update", carolID, "--display-name", "Carol C"), "Display name", "Carol C", "Username", "carol")
		checkFields(t, c.ok(t, "users", "set-role", carolID, "--role-id", "role_auditor"), "Role ID", "role_auditor")
		c.ok(t, "users", "unset-role", carolID)
		checkFields(t, c.ok(t, "users", "get", carolID), "Role ID", "-")
		c.okIn(t, "carol-new-password-99\n", "users", "reset-password", carolID, "--password-stdin")
		if old, now := signInStatus(t, c.base, "carol", "carol-password-1234"), signInStatus(t, c.base, "carol", "carol-new-password-99"); old == http.StatusOK || now != http.StatusOK {
			t.Errorf("after reset-password: the old password signs in %d, the new one %d", old, now)
		}
		c.refused(t, "STATE_INVALID", false, "users", "unset-role", adminID) // the last administrator
		c.ok(t, "users", "delete", carolID)
		c.refused(t, "NOT_FOUND", false, "users", "get", carolID)
		// bob becomes an administrator: he approves a deploy below.
		c.ok(t, "users", "set-role", bobID, "--role-id", "role_admin")
		c.misused(t, "", "users", "get")
		c.misused(t, "", "users", "create", "--username", "x", "--password-stdin", "--no-such-flag")
	})

	t.Run("passwords", func(t *testing.T) {
		var p struct{ Password string }
		c.decoded(t, &p, "passwords", "generate")
		if n := len([]rune(p.Password)); n < 18 || n > 22 {
			t.Errorf("passwords generate: %q", p.Password)
		}
		out := c.ok(t, "passwords", "generate")
		if !strings.HasPrefix(out, "Password:  ") || len(strings.TrimSpace(strings.TrimPrefix(out, "Password:"))) < 18 {
			t.Errorf("passwords generate printed %q", out)
		}
	})

	t.Run("groups", func(t *testing.T) {
		var g struct {
			Group struct{ ID string }
		}
		c.decoded(t, &g, "groups", "create", "--name", "ops")
		id := g.Group.ID
		c.ok(t, "groups", "add-member", id, bobID)
		c.ok(t, "groups", "set-members", id, "--user-ids", bobID, "--user-ids", adminID)
		c.ok(t, "groups", "set-role", id, "--role-id", "role_auditor")
		c.sameAsAPI(t, "/groups", "groups", "list")
		checkTable(t, c.ok(t, "groups", "list"), "ID", id, "NAME", "ops")
		c.sameAsAPI(t, "/groups/"+id+"/apps", "groups", "apps", id)
		c.ok(t, "groups", "remove-member", id, bobID)
		var list struct {
			Items []struct {
				ID      string   `json:"id"`
				Members []string `json:"member_ids"`
				RoleID  *string  `json:"role_id"`
			}
		}
		mustJSON(t, c.get(t, "/groups"), &list)
		if len(list.Items) != 1 || strings.Join(list.Items[0].Members, ",") != adminID || list.Items[0].RoleID == nil || *list.Items[0].RoleID != "role_auditor" {
			t.Errorf("the group after set-members, set-role and remove-member: %+v", list.Items)
		}
		c.ok(t, "groups", "unset-role", id)
		c.ok(t, "groups", "delete", id)
		c.refused(t, "NOT_FOUND", false, "groups", "apps", id)
		c.misused(t, "", "groups", "add-member", id)
	})

	t.Run("roles and verbs", func(t *testing.T) {
		c.sameAsAPI(t, "/roles", "roles", "list")
		c.sameAsAPI(t, "/roles?scope=app", "roles", "list", "--scope", "app")
		checkTable(t, c.ok(t, "roles", "list", "--scope", "app"), "ID", "role_viewer", "VERBS", "app.view, app.logs.read")
		var r struct {
			Role struct{ ID string }
		}
		c.decoded(t, &r, "roles", "create", "--name", "deployer", "--scope", "app", "--verbs", "app.view", "--verbs", "app.deploy")
		checkTable(t, c.ok(t, "roles", "list", "--scope", "app"), "NAME", "deployer", "VERBS", "app.view, app.deploy", "BUILTIN", "false")
		c.ok(t, "roles", "delete", r.Role.ID)
		c.refused(t, "NOT_FOUND", false, "roles", "delete", r.Role.ID)
		c.sameAsAPI(t, "/verbs", "verbs", "list")
		out := c.ok(t, "verbs", "list")
		if !strings.HasPrefix(out, "Install:  app.create, ") || !strings.Contains(out, "\nApp:      app.view, ") {
			t.Errorf("verbs list:\n%s", out)
		}
	})

	t.Run("policy", func(t *testing.T) {
		before := c.sameAsAPI(t, "/policy", "policy", "get")
		checkFields(t, c.ok(t, "policy", "get"), "Policy allow anonymous grants", "true", "Policy agent disabled verbs", "-")
		var orig struct {
			Policy json.RawMessage `json:"policy"`
		}
		mustJSON(t, before, &orig)
		var pol map[string]any
		mustJSON(t, orig.Policy, &pol)
		pol["agent_disabled_verbs"] = []string{"app.delete"}
		file := filepath.Join(t.TempDir(), "policy.json")
		b, _ := json.Marshal(map[string]any{"policy": pol})
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, errs, code := c.run(t, string(b), "policy", "preview", "--body", "-")
		if code != 0 || !strings.HasPrefix(out, "Blocked:") {
			t.Errorf("policy preview --body -: exit %d %q %q", code, out, errs)
		}
		checkFields(t, c.ok(t, "policy", "set", "--body", file), "Policy agent disabled verbs", "app.delete")
		checkFields(t, c.ok(t, "policy", "get"), "Policy agent disabled verbs", "app.delete")
		// --policy overrides --body's field: back to how it was.
		c.ok(t, "policy", "set", "--body", file, "--policy", string(orig.Policy))
		if got := c.get(t, "/policy"); !bytes.Equal(got, before) {
			t.Errorf("policy after setting it back:\n%s\nwant\n%s", got, before)
		}
		c.misused(t, "", "policy", "set", "--policy", "{not json")
		c.misused(t, "", "policy", "set", "--body", filepath.Join(t.TempDir(), "missing.json"))
		c.refused(t, "VALID_INVALID", false, "policy", "set", "--policy", `{"public_sharing":"sometimes"}`)
	})

	t.Run("installation reads", func(t *testing.T) {
		c.sameAsAPI(t, "/config", "config", "get")
		checkTable(t, strings.SplitN(c.ok(t, "config", "get"), "Settings:\n", 2)[1], "NAME", "app.port_start", "ORIGIN", "environment", "VALUE", strconv.Itoa(first))
		c.sameAsAPI(t, "/capacity", "capacity", "get")
		checkFields(t, c.ok(t, "capacity", "get"), "Ports start", strconv.Itoa(first), "Ports end", strconv.Itoa(first+3))
		c.sameAsAPI(t, "/reference", "reference", "get")
		out := c.ok(t, "reference", "get")
		if i := strings.Index(out, "\nEndpoints:\n"); i < 0 {
			t.Errorf("reference get has no Endpoints table:\n%s", out)
		} else {
			checkTable(t, out[i+len("\nEndpoints:\n"):], "OP", "apps_list", "METHOD", "GET", "PATH", "/api/v1/apps ")
		}
		c.sameAsAPI(t, "/openapi.json", "openapi", "get")
		// A document no table shows well: people get it indented.
		if out := c.ok(t, "openapi", "get"); !regexp.MustCompile(`(?m)^    "title": "svc API",$`).MatchString(out) {
			t.Errorf("openapi get: not the indented document:\n%s", out[:min(len(out), 2000)])
		}
	})

	t.Run("keys", func(t *testing.T) {
		var kr struct {
			Keys []struct{ ID string }
		}
		mustJSON(t, c.sameAsAPI(t, "/keyring", "keyring", "get"), &kr)
		checkTable(t, strings.SplitN(c.ok(t, "keyring", "get"), "Keys:\n", 2)[1], "ID", kr.Keys[0].ID, "CURRENT", "true")
		var rotated struct {
			Key struct {
				ID      string
				Current bool
			}
		}
		c.decoded(t, &rotated, "keyring", "rotate")
		if !rotated.Key.Current || rotated.Key.ID == kr.Keys[0].ID {
			t.Errorf("keyring rotate: %+v after %+v", rotated.Key, kr.Keys)
		}
		checkTable(t, strings.SplitN(c.ok(t, "keyring", "get"), "Keys:\n", 2)[1], "ID", rotated.Key.ID, "CURRENT", "true")
		checkTable(t, strings.SplitN(c.ok(t, "keyring", "get"), "Keys:\n", 2)[1], "ID", kr.Keys[0].ID, "CURRENT", "false")
		var ek struct {
			Items []struct{ Kid string }
		}
		mustJSON(t, c.sameAsAPI(t, "/edge/keys", "edge-keys", "list"), &ek)
		out := c.ok(t, "edge-keys", "rotate")
		var after struct {
			Items []struct{ Kid string }
		}
		mustJSON(t, c.get(t, "/edge/keys"), &after)
		if len(after.Items) != len(ek.Items)+1 {
			t.Fatalf("edge-keys rotate: %d keys after %d", len(after.Items), len(ek.Items))
		}
		checkTable(t, out, "KID", after.Items[0].Kid, "CURRENT", "true")
		checkTable(t, c.ok(t, "edge-keys", "list"), "KID", ek.Items[0].Kid, "CURRENT", "false")
	})

	t.Run("audit", func(t *testing.T) {
		c.sameAsAPI(t, "/audit?action=user.create", "audit", "list", "--action", "user.create")
		out := c.ok(t, "audit", "list", "--action", "user.create")
		checkTable(t, out, "ACTION", "user.create", "TARGET ID", bobID, "PRINCIPAL KIND", "token")
		if regexp.MustCompile(`\d\dT\d\d:`).MatchString(out) {
			t.Errorf("audit list shows RFC 3339 times, not times for people:\n%s", out)
		}
		var page struct {
			Items      []struct{ Action string }
			NextBefore string `json:"next_before"`
		}
		c.decoded(t, &page, "audit", "list", "--action", "user.create", "--limit", "1")
		if len(page.Items) != 1 || page.NextBefore == "" {
			t.Fatalf("audit list --limit 1: %+v", page)
		}
		if _, errs, _ := c.run(t, "", "audit", "list", "--action", "user.create", "--limit", "1"); !strings.Contains(errs, "--before "+page.NextBefore) {
			t.Errorf("audit list --limit 1 does not say how to get the next page: %q", errs)
		}
		c.sameAsAPI(t, "/audit?action=user.create&before="+page.NextBefore, "audit", "list", "--action", "user.create", "--before", page.NextBefore)
		c.misused(t, "", "audit", "list", "--limit", "many")
	})

	t.Run("raft", func(t *testing.T) {
		var st struct {
			NodeID string `json:"node_id"`
			State  string `json:"state"`
		}
		c.decoded(t, &st, "raft", "get")
		if st.State != "Leader" || st.NodeID == "" {
			t.Errorf("raft get: %+v", st)
		}
		checkFields(t, c.ok(t, "raft", "get"), "Node ID", st.NodeID, "State", "Leader")
		var h struct {
			Dropped  int
			Problems []any
		}
		c.decoded(t, &h, "raft", "history")
		if h.Dropped != 0 || len(h.Problems) != 0 {
			t.Errorf("raft history: %+v", h)
		}
		var made struct {
			Probe struct {
				ID    string `json:"id"`
				Index int    `json:"index"`
			} `json:"probe"`
		}
		c.decoded(t, &made, "raft-probes", "create", "--payload-bytes", "64")
		p := made.Probe
		c.sameAsAPI(t, "/operator/raft/probes", "raft-probes", "list")
		c.sameAsAPI(t, "/operator/raft/probes/"+p.ID, "raft-probes", "get", p.ID)
		checkTable(t, c.ok(t, "raft-probes", "list"), "ID", p.ID, "NODE", st.NodeID)
		c.refused(t, "NOT_FOUND", false, "raft-probes", "get", "prb_nope")
	})

	// The app the app groups work on: static-hello, which builds nothing.
	var app struct {
		App struct{ ID, Slug string }
	}
	c.decoded(t, &app, "apps", "create", "Groups Demo", "--slug", "gdemo")
	appID := app.App.ID
	var depID string

	t.Run("source and detection", func(t *testing.T) {
		var up struct {
			Source struct{ Commit string }
		}
		c.decoded(t, &up, "source", "upload", "gdemo", filepath.Join(root, "samples", "static-hello"))
		waitDetected(t, c, appID, up.Source.Commit)
		c.sameAsAPI(t, "/apps/"+appID+"/detection", "detection", "get", "gdemo")
		checkFields(t, c.ok(t, "detection", "get", "gdemo"), "Status", "done", "Winner detector", "static", "Commit", up.Source.Commit)
		// The same tree as an archive: the same content, the same commit.
		archive := filepath.Join(t.TempDir(), "static-hello.tar.gz")
		if err := os.WriteFile(archive, dirTarGz(t, filepath.Join(root, "samples", "static-hello")), 0o600); err != nil {
			t.Fatal(err)
		}
		out := c.ok(t, "source", "upload", "gdemo", archive)
		if !strings.Contains(out, "sha256:") {
			t.Errorf("source upload of a .tar.gz printed:\n%s", out)
		}
		c.ok(t, "detection", "rerun", "gdemo")
		waitDetected(t, c, appID, "")
		var ans struct {
			Answers map[string]string `json:"answers"`
		}
		c.decoded(t, &ans, "detection", "answer", "gdemo", "--answers", `{"port":"8080"}`)
		if ans.Answers["port"] != "8080" {
			t.Errorf("detection answer: answers %v", ans.Answers)
		}
		waitDetected(t, c, appID, "")
		c.sameAsAPI(t, "/apps/"+appID+"/detection/diff", "detection", "diff", "gdemo")
		var acc struct {
			Spec struct{ Revision int }
		}
		c.decoded(t, &acc, "detection", "accept", "gdemo")
		if acc.Spec.Revision != 1 {
			t.Errorf("detection accept: revision %d", acc.Spec.Revision)
		}
		c.refused(t, "STATE_INVALID", true, "detection", "accept", "gdemo") // a configured app needs --confirm
		c.misused(t, "", "source", "upload", "gdemo", filepath.Join(root, "samples", "README.md"))
		c.misused(t, "", "source", "upload", "gdemo", filepath.Join(root, "no-such-dir"))
		c.misused(t, "", "detection", "answer", "gdemo", "--answers", "port=8080")
	})

	t.Run("deployments", func(t *testing.T) {
		var d struct {
			Deployment struct{ ID, State string }
		}
		c.decoded(t, &d, "deployments", "create", "gdemo")
		depID = d.Deployment.ID
		out := c.ok(t, "deployments", "logs", "gdemo", depID)
		if !strings.Contains(out, "system | ") || !strings.HasSuffix(out, "Deployment "+depID+" succeeded\n") {
			t.Fatalf("deployments logs:\n%s", out)
		}
		c.sameAsAPI(t, "/apps/"+appID+"/deployments/"+depID, "deployments", "get", "gdemo", depID)
		checkFields(t, c.ok(t, "deployments", "get", "gdemo", depID), "State", "succeeded", "Revision", "1", "Trigger", "api")
		c.sameAsAPI(t, "/apps/"+appID+"/deployments", "deployments", "list", "gdemo")
		checkTable(t, c.ok(t, "deployments", "list", "gdemo"), "ID", depID, "STATE", "succeeded", "REVISION", "1")
		jsonLog := c.ok(t, "deployments", "logs", "gdemo", depID, "-o", "json")
		lines := strings.Split(strings.TrimSpace(jsonLog), "\n")
		if last := lines[len(lines)-1]; last != `{"state":"succeeded","error_code":null}` {
			t.Errorf("deployments logs -o json ends %q", last)
		}
		c.refused(t, "NOT_FOUND", false, "deployments", "get", "gdemo", "dep_nope")
		c.misused(t, "", "deployments", "create", "gdemo", "--revision", "one")
	})

	t.Run("apps", func(t *testing.T) {
		checkFields(t, c.ok(t, "apps", "update", "gdemo", "--name", "Groups Demo 2"), "Name", "Groups Demo 2", "Slug", "gdemo")
		c.sameAsAPI(t, "/apps/"+appID+"/status", "apps", "status", "gdemo")
		c.ok(t, "apps", "stop", "gdemo")
		srv.waitStatus(t, appID, "stopped", 30*time.Second, func(st appStatus) bool { return st.State == "stopped" })
		c.ok(t, "apps", "start", "gdemo")
		srv.waitRunning(t, appID)
		c.ok(t, "apps", "restart", "gdemo")
		srv.waitRunning(t, appID)
		var u struct{ Supported bool }
		c.decoded(t, &u, "apps", "usage", "gdemo")
		checkFields(t, c.ok(t, "apps", "usage", "gdemo"), "Supported", strconv.FormatBool(u.Supported))
		out := c.ok(t, "apps", "plan", "gdemo")
		checkFields(t, out, "Deployable", "true")
		if !strings.Contains(out, "\nActions:\nWORKLOAD") {
			t.Errorf("apps plan:\n%s", out)
		}
		// An icon: a PNG made here, set, read back to a file, removed.
		img := image.NewRGBA(image.Rect(0, 0, 16, 16))
		for x := range 16 {
			img.Set(x, x, color.RGBA{R: 200, A: 255})
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		icon := filepath.Join(dir, "icon.png")
		if err := os.WriteFile(icon, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		c.ok(t, "apps", "set-icon", "gdemo", icon)
		got := filepath.Join(dir, "got.png")
		c.ok(t, "apps", "get-icon", "gdemo", "--file", got)
		if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, c.get(t, "/apps/"+appID+"/icon")) || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("apps get-icon --file wrote %d bytes (%v), not the PNG the API serves", len(b), err)
		}
		c.ok(t, "apps", "delete-icon", "gdemo")
		c.ok(t, "apps", "get-icon", "gdemo", "--file", got)
		if b, _ := os.ReadFile(got); bytes.Equal(b, buf.Bytes()) {
			t.Errorf("the icon is still the one set after delete-icon")
		}
		c.refused(t, "VALID_INVALID", false, "apps", "set-icon", "gdemo", filepath.Join(root, "samples", "static-hello", "index.html"))
		c.misused(t, "", "apps", "set-icon", "gdemo")
		c.refused(t, "NOT_FOUND", false, "apps", "stop", "no-such-app")
	})

	t.Run("grants and passcode", func(t *testing.T) {
		var g struct {
			Grant struct{ ID string }
		}
		c.decoded(t, &g, "grants", "create", "gdemo", "--plane", "control", "--principal-kind", "user", "--principal-id", bobID, "--role-id", "role_viewer")
		c.sameAsAPI(t, "/apps/"+appID+"/grants", "grants", "list", "gdemo")
		out := c.ok(t, "grants", "list", "gdemo")
		i := strings.Index(out, "Management:\n")
		if i < 0 {
			t.Fatalf("grants list:\n%s", out)
		}
		checkTable(t, out[i+len("Management:\n"):], "ID", g.Grant.ID, "PRINCIPAL ID", bobID, "ROLE ID", "role_viewer")
		checkFields(t, c.ok(t, "grants", "update", "gdemo", g.Grant.ID, "--role-id", "role_developer"), "Role ID", "role_developer")
		c.sameAsAPI(t, "/apps/"+appID+"/principals?q=bo", "grants", "principals", "gdemo", "--q", "bo")
		c.ok(t, "grants", "delete", "gdemo", g.Grant.ID)
		c.refused(t, "NOT_FOUND", false, "grants", "delete", "gdemo", g.Grant.ID)

		c.refused(t, "NOT_FOUND", false, "passcode", "get", "gdemo")
		var everyone struct {
			Grant struct{ ID string }
		}
		mustJSON(t, []byte(c.okIn(t, "open-sesame-42\n", "grants", "create", "gdemo", "--plane", "data", "--principal-kind", "anonymous", "--passcode-stdin", "-o", "json")), &everyone)
		c.sameAsAPI(t, "/apps/"+appID+"/passcode", "passcode", "get", "gdemo")
		checkFields(t, c.ok(t, "passcode", "get", "gdemo"), "Name", "Groups Demo 2")
		c.ok(t, "grants", "delete", "gdemo", everyone.Grant.ID)
		c.misused(t, "", "grants", "update", "gdemo")
	})

	t.Run("secrets", func(t *testing.T) {
		out := c.okIn(t, "s3cret-value\n", "secrets", "set", "gdemo", "API_KEY", "--value-stdin")
		checkFields(t, out, "Key", "API_KEY", "Version", "1")
		if strings.Contains(out, "s3cret") {
			t.Errorf("secrets set printed the value")
		}
		c.sameAsAPI(t, "/apps/"+appID+"/secrets", "secrets", "list", "gdemo")
		checkTable(t, c.ok(t, "secrets", "list", "gdemo"), "KEY", "API_KEY", "VERSION", "1")
		c.sameAsAPI(t, "/apps/"+appID+"/secrets/API_KEY/value", "secrets", "get", "gdemo", "API_KEY")
		checkFields(t, c.ok(t, "secrets", "get", "gdemo", "API_KEY"), "Key", "API_KEY", "Value", "s3cret-value")
		c.ok(t, "secrets", "delete", "gdemo", "API_KEY")
		c.refused(t, "NOT_FOUND", false, "secrets", "get", "gdemo", "API_KEY")
		c.misused(t, "x\n", "secrets", "set", "gdemo", "K", "--body", "-", "--value-stdin")
	})

	var rev2 int
	t.Run("specs, slots and volumes", func(t *testing.T) {
		var one struct {
			Spec struct {
				Spec map[string]any `json:"spec"`
			} `json:"spec"`
		}
		mustJSON(t, c.sameAsAPI(t, "/apps/"+appID+"/specs/1", "specs", "get", "gdemo", "1"), &one)
		doc := one.Spec.Spec
		doc["deploy"] = map[string]any{"approvals": 1}
		doc["slots"] = map[string]any{"db": map[string]any{"type": "postgres"}}
		b, _ := json.Marshal(map[string]any{"spec": doc})
		var made struct {
			Spec struct{ Revision int }
		}
		mustJSON(t, []byte(c.okIn(t, string(b), "specs", "create", "gdemo", "--body", "-", "-o", "json")), &made)
		rev2 = made.Spec.Revision
		c.sameAsAPI(t, "/apps/"+appID+"/specs", "specs", "list", "gdemo")
		out := c.ok(t, "specs", "list", "gdemo")
		checkTable(t, out, "REVISION", strconv.Itoa(rev2), "PINNED", "false")
		if !strings.Contains(out, "\n\nPinned revision:  1\n") {
			t.Errorf("specs list does not say which revision is pinned:\n%s", out)
		}
		c.sameAsAPI(t, "/apps/"+appID+"/specs/1/diff/"+strconv.Itoa(rev2), "specs", "diff", "gdemo", "1", strconv.Itoa(rev2))
		c.ok(t, "specs", "pin", "gdemo", strconv.Itoa(rev2))
		yaml := c.ok(t, "specs", "export", "gdemo", "--format", "yaml")
		if want := c.get(t, "/apps/"+appID+"/export?format=yaml"); strings.TrimSuffix(yaml, "\n") != strings.TrimSuffix(string(want), "\n") || !strings.Contains(yaml, "approvals: 1") {
			t.Errorf("specs export --format yaml printed\n%s\nthe API answers\n%s", yaml, want)
		}
		c.refused(t, "VALID_PRIMARY_WORKLOAD", false, "specs", "create", "gdemo", "--spec", `{"workloads":{}}`)

		c.sameAsAPI(t, "/apps/"+appID+"/slots", "slots", "list", "gdemo")
		checkTable(t, c.ok(t, "slots", "list", "gdemo"), "KEY", "db", "TYPE", "postgres", "FILLED", "false")
		out = c.ok(t, "slots", "fill", "gdemo", "db", "--bind", `{"url":"postgres://u:pw@127.0.0.1:5432/db"}`)
		checkFields(t, out, "Key", "db", "Filled", "true", "Mode", "bind", "Fields host", "127.0.0.1")
		if strings.Contains(out, "pw@") {
			t.Errorf("slots fill printed the password:\n%s", out)
		}

		var v struct {
			Volume struct {
				ID string `json:"id"`
			} `json:"volume"`
			Spec struct {
				Revision int `json:"revision"`
			} `json:"spec"`
		}
		c.decoded(t, &v, "volumes", "create", "gdemo", "--name", "data", "--path", "/data", "--size-bytes", "1048576")
		if v.Spec.Revision != rev2+1 || !strings.HasPrefix(v.Volume.ID, "vol_") {
			t.Errorf("volumes create: spec revision %d, volume %q; want %d and a vol_ ID", v.Spec.Revision, v.Volume.ID, rev2+1)
		}
		c.sameAsAPI(t, "/volumes", "volumes", "list-all")
		c.sameAsAPI(t, "/apps/"+appID+"/volumes", "volumes", "list", "gdemo")
		c.misused(t, "", "volumes", "create", "gdemo", "--size-bytes", "1MiB")
	})

	t.Run("approvals and rollback", func(t *testing.T) {
		var d struct {
			Deployment struct{ ID, State string }
		}
		c.decoded(t, &d, "deployments", "create", "gdemo", "--revision", strconv.Itoa(rev2))
		if d.Deployment.State != "waiting_approval" {
			t.Fatalf("a deploy of a revision asking for an approval is %s", d.Deployment.State)
		}
		errs := c.refused(t, "PERM_DENIED", true, "deployments", "approve", "gdemo", d.Deployment.ID)
		if !strings.Contains(errs, "another person") {
			t.Errorf("approving one's own deploy: %q", errs)
		}
		bob := cliAs{base: c.base, token: signInAs(t, c.base, "bob", bobPassword), config: t.TempDir()}
		checkFields(t, bob.ok(t, "deployments", "approve", "gdemo", d.Deployment.ID), "State", "queued", "Approvals required", "1")
		if out := c.ok(t, "deployments", "logs", "gdemo", d.Deployment.ID); !strings.HasSuffix(out, " succeeded\n") {
			t.Fatalf("the approved deploy:\n%s", out)
		}
		c.decoded(t, &d, "deployments", "create", "gdemo")
		checkFields(t, c.ok(t, "deployments", "reject", "gdemo", d.Deployment.ID, "--reason", "not today"), "State", "rejected", "Rejected reason", "not today")
		c.refused(t, "STATE_INVALID", false, "deployments", "approve", "gdemo", d.Deployment.ID)

		var rb struct {
			Deployment struct {
				ID       string
				Revision int
			}
		}
		c.decoded(t, &rb, "deployments", "rollback", "gdemo")
		if rb.Deployment.Revision != 1 {
			t.Errorf("rollback ships revision %d; want 1", rb.Deployment.Revision)
		}
		if out := c.ok(t, "deployments", "logs", "gdemo", rb.Deployment.ID); !strings.HasSuffix(out, " succeeded\n") {
			t.Fatalf("the rollback:\n%s", out)
		}
	})

	t.Run("launcher and sections", func(t *testing.T) {
		c.ok(t, "launcher", "favorite", "gdemo")
		c.sameAsAPI(t, "/me/apps", "launcher", "list")
		checkTable(t, c.ok(t, "launcher", "list"), "APP SLUG", "gdemo", "FAVORITE", "true")
		var s struct {
			Section struct{ ID string }
		}
		c.decoded(t, &s, "sections", "create", "--name", "Work")
		checkFields(t, c.ok(t, "sections", "update", s.Section.ID, "--name", "Play"), "Name", "Play")
		c.ok(t, "sections", "add-app", s.Section.ID, "gdemo")
		out := c.ok(t, "launcher", "list")
		checkTable(t, out, "APP SLUG", "gdemo", "SECTION ID", s.Section.ID)
		if i := strings.Index(out, "\nSections:\n"); i < 0 {
			t.Errorf("launcher list has no sections:\n%s", out)
		} else {
			checkTable(t, out[i+len("\nSections:\n"):], "ID", s.Section.ID, "NAME", "Play")
		}
		c.ok(t, "sections", "remove-app", s.Section.ID, "gdemo")
		c.ok(t, "launcher", "unfavorite", "gdemo")
		checkTable(t, c.ok(t, "launcher", "list"), "APP SLUG", "gdemo", "FAVORITE", "false", "SECTION ID", "-")
		c.ok(t, "sections", "delete", s.Section.ID)
		c.refused(t, "NOT_FOUND", false, "sections", "update", s.Section.ID, "--name", "x")
		c.misused(t, "", "sections", "create", "--position", "first")
	})

	t.Run("events, subscriptions and deliveries", func(t *testing.T) {
		got := make(chan http.Header, 16)
		rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Clone()
			w.WriteHeader(http.StatusNoContent)
		}))
		defer rc.Close()
		c.sameAsAPI(t, "/events", "events", "list")
		checkTable(t, c.ok(t, "events", "list"), "NAME", "adapter.configured", "SCOPE", "install")
		var made struct {
			Subscription struct{ ID string }
			SigningKey   string `json:"signing_key"`
		}
		c.decoded(t, &made, "subscriptions", "create", "--app-id", appID, "--events", "app.secret_changed", "--events", "deploy.*", "--url", rc.URL+"/hook")
		if !strings.HasPrefix(made.SigningKey, "whsec_") {
			t.Fatalf("subscriptions create: %+v", made)
		}
		id := made.Subscription.ID
		c.sameAsAPI(t, "/subscriptions/"+id, "subscriptions", "get", id)
		checkFields(t, c.ok(t, "subscriptions", "get", id), "ID", id, "Method", "POST", "Enabled", "true")
		if out := c.ok(t, "subscriptions", "get", id); strings.Contains(out, made.SigningKey) {
			t.Errorf("subscriptions get printed the signing key")
		}
		var test struct{ Delivery struct{ ID string } }
		c.decoded(t, &test, "subscriptions", "test", id)
		select {
		case h := <-got:
			if h.Get("Svc-Event") != "subscription.test" || h.Get("Svc-Delivery-Id") != test.Delivery.ID {
				t.Errorf("the receiver got %v", h)
			}
		case <-time.After(scaled(30 * time.Second)):
			t.Fatal("the test delivery never arrived")
		}
		deadline := time.Now().Add(scaled(30 * time.Second))
		for !strings.Contains(c.ok(t, "deliveries", "get", id, test.Delivery.ID), "delivered") {
			if time.Now().After(deadline) {
				t.Fatalf("the test delivery is not recorded as delivered:\n%s", c.ok(t, "deliveries", "get", id, test.Delivery.ID))
			}
			time.Sleep(50 * time.Millisecond)
		}
		checkTable(t, c.ok(t, "deliveries", "list", id), "ID", test.Delivery.ID, "EVENT TYPE", "subscription.test", "STATE", "delivered")
		c.ok(t, "deliveries", "resend", id, test.Delivery.ID)
		select {
		case <-got:
		case <-time.After(scaled(30 * time.Second)):
			t.Fatal("the resent delivery never arrived")
		}
		var rot struct {
			SigningKey string `json:"signing_key"`
		}
		c.decoded(t, &rot, "subscriptions", "rotate-key", id)
		if rot.SigningKey == "" || rot.SigningKey == made.SigningKey {
			t.Errorf("rotate-key gave %q", rot.SigningKey)
		}
		checkFields(t, c.ok(t, "subscriptions", "update", id, "--enabled=false"), "Enabled", "false")
		c.refused(t, "VALID_INVALID", true, "subscriptions", "create", "--events", "nope.*", "--url", rc.URL)
		c.ok(t, "subscriptions", "delete", id)
		c.refused(t, "NOT_FOUND", false, "subscriptions", "get", id)
		c.misused(t, "", "deliveries", "resend", id)
	})
}

// waitDetected waits until the app's detection is done (of commit, when
// given).
func waitDetected(t *testing.T, c cliAs, appID, commit string) {
	t.Helper()
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		var det struct{ Status, Commit string }
		mustJSON(t, c.get(t, "/apps/"+appID+"/detection"), &det)
		if det.Status == "done" && (commit == "" || det.Commit == commit) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("detection of %s: %+v after %s", appID, det, scaled(30*time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
