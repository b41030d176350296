package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

// wsURL is the exec websocket's address on srv, with a query.
func wsURL(srv *httptest.Server, app string, query url.Values) string {
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + api + "/apps/" + app + "/exec"
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// dialExec opens the exec websocket with the headers given (name, value
// pairs).
func dialExec(ctx context.Context, u string, header ...string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
}

// runTerminal reads a terminal's output until the exit message, then
// wants the connection closed normally. It returns the output and the
// exit code.
func runTerminal(t *testing.T, ctx context.Context, conn *websocket.Conn) (string, int) {
	t.Helper()
	var out strings.Builder
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read before the exit message: %v (output so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
			continue
		}
		var exit execExit
		if err := json.Unmarshal(data, &exit); err != nil || exit.Type != "exit" {
			t.Fatalf("text message %q is not the exit message", data)
		}
		if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Errorf("after the exit message: %v, want a normal close", err)
		}
		return out.String(), exit.Code
	}
}

// upgradeHeaders make a request a websocket handshake.
var upgradeHeaders = []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}

func TestExecAPI(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	app := h.runningNodeApp(t, "Shell")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // against hanging only
	defer cancel()
	bearer := []string{"Authorization", "Bearer " + h.token}

	t.Run("a shell over a websocket with a bearer token", func(t *testing.T) {
		before := h.auditEntries(t)
		conn, resp, err := dialExec(ctx, wsURL(srv, app, nil), bearer...)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		defer conn.CloseNow()
		if err := conn.Write(ctx, websocket.MessageBinary, []byte("echo hi; exit 7\n")); err != nil {
			t.Fatal(err)
		}
		out, code := runTerminal(t, ctx, conn)
		if code != 7 || !strings.Contains(out, "hi\r\n") {
			t.Errorf("exit %d, output %q", code, out)
		}
		got := newEntries(before, h.auditEntries(t))
		if len(got) != 1 || got[0].Action != "app.exec" || got[0].RequestID != resp.Header.Get("X-Request-Id") ||
			got[0].Details["command"] != "/bin/sh" || got[0].Details["workload"] != "web" || *got[0].AppID != app {
			t.Errorf("audit = %+v", got)
		}
		if strings.Contains(jsonOf(got), "echo hi") {
			t.Errorf("the audit records what was typed: %s", jsonOf(got))
		}
		if ev := h.eventsOf(t, "app.shell_opened", "web"); len(ev) != 1 || ev[0].Data["command"] != "/bin/sh" || ev[0].App.ID != app {
			t.Errorf("app.shell_opened events = %+v", ev)
		}
	})

	t.Run("a command, and a resize", func(t *testing.T) {
		q := url.Values{"command": {"sh", "-c", "read line; stty size; exit 3"}, "rows": {"30"}, "cols": {"100"}}
		conn, resp, err := dialExec(ctx, wsURL(srv, app, q), bearer...)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		defer conn.CloseNow()
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","rows":40,"cols":120}`)); err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(ctx, websocket.MessageBinary, []byte("go\n")); err != nil {
			t.Fatal(err)
		}
		out, code := runTerminal(t, ctx, conn)
		if code != 3 || !strings.Contains(out, "40 120") {
			t.Errorf("exit %d, output %q", code, out)
		}
		last := h.auditEntries(t)
		if e := last[len(last)-1]; e.Action != "app.exec" || e.Details["command"] != "sh -c read line; stty size; exit 3" {
			t.Errorf("audit = %+v", e)
		}
	})

	t.Run("a malformed control message closes the connection", func(t *testing.T) {
		conn, _, err := dialExec(ctx, wsURL(srv, app, nil), bearer...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"explode"}`)); err != nil {
			t.Fatal(err)
		}
		for {
			_, _, err := conn.Read(ctx)
			if err == nil {
				continue // the shell's prompt
			}
			if websocket.CloseStatus(err) != websocket.StatusInvalidFramePayloadData {
				t.Errorf("closed with %v, want 1007", err)
			}
			break
		}
	})

	t.Run("refusals before the upgrade", func(t *testing.T) {
		never := h.app(t, "Never deployed")
		before := h.auditEntries(t)
		path := api + "/apps/" + app + "/exec"
		a := h.send("GET", path, "")
		wantError(t, "not a websocket handshake", a, http.StatusUpgradeRequired, errcode.ValidInvalid)
		wantError(t, "an unknown workload", h.send("GET", path+"?workload=nope", "", upgradeHeaders...), http.StatusNotFound, errcode.NotFound)
		for _, q := range []string{"rows=0", "cols=1001", "rows=x", "command="} {
			wantError(t, q, h.send("GET", path+"?"+q, "", upgradeHeaders...), http.StatusBadRequest, errcode.ValidInvalid)
		}
		wantError(t, "another websocket version", h.send("GET", path, "", append(slices.Clone(upgradeHeaders), "Sec-WebSocket-Version", "8")...), http.StatusBadRequest, errcode.ValidInvalid)
		_, resp, err := dialExec(ctx, wsURL(srv, never, nil), bearer...)
		if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
			t.Errorf("an app never deployed: %v %v", err, resp)
		}
		if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
			t.Errorf("refusals wrote %v", actionsOf(got))
		}
	})

	// An owner who is not an administrator, signed in with a browser.
	owner := h.account(t, "owner", nil, true)
	h.grantApp(t, app, authz.KindUser, owner.userID, authz.RoleOwner)
	in, cookie := h.signIn(owner.username, owner.password)
	if cookie == "" {
		t.Fatalf("sign in: %d %s", in.status, in.body)
	}
	cookieHeader := cookieSession + "=" + cookie

	t.Run("host policy turns exec off, the owner included", func(t *testing.T) {
		wantStatus(t, "disable app.exec", h.send("PUT", api+"/policy", `{"policy":{"disabled_verbs":["app.exec"]}}`), http.StatusOK)
		defer func() {
			wantStatus(t, "restore the policy", h.send("PUT", api+"/policy", `{"policy":{}}`), http.StatusOK)
		}()
		before := h.auditEntries(t)
		path := api + "/apps/" + app + "/exec"
		for _, p := range []*principal{h.adminPrincipal(), owner} {
			e := wantError(t, p.name, h.send("GET", path, "", append(p.bearer(), upgradeHeaders...)...), http.StatusForbidden, errcode.PolicyExecDisabled)
			if e.Details["verb"] != "app.exec" {
				t.Errorf("details = %v", e.Details)
			}
		}
		_, resp, err := dialExec(ctx, wsURL(srv, app, nil), "Cookie", cookieHeader, "Origin", srv.URL)
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(readBody(resp), string(errcode.PolicyExecDisabled)) {
			t.Errorf("the owner's browser: %v %v", err, resp)
		}
		// agent_disabled_verbs refuses agent tokens the same way, and
		// only them (rows=0 is refused after authorization: the policy let
		// the person's token through).
		wantStatus(t, "disable app.exec for agents", h.send("PUT", api+"/policy", `{"policy":{"agent_disabled_verbs":["app.exec"]}}`), http.StatusOK)
		agent := &principal{name: "the owner's agent", token: h.delegatedToken(t, owner.userID, true)}
		wantError(t, "an agent token", h.send("GET", path, "", append(agent.bearer(), upgradeHeaders...)...), http.StatusForbidden, errcode.PolicyExecDisabled)
		wantError(t, "the owner's own token", h.send("GET", path+"?rows=0", "", append(owner.bearer(), upgradeHeaders...)...), http.StatusBadRequest, errcode.ValidInvalid)
		// Other verbs are untouched.
		wantStatus(t, "app.view under the policy", h.send("GET", api+"/apps/"+app+"/status", "", owner.bearer()...), http.StatusOK)
		if got := actionsOf(newEntries(before, h.auditEntries(t))); slices.Contains(got, "app.exec") {
			t.Errorf("refusals wrote %v", got)
		}
	})

	t.Run("a browser's upgrade from another origin is refused", func(t *testing.T) {
		before := h.auditEntries(t)
		q := url.Values{"command": {"true"}}
		for _, origin := range []string{"https://evil.example", "http://" + strings.TrimPrefix(srv.URL, "http://") + ".evil.example", "null"} {
			_, resp, err := dialExec(ctx, wsURL(srv, app, q), "Cookie", cookieHeader, "Origin", origin)
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(readBody(resp), string(errcode.PermDenied)) {
				t.Errorf("origin %s: %v %v", origin, err, resp)
			}
		}
		if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
			t.Errorf("cross-site upgrades wrote %v", actionsOf(got))
		}
		// From the server's own origin, the same cookie opens the terminal.
		conn, resp, err := dialExec(ctx, wsURL(srv, app, q), "Cookie", cookieHeader, "Origin", srv.URL)
		if err != nil {
			t.Fatalf("same origin: %v %v", err, resp)
		}
		defer conn.CloseNow()
		if _, code := runTerminal(t, ctx, conn); code != 0 {
			t.Errorf("exit %d", code)
		}
		got := newEntries(before, h.auditEntries(t))
		if len(got) != 1 || got[0].PrincipalID != owner.userID || got[0].PrincipalKind != "user" {
			t.Errorf("audit = %+v", got)
		}
	})
}

func TestExecTrustsTheExternalURL(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_EXTERNAL_URL=https://console.example.com"}})
	path := api + "/apps/" + h.app(t, "Elsewhere") + "/exec"
	// The origin passes (the app, never deployed, is refused after it).
	a := h.send("GET", path, "", append([]string{"Origin", "https://console.example.com"}, upgradeHeaders...)...)
	wantError(t, "the external URL's origin", a, http.StatusConflict, errcode.StateInvalid)
	a = h.send("GET", path, "", append([]string{"Origin", "https://other.example.com"}, upgradeHeaders...)...)
	wantError(t, "another origin", a, http.StatusForbidden, errcode.PermDenied)
}

func readBody(resp *http.Response) string {
	if resp == nil || resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestParseExecControl(t *testing.T) {
	cases := []struct {
		in   string
		want execControl
		ok   bool
	}{
		{`{"type":"resize","rows":24,"cols":80}`, execControl{Type: "resize", Rows: 24, Cols: 80}, true},
		{` {"cols":1000,"rows":1,"type":"resize"} `, execControl{Type: "resize", Rows: 1, Cols: 1000}, true},
		{`{"type":"resize","rows":0,"cols":80}`, execControl{}, false},
		{`{"type":"resize","rows":24,"cols":1001}`, execControl{}, false},
		{`{"type":"resize","rows":24}`, execControl{}, false},
		{`{"type":"resize","rows":-1,"cols":80}`, execControl{}, false},
		{`{"type":"resize","rows":24.5,"cols":80}`, execControl{}, false},
		{`{"type":"resize","rows":"24","cols":80}`, execControl{}, false},
		{`{"type":"resize","rows":24,"cols":80,"x":1}`, execControl{}, false},
		{`{"type":"exit","code":0}`, execControl{}, false},
		{`{"type":"resize","rows":24,"cols":80} {}`, execControl{}, false},
		{`[]`, execControl{}, false},
		{``, execControl{}, false},
		{`null`, execControl{}, false},
	}
	for _, c := range cases {
		got, err := parseExecControl([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseExecControl(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzExecControl(f *testing.F) {
	f.Add([]byte(`{"type":"resize","rows":24,"cols":80}`))
	f.Add([]byte(`{"type":"resize","rows":70000,"cols":80}`))
	f.Add([]byte(`{"type":"x"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseExecControl(b)
		if err != nil {
			if c != (execControl{}) || closeReason(err.Error()) == "" || len(closeReason(err.Error())) > 123 {
				t.Fatalf("error %v with %+v", err, c)
			}
			return
		}
		if c.Type != "resize" || c.Rows < 1 || c.Rows > maxTermSize || c.Cols < 1 || c.Cols > maxTermSize {
			t.Fatalf("accepted %q as %+v", b, c)
		}
	})
}
