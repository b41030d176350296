package server

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

// The console's stand-in pages. Until the console exists, the pages the
// edge and the API send browsers to are served here, server-rendered and
// without dependencies: /login?next=… (sign in), /passcode/<app ID>?next=…
// (an app's passcode) and /setup (the first administrator). Each is one
// form whose one script posts it as JSON to the public API from the page's
// own origin (POST /api/v1/sessions, /api/v1/apps/<app ID>/passcode,
// /api/v1/setup) and then sends the browser to next: only where the edge
// says a console page may send it (handoffService.NextPage: a path of the
// console's origin, or an address of one of this installation's apps). Any
// other next is not followed, and the page says so. They are routes of the
// table like any other (operational: outside the API's base path), so the
// reference lists them.

// pageField is one input of a page's form.
type pageField struct {
	Name, Label, Type, Autocomplete string
}

// pageView is what a stand-in page shows.
type pageView struct {
	Title  string
	Lead   string
	Notice string // a problem with the request (a next not followed, …)
	// The form, when the page has one: the API endpoint it posts to, its
	// inputs and button, where the browser goes after a success ("" stays,
	// showing Done).
	Endpoint string
	Fields   []pageField
	Submit   string
	Next     string
	Done     string
}

// pageScript posts the form to its endpoint and follows data-next, or
// shows the API's refusal (message, remedy, code) as text.
const pageScript = `
{
  const form = document.querySelector("form");
  const out = document.getElementById("status");
  if (form) form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {};
    for (const [k, v] of new FormData(form)) body[k] = v;
    out.textContent = "…";
    let res;
    try {
      res = await fetch(form.dataset.endpoint, {method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    } catch (e) {
      out.textContent = "The server could not be reached: " + e.message;
      return;
    }
    if (res.ok) {
      if (form.dataset.next) { location.assign(form.dataset.next); return; }
      out.textContent = form.dataset.done;
      return;
    }
    let e = {};
    try { e = await res.json(); } catch (_) {}
    out.textContent = [e.message || res.statusText, e.remedy, e.code && "(" + e.code + ")"].filter(Boolean).join(" ");
  });
}
`

const pageStyle = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d2330; }
main { max-width: 26rem; margin: 4rem auto; padding: 2rem; background: #fff; border-radius: 8px; }
h1 { font-size: 1.4rem; margin-top: 0; }
label { display: block; margin: 0 0 1rem; }
input { display: block; width: 100%; box-sizing: border-box; padding: .5rem; font: inherit; }
button { padding: .5rem 1.2rem; font: inherit; }
.notice { padding: .5rem; background: #fff4d6; }
#status { min-height: 1.5em; }
small { color: #5a6270; }
`

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · svc</title>
<style>` + pageStyle + `</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{with .Lead}}<p>{{.}}</p>{{end}}
{{with .Notice}}<p class="notice" role="alert">{{.}}</p>{{end}}
{{if .Fields}}<form method="post" data-endpoint="{{.Endpoint}}" data-next="{{.Next}}" data-done="{{.Done}}">
{{range .Fields}}<label>{{.Label}}<input name="{{.Name}}" type="{{.Type}}" autocomplete="{{.Autocomplete}}" required></label>
{{end}}<button type="submit">{{.Submit}}</button>
<p id="status" role="status" aria-live="polite"></p>
</form>{{end}}
<p><small>svc has no console yet: its API is at /api/v1, described at <a href="/api/v1/reference">/api/v1/reference</a> once you are signed in.</small></p>
</main>
<script>` + pageScript + `</script>
</body>
</html>
`))

// pagePolicy is the pages' Content-Security-Policy: nothing but their own
// inline script and style (by hash), requests to their own origin (the
// API), no native form submission (the script posts), no framing.
var pagePolicy = "default-src 'none'; script-src '" + sha256Source(pageScript) + "'; style-src '" + sha256Source(pageStyle) +
	"'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

func sha256Source(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// renderPage answers a page with the headers of the server's other
// browser-facing answers: nothing cached, sniffed, framed or referred.
func renderPage(c echo.Context, p pageView) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", pagePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	var b strings.Builder
	if err := pageTemplate.Execute(&b, p); err != nil {
		return err
	}
	return c.HTML(http.StatusOK, b.String())
}

// pageNext is where the page sends the browser after a success, from its
// next parameter, or why it will not.
func (s *Server) pageNext(c echo.Context) (next, notice string) {
	nexts := c.QueryParams()["next"]
	switch {
	case len(nexts) == 0:
		return "", ""
	case len(nexts) > 1:
		return "", "This page was given more than one next address; it follows none."
	case s.d.Handoff == nil:
		return "", "This server serves no apps; the next address is not followed."
	}
	to, err := s.d.Handoff.NextPage(c.Request(), nexts[0])
	if err != nil {
		return "", "The next address is not followed: " + publicError(err).Message + "."
	}
	return to, ""
}

func (s *Server) getLoginPage(c echo.Context) error {
	next, notice := s.pageNext(c)
	return renderPage(c, pageView{
		Title: "Sign in", Notice: notice, Endpoint: api + "/sessions", Next: next, Submit: "Sign in",
		Fields: []pageField{{"username", "Username", "text", "username"}, {"password", "Password", "password", "current-password"}},
		Done:   "You are signed in.",
	})
}

func (s *Server) getPasscodePage(c echo.Context) error {
	appID := c.Param("appID")
	if !ids.Valid(ids.App, appID) {
		return errcode.New(errcode.NotFound, "no app %q asks for a passcode", appID)
	}
	name, err := s.d.Sharing.PasscodeApp(appID)
	if err != nil {
		return err
	}
	next, notice := s.pageNext(c)
	return renderPage(c, pageView{
		Title: name, Lead: "This app asks for its passcode.", Notice: notice, Next: next, Submit: "Open",
		Endpoint: api + "/apps/" + url.PathEscape(appID) + "/passcode",
		Fields:   []pageField{{"passcode", "Passcode", "password", "off"}}, Done: "The passcode admits this browser for a day.",
	})
}

func (s *Server) getSetupPage(c echo.Context) error {
	next, notice := s.pageNext(c)
	if !s.d.Identity.SetupRequired() {
		return renderPage(c, pageView{Title: "Set up svc", Lead: "This installation is set up: sign in at /login.", Notice: notice})
	}
	return renderPage(c, pageView{
		Title: "Set up svc", Lead: "Create the first account; it administers the installation.", Notice: notice,
		Endpoint: api + "/setup", Next: next, Submit: "Create and sign in", Done: "The account is created, and you are signed in.",
		Fields: []pageField{{"username", "Username", "text", "username"}, {"display_name", "Display name", "text", "name"},
			{"password", "Password", "password", "new-password"}},
	})
}
