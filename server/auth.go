package server

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/websec"
	"github.com/svchost/svc/raftstore"
)

const (
	ctxAuth         = "svc.auth"
	ctxCredentialEr = "svc.credential_error"
)

type (
	authenticator interface {
		Authenticate(ctx context.Context, bearer, cookie string) (identity.Authenticated, error)
	}
	// factsSource gives the authorization facts of the current state.
	factsSource interface {
		Read() *raftstore.Reader
	}
	policySource interface {
		Current() policy.Policy
	}
)

// auth is what the request's credentials resolved to.
type auth struct {
	identity.Authenticated
	caller authz.Caller
	floor  authz.Floor
	facts  authz.Facts
	cookie bool // authenticated by the session cookie
}

// authenticate resolves the request's credentials for every route: a bearer
// token, else the session cookie, else anonymous. A bad credential does not
// fail a public route; routes that need a caller answer it (authorize). It
// also puts the actor in the request context for audit entries and events,
// and refuses cross-site state-changing requests from browsers.
//
// The session cookie counts only when the request carries exactly one
// (sessionCookieOf) and fetch-metadata isolation lets a cookie
// authenticate it (websec.CookieAllowed): a request another origin's page
// made (an app's, in any routing mode) is not the signed-in person's.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		bearer, err := bearerToken(req)
		if err != nil {
			c.Set(ctxCredentialEr, err)
		}
		if bearer == "" && isUnsafe(req.Method) {
			if err := s.cop.Check(req); err != nil {
				return errcode.New(errcode.PermDenied, "cross-site request refused").
					WithRemedy("send state-changing requests from the console's own origin, or authenticate with a bearer token")
			}
		}
		cookie := ""
		if bearer == "" {
			cookie, err = s.sessionCookieOf(c)
			if err != nil {
				c.Set(ctxCredentialEr, err)
			}
		}
		a, err := s.d.Identity.Authenticate(req.Context(), bearer, cookie)
		if err != nil {
			c.Set(ctxCredentialEr, err)
			a = identity.Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}
		}
		pol := s.d.Policy.Current()
		floor := authz.Floor{Disabled: verbList(pol.DisabledVerbs), AgentDisabled: verbList(pol.AgentDisabledVerbs)}
		facts := identity.FactsOf(s.d.Facts.Read())
		st := &auth{Authenticated: a, floor: floor, facts: facts, cookie: bearer == "" && a.SessionID != ""}
		st.caller = authz.Caller{Principal: a.Principal, Install: authz.InstallVerbs(facts, a.Principal, floor)}
		c.Set(ctxAuth, st)
		c.Set(ctxPrincipal, a.Principal.ID)
		ctx := actor.With(req.Context(), actor.Actor{Kind: a.Principal.Kind, ID: a.Principal.ID, UserID: a.Principal.UserID, RequestID: requestID(c)})
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// sessionCookieOf returns the session cookie's value for authentication,
// "" when the request carries none that counts. Two or more session
// cookies (the same name at two paths or domains, or both spellings: one
// was tossed beside the rightful one) are refused, never chosen between,
// and the answer clears every copy it can; a cookie the isolation rule
// does not let count is refused as a cross-site request.
func (s *Server) sessionCookieOf(c echo.Context) (string, error) {
	req := c.Request()
	want := websec.SessionCookieName(s.secure(req))
	other := websec.SessionCookie
	if want == other {
		other = websec.HostSessionCookie
	}
	found := websec.Lookup(req.Header, want, other)
	if found.Ambiguous() {
		h := c.Response().Header()
		for _, name := range []string{websec.SessionCookie, websec.HostSessionCookie} {
			for _, ck := range websec.Clearing(name, req.Host, req.URL.Path) {
				h.Add("Set-Cookie", ck.String())
			}
		}
		return "", errcode.New(errcode.AuthInvalid, "the session cookie is ambiguous: this browser sent more than one").
			WithRemedy("sign in again (this answer cleared them); if this repeats, clear this site's cookies in the browser and close other sites' tabs that may set them")
	}
	if found.Value == "" {
		return "", nil
	}
	if d := websec.CookieAllowed(req, s.trustedOrigins()...); !d.Allowed {
		return "", errcode.New(errcode.PermDenied, "cross-site request refused: the session cookie counts only for the console's own pages (%s)", d.Reason).
			WithRemedy("call the API from the console's own origin, or authenticate with a bearer token")
	}
	return found.Value, nil
}

// secure reports whether the console is served over TLS: an external URL
// is configured (the specification: it is set when another component
// terminates TLS, and it makes the session cookie Secure), or the request
// came over TLS.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || s.d.Config.Server.ExternalURL != ""
}

// trustedOrigins is the external URL's origin, when one is configured.
func (s *Server) trustedOrigins() []string {
	u, err := url.Parse(s.d.Config.Server.ExternalURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{u.Scheme + "://" + u.Host}
}

func verbList(ss []string) []authz.Verb {
	out := make([]authz.Verb, len(ss))
	for i, v := range ss {
		out[i] = authz.Verb(v)
	}
	return out
}

func isUnsafe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// bearerToken reads "Authorization: Bearer <token>"; any other scheme is a
// credential that is not valid.
func bearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", nil
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", errcode.New(errcode.AuthInvalid, "the Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(token), nil
}

func authOf(c echo.Context) *auth {
	a, _ := c.Get(ctxAuth).(*auth)
	if a == nil {
		return &auth{Authenticated: identity.Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}}
	}
	return a
}

func callerOf(c echo.Context) authz.Caller { return authOf(c).caller }

// authorize enforces a route's access rule: a credential for everything but
// public routes, the route's verb where it names one, and a changed password
// first for accounts that must change theirs.
func (s *Server) authorize(r route, next echo.HandlerFunc) echo.HandlerFunc {
	if r.access == accessPublic {
		return next
	}
	return func(c echo.Context) error {
		if err, ok := c.Get(ctxCredentialEr).(error); ok {
			return err
		}
		a := authOf(c)
		if a.Principal.Kind == authz.KindAnonymous {
			return errcode.New(errcode.AuthRequired, "sign in, or present a token").
				WithRemedy("POST /api/v1/sessions, or send Authorization: Bearer <token>")
		}
		if a.User != nil && a.User.MustChangePassword && !r.beforePasswordChange {
			return errcode.New(errcode.PermDenied, "this account must change its password first").
				WithRemedy("POST /api/v1/me/password")
		}
		if r.disabledCode != "" && policyDisables(a.floor, a.Principal, r.verb) {
			return errcode.New(r.disabledCode, "host policy turns %s off for everyone, the owner included", r.verb).
				WithDetail("verb", string(r.verb)).
				WithRemedy("an administrator can change disabled_verbs in the host policy (PUT /api/v1/policy)")
		}
		if r.access == accessOpen {
			// Whoever may open the app, or manages it; to anyone else it
			// does not exist.
			appID := c.Param("appID")
			if authz.AppVerbs(a.facts, a.Principal, appID, a.floor) == 0 && !identity.CanOpen(s.d.Facts.Read(), appID, a.Principal) {
				return errcode.New(errcode.NotFound, "no app %s", appID)
			}
			return next(c)
		}
		if r.method == http.MethodGet && r.action != "" && a.cookie {
			// A read with an audited effect (a secret's value): a link
			// from another site must not make the browser do it.
			if d := websec.SameOrigin(c.Request(), s.trustedOrigins()...); !d.Allowed {
				return errcode.New(errcode.PermDenied, "cross-site request refused: %s", d.Reason).
					WithRemedy("open it from the console's own pages, or authenticate with a bearer token")
			}
		}
		if r.access != accessVerb {
			return next(c)
		}
		if scope, _ := authz.ScopeOf(r.verb); scope == authz.ScopeApp {
			held := authz.AppVerbs(a.facts, a.Principal, c.Param("appID"), a.floor)
			if held == 0 {
				return errcode.New(errcode.NotFound, "no app %s", c.Param("appID"))
			}
			if !held.Has(r.verb) {
				return verbRefused(a.floor, a.Principal, r.verb, authz.AppVerbs(a.facts, a.Principal, c.Param("appID"), authz.Floor{}).Has(r.verb))
			}
			return next(c)
		}
		if !a.caller.Has(r.verb) {
			return verbRefused(a.floor, a.Principal, r.verb, authz.InstallVerbs(a.facts, a.Principal, authz.Floor{}).Has(r.verb))
		}
		return next(c)
	}
}

// policyDisables reports whether host policy's floor takes the verb away
// from the principal: disabled_verbs for everyone, agent_disabled_verbs
// for agent tokens.
func policyDisables(f authz.Floor, p authz.Principal, v authz.Verb) bool {
	return slices.Contains(f.Disabled, v) || (p.Agent && slices.Contains(f.AgentDisabled, v))
}

// verbRefused is the refusal of a caller without the verb: when host
// policy takes away a verb the caller holds (heldWithoutFloor), it says
// so, and which setting, rather than only that the verb is needed.
func verbRefused(f authz.Floor, p authz.Principal, v authz.Verb, heldWithoutFloor bool) *errcode.Error {
	if !heldWithoutFloor || !policyDisables(f, p, v) {
		return verbRequired(v)
	}
	setting := "disabled_verbs"
	if !slices.Contains(f.Disabled, v) {
		setting = "agent_disabled_verbs"
	}
	msg := "host policy turns %s off (%s)"
	if setting == "agent_disabled_verbs" {
		msg = "host policy turns %s off for agent tokens, which automated callers such as AI assistants use (%s)"
	}
	return errcode.New(errcode.PermVerbRequired, msg, v, setting).WithDetail("verb", string(v)).WithDetail("policy", setting).
		WithRemedy("a person can do it with their own credentials; an administrator can change %s in the host policy (PUT /api/v1/policy)", setting)
}

func verbRequired(v authz.Verb) *errcode.Error {
	return errcode.New(errcode.PermVerbRequired, "this needs the verb %s", v).WithDetail("verb", string(v))
}

// sessionCookie is the browser session's cookie: the API's alone. It is
// host-only (no Domain: no app subdomain receives it), HttpOnly,
// SameSite=Lax and at Path=/; over TLS (an external URL is configured, or
// the request came over TLS: the specification's rule) it is Secure and named __Host-svc_session, which a
// browser accepts only from a secure origin, host-only, at Path=/ (so no
// other host's script can plant one), else svc_session. An empty value
// clears it.
func (s *Server) sessionCookie(c echo.Context, value string, expires time.Time) *http.Cookie {
	secure := s.secure(c.Request())
	ck := &http.Cookie{
		Name: websec.SessionCookieName(secure), Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure,
	}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.Expires = expires
		ck.MaxAge = int(time.Until(expires).Seconds())
	}
	return ck
}
