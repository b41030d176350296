package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/internal/testserver"
)

// toolRefusal is a tool error's structured content.
type toolRefusal struct {
	Code, Message, Remedy string
	RequestID             string `json:"request_id"`
}

// mintToken mints a delegated token of the admin (an agent token when
// agent) and returns its secret.
func mintToken(t testing.TB, srv *appServer, name string, agent bool) string {
	t.Helper()
	var out struct{ Secret string }
	srv.must(t, "POST", "/tokens", map[string]any{"name": name, "agent": agent}, http.StatusCreated, &out)
	return out.Secret
}

// stdioSession runs the built `svc mcp` against the server with token and
// connects the SDK's client to it; its stderr is returned.
func stdioSession(t *testing.T, ctx context.Context, base, token string) (*mcp.ClientSession, *testserver.Output) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(svcBin, "mcp")
	cmd.Env = append(childEnv(nil), "SVC_ADDR="+base, "SVC_TOKEN="+token, "HOME="+home, "XDG_CONFIG_HOME="+home, "SVC_ADMIN_PASSWORD=")
	stderr := &testserver.Output{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to svc mcp: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, stderr
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// httpSession connects the SDK's client to the server's /mcp with token.
func httpSession(t testing.TB, ctx context.Context, base, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", base, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool; a failure to call at all (not a tool error)
// fails the test.
func callTool(t testing.TB, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// texts joins a result's text contents.
func texts(r *mcp.CallToolResult) string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, r *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	mustJSON(t, b, v)
}

// TestMCPOverStdio runs the built `svc mcp` as an assistant does, with
// the SDK's own client, against a real server: the tools listed are
// exactly the reference's (names, annotations), each input schema a valid
// JSON Schema object; a read tool answers the API's bytes; a write tool
// creates an app a read tool then finds by its slug; a refusal is a tool
// error with the API's code (and a remedy); an agent token gets no
// warning, any other token a warning on stderr, and stdout carries only
// the protocol (the client would fail on anything else).
func TestMCPOverStdio(t *testing.T) {
	srv := startAppServer(t, "mcp-stdio")
	base := srv.p.Base()
	ctx := ctxTimeout(t, 2*time.Minute)
	agent := mintToken(t, srv, "assistant", true)
	cs, stderr := stdioSession(t, ctx, base, agent)

	var ref struct {
		Tools []struct {
			Name, Endpoint string
			ReadOnly       bool `json:"read_only"`
			Destructive    bool `json:"destructive"`
			Idempotent     bool `json:"idempotent"`
		} `json:"tools"`
	}
	srv.must(t, "GET", "/reference", nil, http.StatusOK, &ref)
	listed := map[string]*mcp.Tool{}
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tl.Name] = tl
	}
	if len(listed) != len(ref.Tools) || len(listed) < 80 {
		t.Errorf("svc mcp lists %d tools; the reference %d (want the same, one per API operation with a tool)", len(listed), len(ref.Tools))
	}
	for _, r := range ref.Tools {
		tl, ok := listed[r.Name]
		if !ok {
			t.Errorf("the reference's tool %s (%s) is not listed", r.Name, r.Endpoint)
			continue
		}
		a := tl.Annotations
		destroys := a != nil && a.DestructiveHint != nil && *a.DestructiveHint
		if a == nil || a.ReadOnlyHint != r.ReadOnly || destroys != r.Destructive || a.IdempotentHint != r.Idempotent {
			t.Errorf("%s: annotations %+v; the reference says %+v", r.Name, a, r)
		}
		if r.ReadOnly != strings.HasPrefix(r.Endpoint, "GET ") {
			t.Errorf("%s calls %s and is read-only %v", r.Name, r.Endpoint, r.ReadOnly)
		}
		b, _ := json.Marshal(tl.InputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Errorf("%s: input schema: %v", r.Name, err)
		} else if _, err := s.Resolve(nil); err != nil || s.Type != "object" {
			t.Errorf("%s: input schema is no valid object schema (%v): %s", r.Name, err, b)
		}
		if strings.Contains(r.Endpoint, "{appID}") && !slices.Contains(s.Required, "appID") {
			t.Errorf("%s: appID is not required", r.Name)
		}
	}
	for _, name := range []string{"apps_list", "apps_create", "deployments_create", "deployments_logs", "secrets_set", "policy_set"} {
		if listed[name] == nil {
			t.Errorf("no tool %s", name)
		}
	}
	for _, name := range []string{"sessions_create", "passcode_enter", "edge_handoff"} {
		if listed[name] != nil {
			t.Errorf("tool %s is listed though its route says why it has none", name)
		}
	}
	if d := listed["apps_get"].Description; !strings.Contains(d, "GET /api/v1/apps/{appID}") || !strings.Contains(d, "app.view") {
		t.Errorf("apps_get's description names neither endpoint nor verb: %q", d)
	}

	created := callTool(t, ctx, cs, "apps_create", map[string]any{"name": "MCP Demo", "slug": "mcp-demo"})
	var app struct{ App struct{ ID, Slug string } }
	structured(t, created, &app)
	if created.IsError || app.App.ID == "" || app.App.Slug != "mcp-demo" {
		t.Fatalf("apps_create: %s", texts(created))
	}
	got := callTool(t, ctx, cs, "apps_get", map[string]any{"appID": "mcp-demo"})
	direct := srv.call(t, "GET", "/apps/"+app.App.ID, nil)
	if got.IsError || texts(got) != string(direct.body) {
		t.Errorf("apps_get by slug: %s; the API answers %s", texts(got), direct.body)
	}
	list := callTool(t, ctx, cs, "apps_list", map[string]any{"limit": 10})
	var page struct{ Items []struct{ Slug string } }
	structured(t, list, &page)
	if list.IsError || len(page.Items) != 1 || page.Items[0].Slug != "mcp-demo" {
		t.Errorf("apps_list: %s", texts(list))
	}

	missing := callTool(t, ctx, cs, "apps_get", map[string]any{"appID": "no-such-app"})
	var refusal toolRefusal
	structured(t, missing, &refusal)
	if !missing.IsError || refusal.Code != "NOT_FOUND" || refusal.Remedy == "" || refusal.RequestID == "" || !strings.HasPrefix(texts(missing), "NOT_FOUND: ") || !strings.Contains(texts(missing), "Remedy: ") {
		t.Errorf("apps_get of no app: error %v, %s (%+v)", missing.IsError, texts(missing), refusal)
	}
	bad := callTool(t, ctx, cs, "apps_get", map[string]any{"app": "mcp-demo"})
	if !bad.IsError || !strings.Contains(texts(bad), "appID") {
		t.Errorf("apps_get with a wrong argument name: %s", texts(bad))
	}
	if strings.Contains(stderr.String(), "not an agent token") {
		t.Errorf("svc mcp warned about an agent token: %s", stderr)
	}

	_, stderr = stdioSession(t, ctx, base, mintToken(t, srv, "plain", false))
	if !strings.Contains(stderr.String(), "is not an agent token") || !strings.Contains(stderr.String(), "svc tokens create --agent") {
		t.Errorf("svc mcp with a token that is no agent's: stderr %q; want a warning saying how to mint one", stderr)
	}
}

// TestMCPOverHTTP drives the server's /mcp with the SDK's own client: no
// or a bad token is 401 with WWW-Authenticate: Bearer before any MCP
// exchange; under host policy agent_disabled_verbs [app.delete] an agent
// token's apps_delete is a tool error with the code the API gives that
// token, while the administrator's own token deletes through the same
// tool (and the audit log records it as a direct call would); a deploy of
// a revision that asks for an approval comes back saying it waits and has
// not run.
func TestMCPOverHTTP(t *testing.T) {
	srv := startAppServer(t, "mcp-http")
	base := srv.p.Base()
	ctx := ctxTimeout(t, 3*time.Minute)

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, token := range []string{"", "not-a-token"} {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || resp.Header.Get("Mcp-Session-Id") != "" || !strings.HasPrefix(e.Code, "AUTH_") {
			t.Errorf("POST /mcp with token %q: %d, WWW-Authenticate %q, session %q, code %q; want 401 with a Bearer challenge and no session",
				token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Mcp-Session-Id"), e.Code)
		}
	}

	srv.must(t, "PUT", "/policy", map[string]any{"policy": map[string]any{"agent_disabled_verbs": []string{"app.delete"}}}, http.StatusOK, nil)

	agentToken := mintToken(t, srv, "assistant", true)
	agent := httpSession(t, ctx, base, agentToken)
	doomed := callTool(t, ctx, agent, "apps_create", map[string]any{"name": "Doomed", "slug": "doomed"})
	var app struct{ App struct{ ID string } }
	structured(t, doomed, &app)
	if doomed.IsError || app.App.ID == "" {
		t.Fatalf("apps_create as the agent: %s", texts(doomed))
	}
	refused := callTool(t, ctx, agent, "apps_delete", map[string]any{"appID": "doomed"})
	var refusal toolRefusal
	structured(t, refused, &refusal)
	direct := srv.asToken(agentToken).call(t, "DELETE", "/apps/"+app.App.ID, nil)
	if !refused.IsError || refusal.Code != "PERM_VERB_REQUIRED" || refusal.Code != direct.code() || refusal.RequestID == "" || !strings.HasPrefix(texts(refused), refusal.Code+": ") ||
		!strings.Contains(texts(refused), "agent_disabled_verbs") || !strings.Contains(refusal.Remedy, "PUT /api/v1/policy") {
		t.Errorf("apps_delete as an agent under agent_disabled_verbs: error %v, %s; the API answers the agent token %d %s", refused.IsError, texts(refused), direct.status, direct.body)
	}
	srv.must(t, "GET", "/apps/"+app.App.ID, nil, http.StatusOK, nil)

	admin := httpSession(t, ctx, base, mintToken(t, srv, "not-an-agent", false))
	deleted := callTool(t, ctx, admin, "apps_delete", map[string]any{"appID": "doomed", "force": true})
	if deleted.IsError || !strings.HasPrefix(texts(deleted), "Done: Delete an app") {
		t.Errorf("apps_delete with a token that is no agent's: %s", texts(deleted))
	}
	srv.must(t, "GET", "/apps/"+app.App.ID, nil, http.StatusNotFound, nil)
	var audit struct{ Items []struct{ Action string } }
	srv.must(t, "GET", "/audit?action=app.delete&app_id="+app.App.ID, nil, http.StatusOK, &audit)
	if len(audit.Items) != 1 {
		t.Errorf("audit of the delete through /mcp: %+v; want one app.delete entry", audit.Items)
	}

	id, doc := srv.onboard(t, "mcp-held", "go-hello", "go", helloValues("greeting-held", "token-held")...)
	doc["deploy"] = map[string]any{"approvals": 1}
	rev := srv.newRevision(t, id, doc)
	held := callTool(t, ctx, agent, "deployments_create", map[string]any{"appID": id, "revision": rev})
	var dep struct {
		Deployment struct {
			ID, State         string
			ApprovalsRequired int `json:"approvals_required"`
		}
	}
	structured(t, held, &dep)
	out := texts(held)
	if held.IsError || dep.Deployment.State != "waiting_approval" || !strings.HasPrefix(out, "NOT DEPLOYED") || !strings.Contains(out, "has NOT run") ||
		!strings.Contains(out, "deployments_approve") || !strings.Contains(out, "app.deploy") || !strings.Contains(out, "asks for 1 approval") {
		t.Errorf("deployments_create of a revision asking for an approval: %s", out)
	}
	var after struct{ Deployment struct{ State string } }
	srv.must(t, "GET", "/apps/"+id+"/deployments/"+dep.Deployment.ID, nil, http.StatusOK, &after)
	if after.Deployment.State != "waiting_approval" {
		t.Errorf("the held deploy is %s; want it still waiting", after.Deployment.State)
	}

	// Rejected, it ends; its log, collected through the in-process event
	// stream, says so.
	if r := callTool(t, ctx, admin, "deployments_reject", map[string]any{"appID": "mcp-held", "depID": dep.Deployment.ID, "reason": "not today"}); r.IsError {
		t.Fatalf("deployments_reject: %s", texts(r))
	}
	logs := callTool(t, ctx, admin, "deployments_logs", map[string]any{"appID": id, "depID": dep.Deployment.ID})
	var end struct{ State string }
	structured(t, logs, &end)
	if logs.IsError || end.State != "rejected" || !strings.HasSuffix(texts(logs), "Ended: rejected") {
		t.Errorf("deployments_logs of the rejected deploy: %s", texts(logs))
	}
}
