package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
)

// Routes whose unsafe method changes no state, so they write no audit entry.
var writesNothing = map[string]bool{
	"POST /api/v1/passwords/generate": true, // stores nothing
	"POST /api/v1/policy/preview":     true, // validates a candidate only
	"POST /api/v1/apps/{appID}/plan":  true, // creates nothing
	"POST /mcp":                       true, // each tool call is an API request, audited as one
	"DELETE /mcp":                     true, // ends a tool server session, which is not stored
}

// Reads that are audited every time.
var auditedReads = map[string]bool{
	"GET /api/v1/apps/{appID}/secrets/{key}/value": true,
	"GET /api/v1/apps/{appID}/exec":                true, // opening a terminal: app.exec, with the command
}

func isStateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// newEntries returns the audit entries that are not in before.
func newEntries(before, after []audit.Entry) []audit.Entry {
	seen := map[string]bool{}
	for _, e := range before {
		seen[e.ID] = true
	}
	var out []audit.Entry
	for _, e := range after {
		if !seen[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

func actionsOf(es []audit.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}

func TestStateChangingRequestsAreAuditedOnce(t *testing.T) {
	h := newHarness(t)
	m := newMatrix(t, h)
	admin := h.adminPrincipal()

	t.Run("every state-changing route has an action", func(t *testing.T) {
		for _, r := range h.srv.routes {
			key := r.method + " " + r.path
			switch {
			case isStateChanging(r.method) && r.action == "" && !writesNothing[key]:
				t.Errorf("%s changes state but names no audit action", key)
			case r.action != "" && !isStateChanging(r.method) && !auditedReads[key]:
				t.Errorf("%s is a read but names the audit action %s", key, r.action)
			case r.action != "" && writesNothing[key]:
				t.Errorf("%s is listed as writing nothing but names the action %s", key, r.action)
			}
		}
	})

	// check sends one request and wants exactly one new entry, of the
	// route's action, carrying the request's id and principal.
	check := func(t *testing.T, h *harness, r route, path, body, kind, principalID string, header ...string) {
		t.Helper()
		before := h.auditEntries(t)
		a := h.send(r.method, path, body, header...)
		if a.status >= 300 {
			t.Fatalf("the request did not succeed: %d %s", a.status, a.body)
		}
		got := newEntries(before, h.auditEntries(t))
		if len(got) != 1 || got[0].Action != r.action {
			t.Errorf("%s %s wrote %d audit entries %v; want exactly one, %s", r.method, r.path, len(got), actionsOf(got), r.action)
		}
		for _, e := range got {
			if e.RequestID != a.header.Get("X-Request-Id") {
				t.Errorf("entry %s: request_id %q, the answer's %q", e.Action, e.RequestID, a.header.Get("X-Request-Id"))
			}
			if e.Action == r.action && (e.PrincipalKind != kind || e.PrincipalID != principalID) {
				t.Errorf("entry %s: principal %s %s, want %s %s", e.Action, e.PrincipalKind, e.PrincipalID, kind, principalID)
			}
		}
	}

	// Bodies that change something where the matrix's would not.
	bodies := map[string]string{
		"PUT /api/v1/policy": `{"policy":{"max_token_lifetime_days":90}}`,
	}
	for _, r := range h.srv.routes {
		if r.action == "" {
			continue
		}
		key := r.method + " " + r.path
		t.Run(key, func(t *testing.T) {
			switch key {
			case "POST /api/v1/setup":
				fresh := newHarnessWith(t, harnessOptions{})
				before := fresh.auditEntries(t)
				a := fresh.send("POST", api+"/setup", `{"username":"first","display_name":"First","password":"first-password-123"}`)
				if a.status != http.StatusCreated {
					t.Fatalf("setup: %d %s", a.status, a.body)
				}
				got := newEntries(before, fresh.auditEntries(t))
				if len(got) != 1 || got[0].Action != r.action {
					t.Errorf("POST /setup wrote %d audit entries %v for one request; want exactly one, %s (API.md: every state-changing request writes exactly one entry)", len(got), actionsOf(got), r.action)
				}
			case "DELETE /api/v1/sessions":
				in, cookie := h.signIn(m.signer.username, m.signer.password)
				if cookie == "" {
					t.Fatalf("sign in: %d %s", in.status, in.body)
				}
				check(t, h, r, api+"/sessions", "", "user", m.signer.userID, withCookie(cookie)...)
			case "GET /api/v1/apps/{appID}/exec":
				// A real terminal over a real websocket.
				srv := httptest.NewServer(h.srv.Handler())
				defer srv.Close()
				app := h.runningNodeApp(t, "audited shell")
				before := h.auditEntries(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				conn, resp, err := dialExec(ctx, wsURL(srv, app, url.Values{"command": {"true"}}), "Authorization", "Bearer "+h.token)
				if err != nil {
					t.Fatalf("exec: %v %v", err, resp)
				}
				defer conn.CloseNow()
				runTerminal(t, ctx, conn)
				got := newEntries(before, h.auditEntries(t))
				if len(got) != 1 || got[0].Action != r.action || got[0].RequestID != resp.Header.Get("X-Request-Id") ||
					got[0].PrincipalKind != "token" || got[0].PrincipalID != admin.tokenID {
					t.Errorf("exec wrote %d audit entries %+v; want exactly one, %s, naming the request and the caller", len(got), got, r.action)
				}
			case "POST /api/v1/apps/{appID}/passcode":
				// A passcode entered without a credential, where host
				// policy lets apps be shared with everyone.
				open := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_POLICY_PUBLIC_SHARING=allowed"}})
				app := open.passcodeApp(t, "audited passcode", "audited-passcode")
				check(t, open, r, api+"/apps/"+app+"/passcode", `{"passcode":"audited-passcode"}`, "anonymous", "", "Authorization", "")
			case "POST /api/v1/sessions":
				c := m.build[key](t, nil, nil)
				check(t, h, r, c.path, c.body, "user", m.signer.userID, "Authorization", "")
			default:
				build, ok := m.build[key]
				if !ok {
					t.Fatalf("no request for %s", key)
				}
				owner := h.account(t, "owner", nil, false)
				c := build(t, admin, owner)
				if b, ok := bodies[key]; ok {
					c.body = b
				}
				check(t, h, r, c.path, c.body, "token", admin.tokenID, c.header...)
				if c.after != nil {
					c.after(answer{status: http.StatusNoContent})
				}
			}
		})
	}

	t.Run("reads write nothing", func(t *testing.T) {
		for _, r := range h.srv.routes {
			if r.method != http.MethodGet || auditedReads[r.method+" "+r.path] {
				continue
			}
			key := r.method + " " + r.path
			build, ok := m.build[key]
			if !ok {
				continue // the matrix reports routes it cannot send
			}
			c := build(t, admin, admin)
			before := h.auditEntries(t)
			a := h.send(r.method, c.path, c.body)
			if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
				t.Errorf("%s (%d) wrote audit entries %v", key, a.status, actionsOf(got))
			}
		}
	})

	t.Run("refusals and failures write nothing", func(t *testing.T) {
		before := h.auditEntries(t)
		h.send("POST", api+"/users", `{"username":"x y"}`)                                                 // invalid
		h.send("DELETE", api+"/roles/role_admin", "")                                                      // protected
		h.send("POST", api+"/groups", `{"name":"g"}`, m.noVerbs.bearer()...)                               // no verb
		h.send("DELETE", api+"/users/"+h.adminID+"/role", "")                                              // last administrator
		h.send("PUT", api+"/policy", `{"policy":{"public_sharing":"allowed"}}`)                            // fixed
		h.send("POST", api+"/tokens", `{"name":"t"}`, "Authorization", "", "Sec-Fetch-Site", "cross-site") // cross-site
		// Sharing with everyone where policy forbids it; a passcode no app asks for.
		h.send("POST", api+"/apps/"+m.appID+"/grants", `{"plane":"data","principal_kind":"anonymous"}`)
		h.send("POST", api+"/apps/"+m.appID+"/passcode", `{"passcode":"not-asked-for"}`, "Authorization", "")
		if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
			t.Errorf("refused requests wrote audit entries %v", actionsOf(got))
		}
		// A refused sign-in is audited, once, as session.create_failed.
		before = h.auditEntries(t)
		if a, _ := h.signIn(m.signer.username, "wrong-password-123"); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d", a.status)
		}
		got := newEntries(before, h.auditEntries(t))
		if !slices.Equal(actionsOf(got), []string{"session.create_failed"}) {
			t.Errorf("a refused sign-in wrote %v", actionsOf(got))
		}
	})
}
