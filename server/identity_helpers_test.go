package server

// Helpers shared by the identity and access tests: a harness with a custom
// configuration, principals made directly through the identity service, and
// small readers of answers.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/websec"
	"github.com/svchost/svc/raftstore"
)

// cookieSession is the session cookie's name over plain HTTP, as the
// harness serves.
const cookieSession = websec.SessionCookie

// harnessOptions vary the harness newHarness builds.
type harnessOptions struct {
	env   []string   // extra KEY=VALUE settings; they win over the harness's own
	level slog.Level // log level of the harness logger (newHarness: info)
	// hasher replaces testHasher (the benchmarks use the production one).
	hasher identity.Hasher
	// adminPassword is the first run's administrator password; empty leaves
	// the installation waiting for setup (and mints no harness token).
	adminPassword string
	noToken       bool // do not mint the administrator's harness token
	discardLogs   bool
	// osvDB is the built-in scanner's OSV database (none when empty).
	osvDB string
}

// newHarnessWith builds a harness (the real services over a real
// single-node store) with the options' configuration.
func newHarnessWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), logs: &syncBuffer{}, opts: o}
	h.open()
	return h
}

// principal is someone requests are sent as.
type principal struct {
	name     string
	userID   string // empty for a service token or anonymous
	username string
	password string
	token    string // the bearer secret, "tok_….<secret>"
	tokenID  string
}

// bearer is the header pair that sends a request as p.
func (p *principal) bearer() []string { return []string{"Authorization", "Bearer " + p.token} }

var uniqSeq atomic.Int64

// uniq returns a name no other call returns: usernames, group and role
// names.
func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, uniqSeq.Add(1)) }

func userCaller(id string) authz.Caller {
	return authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: id, UserID: id}}
}

func tokenIDOf(secret string) string { id, _, _ := strings.Cut(secret, "."); return id }

// secretOf is the secret part of a "<id>.<secret>" credential.
func secretOf(cred string) string { _, s, _ := strings.Cut(cred, "."); return s }

// account creates an active local account, with an installation role when
// roleID is set, and (withToken) a delegated token acting for it.
func (h *harness) account(t testing.TB, name string, roleID *string, withToken bool) *principal {
	t.Helper()
	ctx := context.Background()
	p := &principal{name: name, username: uniq(name), password: "pw-" + uniq(name) + "-long-enough"}
	u, _, err := h.ident.CreateUser(ctx, identity.NewUser{Username: p.username, Password: p.password})
	if err != nil {
		t.Fatalf("create account %s: %v", p.username, err)
	}
	p.userID = u.ID
	if roleID != nil {
		if _, err := h.ident.SetUserRole(ctx, u.ID, roleID); err != nil {
			t.Fatalf("give %s the role %s: %v", p.username, *roleID, err)
		}
	}
	if withToken {
		p.token = h.delegatedToken(t, p.userID, false)
		p.tokenID = tokenIDOf(p.token)
	}
	return p
}

// delegatedToken mints a delegated token for an account.
func (h *harness) delegatedToken(t testing.TB, userID string, agent bool) string {
	t.Helper()
	_, secret, err := h.ident.CreateToken(context.Background(), userCaller(userID), identity.TokenDelegated, identity.NewToken{Name: uniq("tok"), Agent: agent})
	if err != nil {
		t.Fatalf("mint a token for %s: %v", userID, err)
	}
	return secret
}

// role creates a custom role of exactly the given verbs.
func (h *harness) role(t testing.TB, scope authz.Scope, verbs ...authz.Verb) string {
	t.Helper()
	r, err := h.ident.CreateRole(context.Background(), uniq("role"), scope, verbs)
	if err != nil {
		t.Fatalf("create a %s role of %v: %v", scope, verbs, err)
	}
	return r.ID
}

// holder is a fresh account whose only installation role is a custom one
// holding exactly verbs, with a delegated token.
func (h *harness) holder(t testing.TB, verbs ...authz.Verb) *principal {
	t.Helper()
	id := h.role(t, authz.ScopeInstall, verbs...)
	p := h.account(t, "holder", &id, true)
	p.name = fmt.Sprintf("holder of %v", verbs)
	return p
}

// serviceToken mints a service token (its own principal, holding nothing
// unless something is shared with it).
func (h *harness) serviceToken(t testing.TB) *principal {
	t.Helper()
	admin := userCaller(h.adminID)
	_, secret, err := h.ident.CreateToken(context.Background(), admin, identity.TokenService, identity.NewToken{Name: uniq("service")})
	if err != nil {
		t.Fatal(err)
	}
	return &principal{name: "service token", token: secret, tokenID: tokenIDOf(secret)}
}

// adminPrincipal is the harness administrator.
func (h *harness) adminPrincipal() *principal {
	return &principal{name: "admin", userID: h.adminID, username: "admin", password: adminPassword, token: h.token, tokenID: tokenIDOf(h.token)}
}

// grantApp shares an app (which need not exist: apps have no routes yet)
// with a principal on the control plane with a role, as the grants
// endpoints will.
func (h *harness) grantApp(t testing.TB, appID, kind, principalID, roleID string) {
	t.Helper()
	g := identity.Grant{ID: ids.New(ids.Grant), AppID: appID, Plane: identity.PlaneControl, PrincipalKind: kind,
		PrincipalID: principalID, RoleID: &roleID, CreatedAt: time.Now().UTC()}
	if _, err := h.store.Apply(context.Background(), identity.Grants.Insert(&g)); err != nil {
		t.Fatalf("grant %s on %s: %v", roleID, appID, err)
	}
}

// group creates a group with members and an optional installation role.
func (h *harness) group(t testing.TB, roleID *string, members ...string) string {
	t.Helper()
	ctx := context.Background()
	g, err := h.ident.CreateGroup(ctx, uniq("group"))
	if err != nil {
		t.Fatal(err)
	}
	if len(members) > 0 {
		if _, err := h.ident.SetMembers(ctx, g.ID, members); err != nil {
			t.Fatal(err)
		}
	}
	if roleID != nil {
		if _, err := h.ident.SetGroupRole(ctx, g.ID, roleID); err != nil {
			t.Fatal(err)
		}
	}
	return g.ID
}

// auditEntries returns every audit entry, oldest first.
func (h *harness) auditEntries(t testing.TB) []audit.Entry {
	t.Helper()
	items, _ := audit.Entries.List(h.store.Read(), raftstore.Query{})
	out := make([]audit.Entry, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

// allEvents returns every event of the outbox.
func (h *harness) allEvents(t testing.TB) []events.Event {
	t.Helper()
	items, _ := events.Events.List(h.store.Read(), raftstore.Query{})
	out := make([]events.Event, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

// signIn posts credentials to /sessions, anonymously, and returns the
// answer and the session cookie it set ("" if none).
func (h *harness) signIn(username, pw string, header ...string) (answer, string) {
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, pw)
	hdr := append([]string{"Authorization", "", "Content-Type", "application/json"}, header...)
	a := h.do("POST", api+"/sessions", strings.NewReader(body), hdr...)
	if ck := cookieNamed(a, cookieSession); ck != nil {
		return a, ck.Value
	}
	return a, ""
}

// withCookie is the header set of a cookie-authenticated request from the
// console's own origin.
func withCookie(cookie string, more ...string) []string {
	return append([]string{"Authorization", "", "Cookie", cookieSession + "=" + cookie, "Sec-Fetch-Site", "same-origin"}, more...)
}

// cookieNamed returns the cookie an answer sets, or nil.
func cookieNamed(a answer, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// codeOf is the error code of an answer, "" when it is not an envelope.
func codeOf(a answer) errcode.Code {
	var e envelope
	if json.Unmarshal(a.body, &e) != nil {
		return ""
	}
	return e.Code
}

func envelopeOf(a answer) (envelope, bool) {
	var e envelope
	err := json.Unmarshal(a.body, &e)
	return e, err == nil && e.Code != ""
}

// isRefusal reports whether a code says the caller may not do this: who
// they are (AUTH_), what they hold (PERM_) or host policy (POLICY_).
func isRefusal(c errcode.Code) bool {
	s := string(c)
	return strings.HasPrefix(s, "AUTH_") || strings.HasPrefix(s, "PERM_") || strings.HasPrefix(s, "POLICY_")
}

// jsonOf marshals v for a request body.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// decodeAs decodes an answer's body, failing the test when it does not fit.
func decodeAs[T any](t testing.TB, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("answer %d is not the expected body: %v: %s", a.status, err, a.body)
	}
	return v
}

// send is h.do with a JSON body (none when body is "").
func (h *harness) send(method, path, body string, header ...string) answer {
	if body == "" {
		return h.do(method, path, nil, header...)
	}
	return h.do(method, path, strings.NewReader(body), append([]string{"Content-Type", "application/json"}, header...)...)
}

// wantError checks an error answer's status and code.
func wantError(t testing.TB, what string, a answer, status int, code errcode.Code) envelope {
	t.Helper()
	e, _ := envelopeOf(a)
	if a.status != status || e.Code != code {
		t.Errorf("%s: got %d %s, want %d %s: %s", what, a.status, e.Code, status, code, a.body)
	}
	return e
}

// wantStatus checks a success answer's status.
func wantStatus(t testing.TB, what string, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: got %d, want %d: %s", what, a.status, status, a.body)
	}
}

// app creates an app as the administrator and returns its ID.
func (h *harness) app(t testing.TB, name string) string {
	t.Helper()
	a := h.send("POST", api+"/apps", jsonOf(map[string]string{"name": name}))
	if a.status != http.StatusCreated {
		t.Fatalf("create app %q: %d %s", name, a.status, a.body)
	}
	var ans struct {
		App struct {
			ID string `json:"id"`
		} `json:"app"`
	}
	if err := json.Unmarshal(a.body, &ans); err != nil {
		t.Fatal(err)
	}
	return ans.App.ID
}

// putSecret sets a secret as the administrator.
func (h *harness) putSecret(t testing.TB, appID, key, value string) {
	t.Helper()
	a := h.send("PUT", api+"/apps/"+appID+"/secrets/"+key, jsonOf(map[string]string{"value": value}))
	if a.status != http.StatusOK {
		t.Fatalf("put secret %s: %d %s", key, a.status, a.body)
	}
}

// openGrant shares an app on the data plane (to open it) with a principal.
func (h *harness) openGrant(t testing.TB, appID, kind, principalID string) {
	t.Helper()
	g := identity.Grant{ID: ids.New(ids.Grant), AppID: appID, Plane: identity.PlaneData, PrincipalKind: kind,
		PrincipalID: principalID, CreatedAt: time.Now().UTC()}
	if _, err := h.store.Apply(context.Background(), identity.Grants.Insert(&g)); err != nil {
		t.Fatalf("open grant on %s: %v", appID, err)
	}
}
