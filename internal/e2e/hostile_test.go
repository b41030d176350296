package e2e

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// hostileApp plays every app of a browser test's server: the server sends
// everything its edge authorized to it (SVC_SERVER_PROXY_UPSTREAM), and it
// tells the apps apart by X-Svc-App-Id. It records what each request
// carried (which app it was for, whose identity the edge asserted, its
// method and path), serves attack pages whose scripts try what a hostile
// tenant's page would, and answers anything else with a small report.
//
// Attack pages read their parameters from their own query string and put
// their findings in window.__result (a promise the test awaits):
//
//	/attack-api?ws=<exec websocket URL>   the console's API from the app's page
//	/toss?value=&path=&domain=           document.cookie = "svc_session=…"
//	/csrf?target=<URL>                    a form POST and a fetch POST to target
//	/probe                                the app's own subresources: fetch, image, script
//	/selfpost                             a form POST to the app's own /submit
type hostileApp struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []edgeHit
}

// edgeHit is one request the hostile app received through the edge.
type edgeHit struct {
	AppID     string
	UserID    string // X-Svc-User-Id: whose identity the edge asserted
	Assertion bool
	Method    string
	Path      string
	Cookies   []string
}

func startHostileApp(t testing.TB) *hostileApp {
	t.Helper()
	h := &hostileApp{}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// hits returns the requests received for an app (every app when appID is
// empty) at paths beginning with prefix.
func (h *hostileApp) hits(appID, prefix string) []edgeHit {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []edgeHit
	for _, x := range h.seen {
		if (appID == "" || x.AppID == appID) && strings.HasPrefix(x.Path, prefix) {
			out = append(out, x)
		}
	}
	return out
}

func (h *hostileApp) serve(w http.ResponseWriter, r *http.Request) {
	x := edgeHit{AppID: r.Header.Get("X-Svc-App-Id"), UserID: r.Header.Get("X-Svc-User-Id"), Assertion: r.Header.Get("X-Svc-Assertion") != "",
		Method: r.Method, Path: r.URL.Path}
	for _, c := range r.Cookies() {
		x.Cookies = append(x.Cookies, c.Name)
	}
	h.mu.Lock()
	h.seen = append(h.seen, x)
	h.mu.Unlock()
	var script string
	switch r.URL.Path {
	case "/attack-api":
		script = attackAPIScript
	case "/toss":
		script = tossScript
	case "/csrf":
		script = postFormJS + csrfScript
	case "/probe":
		script = probeScript
	case "/selfpost":
		script = postFormJS + selfPostScript
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(x)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body><h1>hostile page</h1><script>%s</script></body></html>",
		html.EscapeString(r.URL.Path), script)
}

// attackAPIScript calls the console's API as the page's own origin would:
// mint a token, create a user, read /me, open a terminal in another app.
const attackAPIScript = `
const q = new URLSearchParams(location.search);
const call = async (path, init) => {
  try {
    const res = await fetch(path, Object.assign({credentials: 'include'}, init || {}));
    return {status: res.status, body: (await res.text()).slice(0, 300)};
  } catch (e) { return {error: String(e)}; }
};
const post = (path, body) => call(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
const shell = (url) => new Promise((resolve) => {
  let out = '', opened = false, ws;
  try { ws = new WebSocket(url); } catch (e) { resolve({error: String(e)}); return; }
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => { opened = true; };
  ws.onmessage = (m) => { out += typeof m.data === 'string' ? m.data : new TextDecoder().decode(m.data); };
  ws.onclose = (c) => resolve({opened, out, code: c.code});
  setTimeout(() => resolve({opened, out, timeout: true}), 15000);
});
window.__result = (async () => {
  let origin = null;
  try { origin = window.origin; } catch (e) {}
  let cookies = null;
  try { cookies = document.cookie; } catch (e) { cookies = 'throws: ' + e.name; }
  return {
    origin, cookies,
    token: await post('/api/v1/tokens', {name: 'minted-by-a-hostile-app'}),
    user: await post('/api/v1/users', {username: 'planted-by-app', display_name: 'Planted', password: 'planted-by-app-password-1'}),
    me: await call('/api/v1/me'),
    exec: q.get('ws') ? await shell(q.get('ws')) : null,
  };
})();
`

// tossScript plants a session cookie for the console from the app's page.
const tossScript = `
const q = new URLSearchParams(location.search);
let c = (q.get('name') || 'svc_session') + '=' + q.get('value') + '; path=' + (q.get('path') || '/');
if (q.get('domain')) c += '; domain=' + q.get('domain');
let error = null;
try { document.cookie = c; } catch (e) { error = String(e); }
window.__result = Promise.resolve({set: c, error, now: (() => { try { return document.cookie; } catch (e) { return 'throws'; } })()});
`

// csrfScript posts to another app twice: a fetch with credentials (no-cors,
// so the browser sends it without a preflight) and a form in a hidden
// frame; it reports once both were sent.
const csrfScript = `
const q = new URLSearchParams(location.search);
const target = q.get('target');
window.__result = (async () => {
  let fetched;
  try {
    const res = await fetch(target + 'fetch', {method: 'POST', mode: 'no-cors', credentials: 'include',
      headers: {'Content-Type': 'text/plain'}, body: 'from-a-hostile-app'});
    fetched = {type: res.type, status: res.status};
  } catch (e) { fetched = {error: String(e)}; }
  const frame = document.createElement('iframe');
  frame.name = 'sink';
  document.body.appendChild(frame);
  const loaded = new Promise((resolve) => { frame.onload = resolve; setTimeout(resolve, 10000); });
  postForm(target + 'form', 'sink');
  await loaded;
  return {fetched, form: 'sent'};
})();
`

// probeScript loads the app's own subresources, as any page does: a
// fetch, an image, a script (relative addresses, under the page's prefix
// in path mode), and tries the origin's storage.
const probeScript = `
const settle = (el, attr, url) => new Promise((resolve) => {
  el.onload = () => resolve('loaded'); el.onerror = () => resolve('error'); el[attr] = url;
  if (el.tagName === 'SCRIPT') document.head.appendChild(el);
  setTimeout(() => resolve('timeout'), 10000);
});
window.__result = (async () => {
  const out = {};
  try { out.fetch = (await fetch('probe-fetch', {credentials: 'include'})).status; } catch (e) { out.fetch = String(e); }
  out.image = await settle(new Image(), 'src', 'probe-image');
  out.script = await settle(document.createElement('script'), 'src', 'probe-script');
  try { localStorage.setItem('k', 'v'); out.storage = 'ok'; } catch (e) { out.storage = e.name; }
  return out;
})();
`

// selfPostScript submits a form to the app's own /submit, as a page of
// the app would.
const selfPostScript = `
window.__result = Promise.resolve('submitting');
postForm('submit', '');
`

// postFormJS defines postForm(action, target): a form POST of one field,
// as a page submits it.
const postFormJS = `
const postForm = (action, target) => {
  const form = document.createElement('form');
  form.method = 'POST';
  form.action = action;
  if (target) form.target = target;
  const input = document.createElement('input');
  input.name = 'note';
  input.value = 'from-the-page';
  form.appendChild(input);
  document.body.appendChild(form);
  form.submit();
};
`
