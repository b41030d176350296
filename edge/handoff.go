package edge

import (
	"net/http"
	"net/url"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/websec"
)

// How a browser signs in to an app: the handoff. The console's session
// cookie belongs to the console's origin and the API alone; the edge never
// takes it as a credential (in path mode, where apps share the console's
// origin, it still reaches the edge, which ignores it and strips it). A
// browser opens an app with an app cookie of the app's own origin, which a
// handoff gives:
//
//  1. A browser asks for an app page without a valid app cookie: the edge
//     answers 303 to the console's handoff endpoint,
//     <console>/api/v1/edge/handoff?next=<the page>&state=<state>, and
//     keeps the state's secret in a cookie on the app's origin
//     (svc_handoff_<state ID>, at the redemption path only, for
//     stateTTL).
//  2. The handoff endpoint (Handoff, called by the API with the console
//     request's caller) checks next (an address of one of this
//     installation's apps, see addressed) and decides as the edge would:
//     a signed-in person who may open the app, or a browser whose console
//     origin shows an admission by the app's passcode, gets a single-use
//     code (identity.BeginAppSession: 60 s, bound to the app, the session
//     or admission, and the state) and a 303 to
//     <app origin>[/apps/<slug>]/.svc/handoff?code=…&next=…; anyone else
//     is sent to the console's /login or /passcode/<app ID> page, with the
//     handoff as its next. A browser not signed in on an app shared with
//     everyone is sent back to /.svc/handoff without a code, which marks
//     it (svc_visit_<app ID>, visitTTL) so that the edge lets it in
//     anonymously without asking again (mayIdentify: the edge sends a
//     browser's first page of such an app through the handoff, to tell
//     the app who a signed-in person is).
//  3. The edge redeems the code on the app's origin (redeem): only with
//     the state's cookie, once, for this app. It sets the app cookie
//     (svc_app_<app ID>: HttpOnly, SameSite=Lax, host-only; over TLS
//     __Host-svc_app_<app ID>, or in path mode, where it is scoped to the
//     app's prefix, __Secure-svc_app_<app ID>), clears the state cookie,
//     and answers 303 to next.
//
// The app cookie works only for its app and only while its session or
// admission lives (sign-out, a password change, a suspension, a new
// passcode end it), and only for the requests fetch-metadata isolation
// lets a cookie authenticate (credentials). Like every svc_ cookie, none of
// these reaches the app.

// handoffPath is the path, on an app's origin (after the prefix in path
// mode), where the edge redeems handoff codes. The app never sees it.
const handoffPath = "/.svc/handoff"

// HandoffEndpoint is the console's handoff endpoint, under the API.
const HandoffEndpoint = "/api/v1/edge/handoff"

// stateTTL bounds a handoff state cookie: long enough to sign in on the
// way.
const stateTTL = 15 * time.Minute

// sandboxPolicy is the Content-Security-Policy of every answer on the
// console's origin in path mode: the document gets an opaque origin (no
// allow-same-origin), so its scripts cannot read the console's storage or
// cookies, and the browser sends its fetches and subresource requests, even
// to the same host, as cross-site and without SameSite cookies. An app's
// own policy is kept beside it (both are enforced).
const sandboxPolicy = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads"

// appCookie is the base name of an app's cookie; the TLS spellings add
// the __Host- or __Secure- prefix.
func appCookie(appID string) string { return "svc_app_" + appID }

// appCookieName is the app cookie's name on the app's origin as r reached
// it.
func (p *Proxy) appCookieName(r *http.Request, t target) string {
	switch {
	case !p.appSecure(r):
		return appCookie(t.route.AppID)
	case p.cfg.Mode == ModePath:
		return websec.SecurePrefix + appCookie(t.route.AppID)
	}
	return websec.HostPrefix + appCookie(t.route.AppID)
}

// appSecure reports whether the app's origin is https (port mode's app
// ports speak plain HTTP).
func (p *Proxy) appSecure(r *http.Request) bool {
	if p.cfg.Mode == ModePort {
		return r.TLS != nil
	}
	return p.proto(r) == "https"
}

// cookiePath is the Path of the cookies the edge sets on an app's origin:
// the app's prefix in path mode.
func (t target) cookiePath(sub string) string {
	if t.prefix != "" {
		return t.prefix + sub
	}
	return sub
}

// creds is what a request's credentials resolved to at the edge.
type creds struct {
	auth      identity.Authenticated
	admitted  bool  // an admission by the app's passcode
	err       error // the credential's refusal; the request counts as anonymous
	ambiguous bool  // more than one app cookie: refused
	// bearer: the request presents a bearer token, svc's (resolved to auth
	// or err) or one svc never issues (no tok_ prefix: perhaps the app's
	// own, which passes through to an app the request may open).
	bearer bool
}

// credentials resolves a request for an app: svc's bearer token; else the
// app cookie; and an admission cookie for the app's passcode. A cookie
// counts only where fetch-metadata isolation lets it
// (websec.CookieAllowed): a request from another origin that is not a
// top-level navigation is treated as not signed in.
func (p *Proxy) credentials(r *http.Request, t target) creds {
	ctx := r.Context()
	if bearer := bearerOf(r.Header); bearer != "" {
		a, err := p.d.Identity.Authenticate(ctx, bearer, "")
		return creds{auth: a, err: err, bearer: true}
	}
	c := creds{bearer: anyBearer(r.Header)}
	c.auth.Principal.Kind = authz.KindAnonymous
	if !t.found {
		return c
	}
	appID := t.route.AppID
	want := p.appCookieName(r, t)
	found := websec.Lookup(r.Header, want, appCookieSpellings(appID, want)...)
	if found.Ambiguous() {
		c.ambiguous = true
		return c
	}
	admission := websec.Lookup(r.Header, PasscodeCookie(appID))
	if found.Value == "" && admission.Value == "" {
		return c
	}
	if d := websec.CookieAllowed(r); !d.Allowed {
		p.log.Debug("edge: a cookie credential ignored", "app_id", appID, "reason", d.Reason)
		return c
	}
	if found.Value != "" {
		aa, err := p.d.AppSessions.AuthenticateApp(ctx, appID, found.Value)
		if err != nil {
			c.err = err
		} else {
			c.auth, c.admitted = aa.Authenticated, aa.Admitted
		}
	}
	if !c.admitted && admission.Value != "" && p.d.Passcodes != nil {
		c.admitted = p.d.Passcodes.Admitted(appID, admission.Value)
	}
	return c
}

// appCookieSpellings are the other names an app's cookie could carry.
func appCookieSpellings(appID, but string) []string {
	var out []string
	for _, n := range []string{appCookie(appID), websec.HostPrefix + appCookie(appID), websec.SecurePrefix + appCookie(appID)} {
		if n != but {
			out = append(out, n)
		}
	}
	return out
}

// refuseAmbiguous answers a request carrying more than one cookie of the
// app's: one was planted beside the rightful one (cookie tossing) and
// which is which cannot be told. The answer clears every copy it can.
func (p *Proxy) refuseAmbiguous(w http.ResponseWriter, r *http.Request, t target) {
	h := w.Header()
	for _, name := range append(appCookieSpellings(t.route.AppID, ""), "") {
		if name == "" {
			continue
		}
		for _, c := range websec.Clearing(name, r.Host, r.URL.Path) {
			h.Add("Set-Cookie", c.String())
		}
	}
	writeError(w, r, errcode.New(errcode.AuthInvalid, "the app's sign-in cookie is ambiguous: this browser sent more than one").
		WithRemedy("open the app again (this answer cleared them); if this repeats, clear this site's cookies in the browser"))
}

// startHandoff sends a browser without a credential for the app to the
// console's handoff endpoint, keeping the handoff's state in a cookie on
// the app's origin.
func (p *Proxy) startHandoff(w http.ResponseWriter, r *http.Request, t target) {
	state := identity.NewHandoffState()
	http.SetCookie(w, &http.Cookie{
		Name: stateCookie(state.ID), Value: state.Secret, Path: t.cookiePath(handoffPath),
		MaxAge: int(stateTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: p.appSecure(r),
	})
	q := url.Values{"next": {p.pageURL(r, t)}, "state": {state.String()}}
	redirectTo(w, p.consoleBase(r)+HandoffEndpoint+"?"+q.Encode(), http.StatusSeeOther)
}

// stateCookie names the cookie of a handoff state.
func stateCookie(id string) string { return "svc_handoff_" + id }

// visitCookie marks a browser the handoff found not signed in, on an app
// shared with everyone: it is not sent through the handoff again while the
// mark lasts (visitTTL).
func visitCookie(appID string) string { return "svc_visit_" + appID }

// visitTTL is how long a visitor found not signed in stays anonymous to an
// app shared with everyone before the edge asks the console again.
const visitTTL = time.Hour

// mayIdentify says whether a visitor admitted anonymously by the grant to
// everyone is worth a handoff, which tells the app who they are if they
// are signed in on the console: a top-level page navigation of a browser
// the handoff has not found anonymous lately.
func (p *Proxy) mayIdentify(r *http.Request, t target) bool {
	return wantsPage(r) && websec.TopLevelNavigation(r) && websec.Lookup(r.Header, visitCookie(t.route.AppID)).Count == 0
}

// Handoff is the console's side of a handoff (GET /api/v1/edge/handoff):
// r is the console's request, caller who its session cookie says it is
// (the anonymous principal when none). It returns where to send the
// browser (see the top of this file), or the refusal.
func (p *Proxy) Handoff(r *http.Request, caller identity.Authenticated) (string, error) {
	if !websec.TopLevelNavigation(r) {
		return "", errcode.New(errcode.PermDenied, "the handoff is a page: open it in the browser's tab, not from a script or a frame")
	}
	q := r.URL.Query()
	if len(q["next"]) != 1 || len(q["state"]) > 1 {
		return "", errcode.Invalid("next", "the handoff takes one next and at most one state")
	}
	next := q.Get("next")
	t, err := p.addressed(r, next)
	if err != nil {
		return "", err
	}
	if caller.Token != nil {
		return "", errcode.Invalid("next", "a token opens apps by itself: send it to the app (Authorization: Bearer <token>)")
	}
	anonymous := caller.Principal.Kind == authz.KindAnonymous
	if !t.found {
		if anonymous {
			return p.signInPage(r, "/login"), nil
		}
		return "", errcode.New(errcode.NotFound, "no app at %s", next)
	}
	state, ok := identity.ParseHandoffState(q.Get("state"))
	if !ok {
		if q.Get("state") != "" {
			return "", errcode.Invalid("state", "the handoff's state is malformed")
		}
		// Not started by the edge (a link to the handoff): let the edge
		// start it, with a state of the browser's.
		return next, nil
	}
	appID := t.route.AppID
	var ref *identity.AdmissionRef
	if p.d.Passcodes != nil {
		if v := websec.Lookup(r.Header, PasscodeCookie(appID)).Value; v != "" {
			if a, ok := p.d.Passcodes.Admission(appID, v); ok {
				ref = &a
			}
		}
	}
	v, byPasscode := p.decide(p.d.Store.Read(), t, caller.Principal, ref != nil)
	n := identity.NewAppSession{AppID: appID, State: state}
	switch {
	case v == needSignIn:
		return p.signInPage(r, "/login"), nil
	case v == needPasscode:
		return p.signInPage(r, "/passcode/"+url.PathEscape(appID)), nil
	case v == denied:
		return "", errcode.New(errcode.PermDenied, "this app is not shared with you").
			WithRemedy("someone who manages the app can share it with you")
	case v == unknown:
		return "", errcode.New(errcode.NotFound, "no app at %s", next)
	case !anonymous:
		n.SessionID = caller.SessionID
		if byPasscode {
			n.Admission = ref
		}
	case byPasscode:
		n.Admission = ref
	default:
		// The grant to everyone lets anyone in: no code is needed; the
		// app's origin notes that this browser is not signed in.
		origin, prefix := p.appOrigin(r, t)
		return origin + prefix + handoffPath + "?" + url.Values{"next": {next}}.Encode(), nil
	}
	code, err := p.d.AppSessions.BeginAppSession(r.Context(), n)
	if err != nil {
		return "", err
	}
	origin, prefix := p.appOrigin(r, t)
	return origin + prefix + handoffPath + "?" + url.Values{"code": {code}, "next": {next}}.Encode(), nil
}

// signInPage is a console page (/login, /passcode/<app ID>) that sends the
// browser back to this handoff once it has signed in.
func (p *Proxy) signInPage(r *http.Request, page string) string {
	return p.consoleBase(r) + page + "?next=" + url.QueryEscape(HandoffEndpoint+"?"+r.URL.RawQuery)
}

// redeem is the app's side of a handoff (GET <app>/.svc/handoff): it
// redeems the code for the app cookie and sends the browser on to next.
// A browser that already holds a working app cookie is sent on whatever
// the code (a reload, the back button).
func (p *Proxy) redeem(w http.ResponseWriter, r *http.Request, t target) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet || !websec.TopLevelNavigation(r) {
		writeError(w, r, errcode.New(errcode.PermDenied, "the handoff is a page: open it in the browser's tab"))
		return
	}
	q := r.URL.Query()
	next := q.Get("next")
	if to, err := p.addressed(r, next); err != nil || !to.found || to.route.AppID != t.route.AppID {
		if err == nil {
			err = errcode.Invalid("next", "next is not an address of this app")
		}
		writeError(w, r, asCoded(err))
		return
	}
	if !q.Has("code") {
		// A visitor the handoff found not signed in (an app shared with
		// everyone): remember it for a while, and go on anonymously.
		http.SetCookie(w, &http.Cookie{Name: visitCookie(t.route.AppID), Value: "anonymous", Path: t.cookiePath("/"),
			MaxAge: int(visitTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: p.appSecure(r)})
		redirectTo(w, next, http.StatusSeeOther)
		return
	}
	ctx := r.Context()
	got, err := p.d.AppSessions.RedeemAppSession(ctx, t.route.AppID, q.Get("code"), func(id string) string {
		return websec.Lookup(r.Header, stateCookie(id)).Value
	})
	if err != nil {
		if c := p.credentials(r, t); !c.ambiguous && c.err == nil && (c.auth.Principal.Kind != authz.KindAnonymous || c.admitted) {
			redirectTo(w, next, http.StatusSeeOther)
			return
		}
		e := asCoded(err)
		if ce, ok := errcode.As(err); ok && ce.Code == errcode.AuthInvalid {
			e = errcode.New(ce.Code, "%s", ce.Message).WithRemedy("open %s again", next)
		}
		writeError(w, r, e)
		return
	}
	secure := p.appSecure(r)
	http.SetCookie(w, &http.Cookie{
		Name: p.appCookieName(r, t), Value: got.Value, Path: t.cookiePath("/"),
		Expires: got.ExpiresAt, MaxAge: max(1, int(time.Until(got.ExpiresAt)/time.Second)),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure,
	})
	http.SetCookie(w, &http.Cookie{Name: stateCookie(got.StateID), Value: "", Path: t.cookiePath(handoffPath), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure})
	redirectTo(w, next, http.StatusSeeOther)
}

// asCoded is err as a coded error (INTERNAL when it has no code).
func asCoded(err error) *errcode.Error {
	if e, ok := errcode.As(err); ok {
		return e
	}
	return errcode.Wrap(err, errcode.Internal, "the handoff failed")
}
