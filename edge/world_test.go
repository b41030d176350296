package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// The world of the edge's tests: a real store with real identity (users,
// sessions, tokens, groups, grants), the real signing keys and signer,
// their JWKS on a real HTTP server, apps that are real HTTP servers which
// verify the assertion with go-jose against that JWKS and report what
// they received, and the edge in front of them over real HTTP.

const (
	testPW     = "correct-horse-battery-staple"
	testIssuer = "https://svc.example.test"
)

var bg = context.Background()

// cheapHasher keeps Argon2id cheap in tests.
var cheapHasher = password.NewHasher(password.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 4)

type world struct {
	t       testing.TB
	store   *raftstore.Store
	pol     *policy.Service
	ident   *identity.Service
	sharing *identity.Sharing
	keys    *SigningKeys
	signer  Signer
	table   *Table
	jwks    *httptest.Server
	// admin is an administrator (the installation needs one before any
	// other account): it can see every app, and opens none without a
	// data-plane grant.
	admin *person

	mu   sync.Mutex
	apps map[string]*testApp // by slug
}

// person is a user with a way to sign in.
type person struct {
	user    identity.User
	cookie  string // the svc_session value
	token   string // a delegated token's secret
	service string // a service token's secret (made by this person)
	svcID   string // that service token's ID
}

func tables() []raftstore.Def {
	ts := []raftstore.Def{audit.Entries, events.Events, events.Cursors, policy.Table, keyring.Keys, apps.Apps}
	ts = append(ts, identity.Tables()...)
	return append(ts, Tables()...)
}

func newWorld(t testing.TB) *world {
	t.Helper()
	store := raftstoretest.Open(t, tables()...)
	now := func() time.Time { return time.Now().UTC() }
	pol := policy.NewService(store, policy.Fixed{}, now)
	ident := identity.New(identity.Deps{
		Store: store, Hasher: cheapHasher, Policy: pol,
		AccountLimit:    throttle.New(1000, time.Minute, now, 1000),
		ClientLimit:     throttle.New(1000, time.Minute, now, 1000),
		AccountAnyLimit: throttle.New(1000, time.Minute, now, 1000),
		KnownClients:    throttle.NewRecent(time.Hour, now, 1000),
		Now:             now,
	})
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	if err != nil {
		t.Fatal(err)
	}
	ring := keyring.New(store, kek, now)
	keys, err := NewSigningKeys(KeysDeps{Store: store, Ring: ring, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSigner(SignerConfig{Keys: keys, Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	sharing := identity.NewSharing(identity.SharingDeps{
		Store: store, Hasher: cheapHasher, Policy: pol, Ring: ring,
		Apps: identity.AppFinderFunc(func(r *raftstore.Reader, id string) (events.AppRef, bool) {
			a, _, ok := apps.Apps.Get(r, id)
			return events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}, ok
		}),
		ClientLimit:  throttle.New(1000, time.Minute, now, 1000),
		AppLimit:     throttle.New(1000, time.Minute, now, 1000),
		KnownClients: throttle.NewRecent(time.Hour, now, 1000),
		Now:          now,
	})
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(keys.JWKS())
	}))
	t.Cleanup(jwks.Close)
	w := &world{t: t, store: store, pol: pol, ident: ident, sharing: sharing, keys: keys, signer: signer, table: NewTable(), jwks: jwks, apps: map[string]*testApp{}}
	if _, err := ident.FirstRun(bg, testPW); err != nil {
		t.Fatal(err)
	}
	w.admin = w.signIn("admin")
	// The first key, so that the JWKS the apps fetch has it.
	if _, err := signer.Assertion(bg, Claims{Subject: "usr_warmup", Audience: "app_warmup"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// edgeOpts adjust the edge a test runs.
type edgeOpts struct {
	cfg    Config
	signer Signer      // nil: the world's
	noPass bool        // no Passcodes at all
	store  StateReader // nil: the world's store
}

// edge builds a proxy over the world.
func (w *world) edge(o edgeOpts) *Proxy {
	w.t.Helper()
	signer := o.signer
	if signer == nil {
		signer = w.signer
	}
	d := Deps{Routes: w.table, Identity: w.ident, AppSessions: w.ident, Store: w.store, Signer: signer, Policy: w.pol}
	if o.store != nil {
		d.Store = o.store
	}
	if !o.noPass {
		d.Passcodes = w.sharing
	}
	p, err := New(o.cfg, d)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(p.Close)
	return p
}

// serve runs h on a real HTTP server and returns its base URL.
func serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// newPerson creates an account, signs it in, and gives it a delegated
// and a service token.
func (w *world) newPerson(name string) *person {
	w.t.Helper()
	n := identity.NewUser{Username: name, DisplayName: strings.ToUpper(name[:1]) + name[1:] + " Example", Email: name + "@example.test", Password: testPW}
	if _, _, err := w.ident.CreateUser(bg, n); err != nil {
		w.t.Fatal(err)
	}
	return w.signIn(name)
}

// signIn signs an account in and makes it a delegated and a service token.
func (w *world) signIn(name string) *person {
	w.t.Helper()
	in, err := w.ident.SignIn(bg, name, testPW, identity.Client{IP: "127.0.0.1"})
	if err != nil {
		w.t.Fatal(err)
	}
	u := in.User
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: u.ID, UserID: u.ID}}
	_, tok, err := w.ident.CreateToken(bg, caller, identity.TokenDelegated, identity.NewToken{Name: name + "-cli"})
	if err != nil {
		w.t.Fatal(err)
	}
	st, stok, err := w.ident.CreateToken(bg, caller, identity.TokenService, identity.NewToken{Name: name + "-robot"})
	if err != nil {
		w.t.Fatal(err)
	}
	return &person{user: u, cookie: in.Cookie, token: tok, service: stok, svcID: st.ID}
}

func (w *world) group(name string, members ...*person) identity.Group {
	w.t.Helper()
	g, err := w.ident.CreateGroup(bg, name)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, m := range members {
		if g, err = w.ident.AddMember(bg, g.ID, m.user.ID); err != nil {
			w.t.Fatal(err)
		}
	}
	return g
}

// grant shares an app on the data plane (or, with a role, the control
// plane) with a principal; kind anonymous is the grant to everyone.
func (w *world) grant(appID, kind, principalID string, roleID ...string) {
	w.t.Helper()
	g := identity.Grant{ID: ids.New(ids.Grant), AppID: appID, Plane: identity.PlaneData, PrincipalKind: kind, PrincipalID: principalID, CreatedAt: time.Now().UTC()}
	if len(roleID) > 0 {
		g.Plane, g.RoleID = identity.PlaneControl, &roleID[0]
	}
	if _, err := w.store.Apply(bg, identity.Grants.Insert(&g)); err != nil {
		w.t.Fatal(err)
	}
}

// testApp is an app: its record, its route, and the HTTP server of its
// workload.
type testApp struct {
	id, slug string
	srv      *httptest.Server
	route    Route
	// release unblocks /hang and the second half of /sse.
	release chan struct{}
	once    sync.Once
	hits    atomic.Int64
}

// addApp creates an app whose workload runs (port is its host port, 0 for
// none).
func (w *world) addApp(slug string, port int) *testApp {
	w.t.Helper()
	a := &testApp{id: ids.New(ids.App), slug: slug, release: make(chan struct{})}
	rec := apps.App{ID: a.id, Name: slug, Slug: slug, State: "running", DesiredState: "running", CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if _, err := w.store.Apply(bg, apps.Apps.Insert(&rec)); err != nil {
		w.t.Fatal(err)
	}
	a.srv = httptest.NewServer(w.appHandler(a))
	w.t.Cleanup(func() {
		a.unblock()
		a.srv.CloseClientConnections()
		a.srv.Close()
	})
	a.route = Route{AppID: a.id, Slug: slug, Port: port, Upstream: strings.TrimPrefix(a.srv.URL, "http://")}
	w.mu.Lock()
	w.apps[slug] = a
	w.mu.Unlock()
	w.publish()
	return a
}

func (a *testApp) unblock() { a.once.Do(func() { close(a.release) }) }

// setRoute changes an app's route (no upstream, another port…).
func (w *world) setRoute(a *testApp, r Route) {
	w.mu.Lock()
	a.route = r
	w.mu.Unlock()
	w.publish()
}

func (w *world) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var routes []Route
	for _, a := range w.apps {
		routes = append(routes, a.route)
	}
	w.table.Replace(routes)
}

// report is what an app received, as it tells it.
type report struct {
	Method     string              `json:"method"`
	Host       string              `json:"host"`
	Path       string              `json:"path"`
	RawPath    string              `json:"raw_path"`
	Query      string              `json:"query"`
	Header     map[string][]string `json:"header"`
	CookieLine []string            `json:"cookie_lines"`
	Cookies    []string            `json:"cookies"` // name=value as parsed
	Claims     map[string]any      `json:"claims"`
	VerifyErr  string              `json:"verify_error"`
	Body       string              `json:"body"`
}

// appHandler is a workload: it verifies the assertion and reports what
// it received; /sse streams, /ws echoes over a websocket, /hang never
// answers until released, /set-cookie tries to set svc's cookies.
func (w *world) appHandler(a *testApp) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/sse", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(rw, "data: first\n\n")
		rw.(http.Flusher).Flush()
		select {
		case <-a.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(rw, "data: second\n\n")
	})
	mux.HandleFunc("/ws", func(rw http.ResponseWriter, r *http.Request) {
		if _, err := w.verify(r, a.id); err != nil {
			http.Error(rw, err.Error(), http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(rw, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/hang", func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-a.release:
		case <-r.Context().Done():
			panic(http.ErrAbortHandler) // no answer, not a late 200
		}
	})
	mux.HandleFunc("/set-cookie", func(rw http.ResponseWriter, r *http.Request) {
		for _, c := range []string{"svc_session=planted; Path=/", "SVC_passcode_x=1", "app_pref=dark; Path=/", "Svc_other=2",
			"__Host-svc_session=planted; Path=/; Secure", "__Secure-SVC_app_x=planted; Secure"} {
			rw.Header().Add("Set-Cookie", c)
		}
		rw.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/own-headers", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Security-Policy", "default-src 'self'")
		rw.Header().Set("Service-Worker-Allowed", "/")
		rw.Header().Set("Clear-Site-Data", `"*"`)
		rw.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(rw, "<p>the app's page</p>")
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		rep := report{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, Query: r.URL.RawQuery,
			Header: r.Header, CookieLine: r.Header["Cookie"], Body: string(body)}
		for _, c := range r.Cookies() {
			rep.Cookies = append(rep.Cookies, c.Name+"="+c.Value)
		}
		claims, err := w.verify(r, a.id)
		rep.Claims = claims
		if err != nil {
			rep.VerifyErr = err.Error()
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("X-App", a.slug)
		_ = json.NewEncoder(rw).Encode(rep)
	})
	return mux
}

// verify checks the request's assertion as an app author would with a
// JOSE library: exactly one header, EdDSA by a key of the published JWKS,
// this app's audience, the issuer, not expired.
func (w *world) verify(r *http.Request, appID string) (map[string]any, error) {
	vals := r.Header.Values(AssertionHeader)
	if len(vals) != 1 {
		return nil, fmt.Errorf("%d assertion headers", len(vals))
	}
	res, err := http.Get(w.jwks.URL)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	tok, err := jwt.ParseSigned(vals[0], []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, err
	}
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		return nil, fmt.Errorf("kid %q is not in the JWKS", tok.Headers[0].KeyID)
	}
	var std jwt.Claims
	all := map[string]any{}
	if err := tok.Claims(keys[0].Key, &std, &all); err != nil {
		return nil, err
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: testIssuer, AnyAudience: jwt.Audience{appID}, Time: time.Now()}, 0); err != nil {
		return nil, err
	}
	return all, nil
}

// request helpers.

type reqOpt func(*http.Request)

func bearer(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func withCookie(name, value string) reqOpt {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: name, Value: value}) }
}

// consoleSession is the console's session cookie of p: the API's, which
// the edge never takes.
func consoleSession(p *person) reqOpt { return withCookie("svc_session", p.cookie) }

// as is the app cookie p's browser holds for app a after a handoff from
// p's console session: minted and redeemed as the handoff's two halves do.
func (w *world) as(p *person, a *testApp) reqOpt {
	w.t.Helper()
	return withCookie(appCookie(a.id), w.appCookieFor(p, a.id))
}

// appCookieFor mints and redeems a handoff code for p's console session.
func (w *world) appCookieFor(p *person, appID string) string {
	w.t.Helper()
	st := identity.NewHandoffState()
	sessionID, _, _ := strings.Cut(p.cookie, ".")
	code, err := w.ident.BeginAppSession(bg, identity.NewAppSession{AppID: appID, State: st, SessionID: sessionID})
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := w.ident.RedeemAppSession(bg, appID, code, func(string) string { return st.Secret })
	if err != nil {
		w.t.Fatal(err)
	}
	return c.Value
}

func header(k, v string) reqOpt {
	return func(r *http.Request) { r.Header[k] = append(r.Header[k], v) }
}

func browser() reqOpt { return header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8") }

func hostHeader(h string) reqOpt { return func(r *http.Request) { r.Host = h } }

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

func do(t testing.TB, method, url string, opts ...reqOpt) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(req)
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

// reached decodes an app's report, failing unless the request reached the
// app and its assertion verified.
func reached(t testing.TB, res *http.Response, body []byte) report {
	t.Helper()
	if res.StatusCode != http.StatusOK || res.Header.Get("X-App") == "" {
		t.Fatalf("status %d, want the app's 200; body: %s", res.StatusCode, body)
	}
	var rep report
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("app report: %v: %s", err, body)
	}
	if rep.VerifyErr != "" {
		t.Fatalf("the app could not verify its assertion: %s", rep.VerifyErr)
	}
	return rep
}

// refused decodes the edge's error envelope and checks status and code.
func refused(t testing.TB, res *http.Response, body []byte, status int, code string) envelope {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body: %s", res.StatusCode, status, body)
	}
	if res.Header.Get("X-App") != "" {
		t.Fatalf("the app answered; want the edge's refusal: %s", body)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an envelope: %v: %s", err, body)
	}
	if string(env.Code) != code {
		t.Fatalf("code %s, want %s: %s", env.Code, code, body)
	}
	if env.RequestID == "" || env.RequestID != res.Header.Get(headerRequestID) || env.Message == "" || env.Details == nil {
		t.Fatalf("envelope %+v (X-Request-Id %q): want a message, details and the request id of the header", env, res.Header.Get(headerRequestID))
	}
	return env
}

// raw sends bytes as they are to addr and reads one answer.
func raw(t testing.TB, addr, request string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

// svcHeaders returns the headers of a report whose names any server
// could read as X-Svc-*.
func svcHeaders(rep report) map[string][]string {
	out := map[string][]string{}
	for k, v := range rep.Header {
		if headerFold(k, svcHeaderPrefix, false) {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// open GETs url and returns the app's report, failing unless it reached
// the app with an assertion that verified.
func open(t testing.TB, url string, opts ...reqOpt) report {
	t.Helper()
	res, body := do(t, "GET", url, opts...)
	return reached(t, res, body)
}

// deny GETs url and returns the edge's refusal, failing unless it has the
// status and code.
func deny(t testing.TB, url string, status int, code string, opts ...reqOpt) envelope {
	t.Helper()
	res, body := do(t, "GET", url, opts...)
	return refused(t, res, body, status, code)
}
