package edge

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/identity"
)

// TestTokensThatDoNotResolve: over real HTTP, in every routing mode, the
// edge in front of a real app answers a bearer token that does not
// resolve as the API answers it: unknown, revoked, expired, malformed or
// not one svc issues, 401 AUTH_TOKEN_INVALID; its owner suspended or
// deleted, 401 AUTH_TOKEN_ORPHANED. A browser's page request with such a
// token gets the same answer, not the handoff (which takes no token). On
// an app shared with everyone a token that does not resolve counts as no
// credential, and one svc does not issue reaches the app as the app's own.
func TestTokensThatDoNotResolve(t *testing.T) {
	w := newWorld(t)
	owner, suspended, deleted := w.newPerson("owner"), w.newPerson("suspended"), w.newPerson("deleted")
	notes := w.addApp("notes", 9001)
	public := w.addApp("public", 9002)
	w.grant(public.id, authz.KindAnonymous, "")
	for _, p := range []*person{owner, suspended, deleted} {
		w.grant(notes.id, authz.KindUser, p.user.ID)
		w.grant(notes.id, authz.KindToken, p.svcID)
	}
	admin := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: w.admin.user.ID, UserID: w.admin.user.ID}, Install: authz.SetOf(authz.InstallUsersManage, authz.InstallTokensManage)}

	revoked := w.mintToken(owner)
	if err := w.ident.RevokeToken(bg, admin, tokenIDOf(revoked)); err != nil {
		t.Fatal(err)
	}
	expired := w.mintToken(owner)
	w.expire(tokenIDOf(expired))
	status := identity.StatusSuspended
	if _, err := w.ident.UpdateUser(bg, admin, suspended.user.ID, identity.UserPatch{Status: &status}); err != nil {
		t.Fatal(err)
	}
	if err := w.ident.DeleteUser(bg, deleted.user.ID); err != nil {
		t.Fatal(err)
	}

	refusals := []struct {
		name, token, code string
	}{
		{"unknown", "tok_01JAAAAAAAAAAAAAAAAAAAAAAA.nope", "AUTH_TOKEN_INVALID"},
		{"malformed", "tok_nope", "AUTH_TOKEN_INVALID"},
		{"not one svc issues", "abc.def", "AUTH_TOKEN_INVALID"},
		{"revoked", revoked, "AUTH_TOKEN_INVALID"},
		{"expired", expired, "AUTH_TOKEN_INVALID"},
		{"owner suspended", suspended.token, "AUTH_TOKEN_ORPHANED"},
		{"owner deleted", deleted.token, "AUTH_TOKEN_ORPHANED"},
	}
	for _, m := range []struct {
		mode  string
		front bool
	}{{ModePort, false}, {ModeSubdomain, true}, {ModePath, true}} {
		p := w.edge(edgeOpts{cfg: Config{Mode: m.mode, ConsolePort: 8080, BaseDomain: "svc.test"}})
		url := func(a *testApp) (string, []reqOpt) {
			switch m.mode {
			case ModeSubdomain:
				return serve(t, p.Front(http.NotFoundHandler())) + "/x", []reqOpt{hostHeader(a.slug + ".svc.test")}
			case ModePath:
				return serve(t, p.Front(http.NotFoundHandler())) + "/apps/" + a.slug + "/x", nil
			}
			return serve(t, p.PortHandler(a.route.Port)) + "/x", nil
		}
		notesURL, notesOpts := url(notes)
		publicURL, publicOpts := url(public)
		t.Run(m.mode, func(t *testing.T) {
			for _, c := range refusals {
				for _, asBrowser := range []bool{false, true} {
					opts := append([]reqOpt{bearer(c.token)}, notesOpts...)
					if asBrowser {
						opts = append(opts, browser())
					}
					res, body := do(t, "GET", notesURL, opts...)
					if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"code":"`+c.code+`"`) {
						t.Errorf("%s token (browser %v): %d %s, want 401 %s", c.name, asBrowser, res.StatusCode, body, c.code)
					}
				}
				// An app shared with everyone opens as to anyone.
				if rep := open(t, publicURL, append([]reqOpt{bearer(c.token)}, publicOpts...)...); rep.Claims["sub"] != AnonymousSubject {
					t.Errorf("%s token on everyone's app: sub %v, want anonymous", c.name, rep.Claims["sub"])
				}
			}
			// What still opens: the owner's token; a service token its
			// deleted creator made (it outlives them).
			if rep := open(t, notesURL, append([]reqOpt{bearer(owner.token)}, notesOpts...)...); rep.Claims["sub"] != owner.user.ID {
				t.Errorf("the owner's token: sub %v", rep.Claims["sub"])
			}
			if rep := open(t, notesURL, append([]reqOpt{bearer(deleted.service)}, notesOpts...)...); rep.Claims["sub"] != deleted.svcID {
				t.Errorf("a deleted account's service token: sub %v", rep.Claims["sub"])
			}
			// A token svc does not issue is the app's own where the app
			// opens: it reaches the app untouched.
			rep := open(t, publicURL, append([]reqOpt{bearer("abc.def")}, publicOpts...)...)
			if got := rep.Header["Authorization"]; len(got) != 1 || got[0] != "Bearer abc.def" {
				t.Errorf("the app's own bearer token reached it as %q", got)
			}
		})
	}
}

// mintToken makes p another delegated token and returns its secret.
func (w *world) mintToken(p *person) string {
	w.t.Helper()
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: p.user.ID, UserID: p.user.ID}}
	_, secret, err := w.ident.CreateToken(bg, caller, identity.TokenDelegated, identity.NewToken{Name: "extra"})
	if err != nil {
		w.t.Fatal(err)
	}
	return secret
}

// expire moves a token's expiry into the past.
func (w *world) expire(id string) {
	w.t.Helper()
	tok, _, ok := identity.Tokens.Get(w.store.Read(), id)
	if !ok {
		w.t.Fatalf("no token %s", id)
	}
	past := time.Now().UTC().Add(-time.Minute)
	tok.ExpiresAt = &past
	if _, err := w.store.Apply(bg, identity.Tokens.Put(&tok)); err != nil {
		w.t.Fatal(err)
	}
}

func tokenIDOf(secret string) string { id, _, _ := strings.Cut(secret, "."); return id }
