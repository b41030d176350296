package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/clientip"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/websec"
	"github.com/svchost/svc/raftstore"
)

// Routing modes (SVC_SERVER_ROUTING_MODE).
const (
	// ModePort: the edge listens on each app's host port (Route.Port).
	ModePort = "port"
	// ModeSubdomain: <slug>.<base domain> on the main listener.
	ModeSubdomain = "subdomain"
	// ModePath: /apps/<slug>/ on the main listener, the prefix removed
	// before forwarding and sent as X-Forwarded-Prefix.
	ModePath = "path"
)

// Defaults of Config.
const (
	// DefaultResponseHeaderTimeout bounds the wait for an app's response
	// headers (504 after it). It does not bound a response once its
	// headers came: streams (server-sent events, long downloads,
	// websockets) run as long as they like.
	DefaultResponseHeaderTimeout = 5 * time.Minute
	// DefaultDialTimeout bounds connecting to an app.
	DefaultDialTimeout = 5 * time.Second
)

// Convenience headers: the assertion's content, unsigned. An app must not
// trust them alone (the assertion is the statement to verify); the edge
// sets them and strips any a client sent.
const (
	HeaderUserID = "X-Svc-User-Id"
	HeaderEmail  = "X-Svc-Email"
	HeaderName   = "X-Svc-Name"
	HeaderGroups = "X-Svc-Groups" // group names, comma-separated
	HeaderAppID  = "X-Svc-App-Id" // the app the request is for
)

// AnonymousSubject is the assertion's subject for a visitor admitted by
// the grant to everyone without signing in.
const AnonymousSubject = "anonymous"

// Config is the edge's startup configuration.
type Config struct {
	// Mode is the routing mode: ModePort (the default when empty),
	// ModeSubdomain or ModePath.
	Mode string
	// BaseDomain is the console's domain in subdomain mode when no
	// external URL is set, and the domain apps are subdomains of unless
	// AppsDomain says otherwise.
	BaseDomain string
	// AppsDomain, when set, is where apps are served apart from the
	// console (SVC_SERVER_APPS_DOMAIN): <slug>.<apps domain> in subdomain
	// mode, the host of the apps' ports in port mode; neither serves the
	// console, and apps are not served on any other host.
	AppsDomain string
	// ExternalURL is the address browsers use for the console
	// (SVC_SERVER_EXTERNAL_URL), empty when unset. It decides where
	// browsers are sent to sign in, the scheme apps are told
	// (X-Forwarded-Proto) and the host of the apps' URLs.
	ExternalURL string
	// ConsolePort is the main listener's port: without an external URL,
	// the console's address is built from it and the address the
	// connection came to (never from the Host header).
	ConsolePort int
	// ProxyUpstream, when set (SVC_SERVER_PROXY_UPSTREAM), receives every
	// request the edge authorized instead of the app's workload, for
	// installations where another component routes to workloads.
	ProxyUpstream string
	// ResponseHeaderTimeout and DialTimeout bound the wait for an app (0:
	// the defaults above).
	ResponseHeaderTimeout time.Duration
	DialTimeout           time.Duration
	// TrustedProxies are the proxies in front of svc whose
	// X-Forwarded-For the edge passes on (server.trusted_proxies); from
	// any other peer the header is replaced by the peer's address.
	TrustedProxies []netip.Prefix
}

// The edge's collaborators, declared where they are used.
type (
	// Authenticator resolves a bearer token, as the API does
	// (*identity.Service); the edge never passes it the console's
	// session cookie.
	Authenticator interface {
		Authenticate(ctx context.Context, bearer, cookie string) (identity.Authenticated, error)
	}
	// AppSessions are the app cookies of browsers, and the handoff that
	// gives them (*identity.Service).
	AppSessions interface {
		BeginAppSession(ctx context.Context, n identity.NewAppSession) (string, error)
		RedeemAppSession(ctx context.Context, appID, code string, stateSecret func(stateID string) string) (identity.AppCookie, error)
		AuthenticateApp(ctx context.Context, appID, cookie string) (identity.AppAuth, error)
	}
	// StateReader gives a read view of the replicated store, where the
	// grants, accounts and groups are, and says (CaughtUp: nil, else a
	// retryable STORE_UNAVAILABLE) whether this node's view has caught up
	// with the cluster since it started or restored a snapshot.
	StateReader interface {
		Read() *raftstore.Reader
		CaughtUp() error
	}
	// PolicySource gives the host policy in force (public_sharing).
	PolicySource interface {
		Current() policy.Policy
	}
)

// The services of svc that implement them.
var (
	_ Authenticator = (*identity.Service)(nil)
	_ AppSessions   = (*identity.Service)(nil)
	_ StateReader   = (*raftstore.Store)(nil)
	_ PolicySource  = (*policy.Service)(nil)
)

// Deps are the edge's collaborators.
type Deps struct {
	Routes   RouteTable
	Identity Authenticator
	Store    StateReader
	Signer   Signer
	// AppSessions mints, redeems and checks the app cookies a handoff
	// gives browsers (required: it is how browsers sign in to apps).
	AppSessions AppSessions
	// Passcodes checks admission cookies; nil admits nobody by passcode.
	Passcodes Passcodes
	// Policy, when set, lets host policy's public_sharing narrow what the
	// grant to everyone admits: none admits nobody through it,
	// passcode_only only through one with a passcode.
	Policy PolicySource
	Logger *slog.Logger
	// Now is the clock of activity records (time.Now when nil).
	Now func() time.Time
}

// Proxy is the edge: it finds an app's route, authorizes the request,
// and forwards it with the caller's assertion. See the package doc for
// the rules.
type Proxy struct {
	cfg       Config
	d         Deps
	log       *slog.Logger
	base      string   // lower-case base domain (subdomain mode)
	apps      string   // lower-case apps domain: AppsDomain, else base (subdomain mode)
	external  *url.URL // nil when unset
	upstream  *url.URL // nil: each app's workload
	transport *http.Transport
	rp        *httputil.ReverseProxy
	act       activity
	clients   *clientip.Resolver
}

// New validates the configuration and builds the edge.
func New(cfg Config, d Deps) (*Proxy, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModePort
	}
	switch cfg.Mode {
	case ModePort, ModeSubdomain, ModePath:
	default:
		return nil, fmt.Errorf("edge: routing mode %q (accepted: port, subdomain, path)", cfg.Mode)
	}
	if d.Routes == nil || d.Identity == nil || d.AppSessions == nil || d.Store == nil || d.Signer == nil {
		return nil, errors.New("edge: missing dependencies (routes, identity, app sessions, store and signer are required)")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	p := &Proxy{cfg: cfg, d: d, log: d.Logger, base: strings.ToLower(strings.TrimSuffix(cfg.BaseDomain, ".")),
		clients: clientip.New(cfg.TrustedProxies)}
	p.apps = strings.ToLower(strings.TrimSuffix(cfg.AppsDomain, "."))
	if p.apps == "" && cfg.Mode == ModeSubdomain {
		p.apps = p.base
	}
	if cfg.Mode == ModeSubdomain && p.apps == "" {
		return nil, errors.New("edge: subdomain routing needs a base domain")
	}
	var err error
	if p.external, err = parseHTTPURL(cfg.ExternalURL); err != nil {
		return nil, fmt.Errorf("edge: external URL: %w", err)
	}
	if p.upstream, err = parseHTTPURL(cfg.ProxyUpstream); err != nil {
		return nil, fmt.Errorf("edge: proxy upstream: %w", err)
	}
	p.transport = newTransport(cfg)
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.transport,
		FlushInterval:  -1, // streams pass through unbuffered
		BufferPool:     bufferPool{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamFailed,
		ErrorLog:       slog.NewLogLogger(d.Logger.Handler(), slog.LevelDebug),
	}
	return p, nil
}

func parseHTTPURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL with a host", s)
	}
	return u, nil
}

// newTransport is the one pool of upstream connections: many idle
// connections per app (the default transport's two collapse under load),
// HTTP/1.1 (what workloads speak, and what upgrades need), no proxy from
// the environment, and no transparent decompression (the client's
// Accept-Encoding goes through as it is).
func newTransport(cfg Config) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
}

// bufferPool lends the proxy its copy buffers.
type bufferPool struct{}

var _ httputil.BufferPool = bufferPool{}

const bufferSize = 32 << 10

var buffers = sync.Pool{New: func() any { return new([bufferSize]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[bufferSize]byte)[:] }

// Put takes back a buffer Get lent; converting it back to the array
// pointer allocates nothing.
func (bufferPool) Put(b []byte) {
	if len(b) == bufferSize {
		buffers.Put((*[bufferSize]byte)(b))
	}
}

// Close releases the idle upstream connections.
func (p *Proxy) Close() { p.transport.CloseIdleConnections() }

// LastActivity returns when the edge last forwarded a request to the app
// (the zero time if never, since this process started). Idle detection
// (internal/idle) reads it.
func (p *Proxy) LastActivity(appID string) time.Time { return p.act.last(appID) }

// Activity returns when the edge last forwarded a request to each app it
// forwarded one to since this process started, for internal/idle to
// store.
func (p *Proxy) Activity() map[string]time.Time { return p.act.all() }

// verdict is the outcome of authorizing a request.
type verdict int

const (
	admit        verdict = iota
	needSignIn           // anonymous, and nothing admits it: 401
	needPasscode         // the grant to everyone asks for its passcode: 403
	denied               // signed in, can see the app, cannot open it: 403
	unknown              // no such app, or one the caller may not see: 404
)

// target is what a request was routed to.
type target struct {
	route Route
	found bool
	// The address asked for, found or not: the slug (subdomain and path
	// modes) or the host port (port mode).
	slug string
	port int
	// Path mode: the prefix (/apps/<slug>, as escaped in the URL) and the
	// path after it.
	prefix, path, rawPath string
}

// appPath is the path the app sees: after the prefix in path mode.
func (t target) appPath(r *http.Request) string {
	if t.prefix != "" {
		return t.path
	}
	return r.URL.Path
}

// outbound is what the rewrite of an authorized request needs; it travels
// in the request's context.
type outbound struct {
	target
	claims    Claims
	assertion string
	proto     string
}

type outboundKey struct{}

// serve authorizes a request routed to t and forwards it, or refuses it.
//
// Who learns what: the answer depends on whether an app exists only for
// callers who may see it. A caller who is not signed in gets 401 both for
// an app that does not exist and for one not shared with everyone; a
// signed-in caller gets 404 for both an app that does not exist and one it
// holds no grant on at all (the API's rule for objects one may not see),
// and 403 PERM_DENIED only when it can see the app (it holds a verb on
// it, an administrator say) but may not open it. An app shared with
// everyone behind a passcode answers 403 PERM_PASSCODE_REQUIRED to
// everyone: its existence is public (its passcode page names it).
//
// A bearer token that does not resolve counts as no credential (an app
// shared with everyone still opens), and where one is needed the answer is
// the token's refusal, as the API gives it: 401 AUTH_TOKEN_INVALID for an
// unknown, revoked or expired token, or one svc never issues (not tok_…),
// AUTH_TOKEN_ORPHANED when its owner is suspended or deleted; never the
// browser's handoff, which takes no token.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, t target) {
	ctx := r.Context()
	if p.cfg.Mode == ModePath {
		// Every answer on the console's origin, the app's and the
		// edge's own, gets an opaque origin (see sandboxPolicy).
		w.Header()["Content-Security-Policy"] = []string{sandboxPolicy}
	}
	// A node behind the cluster (just started, or restoring a snapshot)
	// would refuse a valid credential or a grant it has not seen yet.
	if err := p.d.Store.CaughtUp(); err != nil {
		writeError(w, r, asCoded(err))
		return
	}
	if t.found && t.appPath(r) == handoffPath {
		p.redeem(w, r, t)
		return
	}
	c := p.credentials(r, t)
	if c.ambiguous {
		p.refuseAmbiguous(w, r, t)
		return
	}
	a, credErr := c.auth, c.err
	if credErr != nil {
		// A bad credential counts as none: an app shared with everyone
		// still opens; anything else answers the credential's error.
		a = identity.Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}
	}
	rd := p.d.Store.Read()
	v, byPasscode := p.decide(rd, t, a.Principal, c.admitted)
	if v != admit {
		p.refuse(w, r, t, v, c)
		return
	}
	if a.Principal.Kind == authz.KindAnonymous && !byPasscode && p.mayIdentify(r, t) {
		// The grant to everyone lets the visitor in; a person signed in on
		// the console is told to the app as themselves once the handoff
		// has given their browser the app's cookie.
		p.startHandoff(w, r, t)
		return
	}
	if p.upstream == nil && t.route.Upstream == "" {
		writeError(w, r, errcode.New(errcode.AdapterUnavailable, "the app is not running").
			WithDetail("reason", "not_running").
			WithRemedy("someone who manages the app can start or deploy it"))
		return
	}
	ob := &outbound{target: t, claims: claimsOf(rd, a, t.route.AppID), proto: p.proto(r)}
	tok, err := p.d.Signer.Assertion(ctx, ob.claims)
	if err != nil || tok == "" {
		// Fail closed: no assertion, no request.
		id := writeError(w, r, signFailure(err))
		p.log.Error("edge: no assertion could be signed; the request was not forwarded", "app_id", t.route.AppID, "request_id", id, "err", err)
		return
	}
	ob.assertion = tok
	p.act.touch(t.route.AppID, p.d.Now())
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, outboundKey{}, ob)))
}

// signFailure is the answer when the signer fails: its own coded
// failure when it is a server-side one (STORE_UNAVAILABLE, say), else 500
// INTERNAL.
func signFailure(err error) *errcode.Error {
	if e, ok := errcode.As(err); ok && e.Status() >= 500 {
		return e
	}
	return errcode.Wrap(err, errcode.Internal, "the edge could not sign the caller's assertion, so the request was not forwarded").
		WithDetail("reason", "assertion_unavailable")
}

// decide authorizes principal on t. The caller may open the app through a
// data-plane grant to it (its account, a group of the account, the token
// itself) or through the grant to everyone; a grant to everyone with a
// passcode admits only a request that shows a valid admission (admitted).
// byPasscode says an admission is what admitted it.
func (p *Proxy) decide(rd *raftstore.Reader, t target, pr authz.Principal, admitted bool) (v verdict, byPasscode bool) {
	anonymous := pr.Kind == authz.KindAnonymous
	if !t.found {
		if anonymous {
			return needSignIn, false
		}
		return unknown, false
	}
	appID := t.route.AppID
	passcode := false
	for _, g := range identity.OpenGrants(rd, appID, pr) {
		switch {
		case !g.Everyone:
			return admit, false
		case !p.everyoneAdmits(g.Grant.Passcode):
		case g.Grant.Passcode:
			passcode = true
		default:
			return admit, false
		}
	}
	switch {
	case passcode && admitted:
		return admit, true
	case passcode:
		return needPasscode, false
	case anonymous:
		return needSignIn, false
	}
	// Signed in without a data-plane grant: 403, as API.md's edge section
	// says ("a caller without a data-plane grant gets 403 PERM_DENIED").
	return denied, false
}

// everyoneAdmits says whether host policy lets a grant to everyone (with
// a passcode or not) admit anyone.
func (p *Proxy) everyoneAdmits(withPasscode bool) bool {
	if p.d.Policy == nil {
		return true
	}
	switch p.d.Policy.Current().EffectivePublicSharing() {
	case policy.SharingNone:
		return false
	case policy.SharingPasscodeOnly:
		return withPasscode
	}
	return true
}

// refuse answers a request the edge does not forward: the error envelope
// for API clients, and for a browser asking for a page a redirect to the
// console's sign-in or passcode page, which sends it back afterwards.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, t target, v verdict, c creds) {
	route := t.route
	var e *errcode.Error
	switch v {
	case needSignIn:
		if !c.bearer && wantsPage(r) && websec.TopLevelNavigation(r) {
			p.startHandoff(w, r, t)
			return
		}
		e = errcode.New(errcode.AuthRequired, "sign in, or present a token, to open this app")
		if c.bearer && c.err == nil {
			// Not a token svc issues: to svc it is an unknown one.
			e = errcode.New(errcode.AuthTokenInvalid, "the bearer token is not one svc issued (svc's tokens begin with tok_)")
		}
		if ce, ok := errcode.As(c.err); ok {
			e = errcode.New(ce.Code, "%s", ce.Message)
		}
		e.WithRemedy("open the app in a browser signed in at %s, or send Authorization: Bearer <token>", p.consoleBase(r))
	case needPasscode:
		if wantsPage(r) && websec.TopLevelNavigation(r) {
			p.startHandoff(w, r, t)
			return
		}
		e = errcode.New(errcode.PermPasscodeRequired, "this app asks for its passcode").
			WithDetail("app_id", route.AppID).
			WithRemedy("POST the passcode to /api/v1/apps/%s/passcode, then send the cookie it sets", route.AppID)
	case denied:
		e = errcode.New(errcode.PermDenied, "this app is not shared with you").
			WithRemedy("someone who manages the app can share it with you")
	default:
		e = errcode.New(errcode.NotFound, "no app here")
	}
	writeError(w, r, e)
}

// wantsPage reports whether the request is a browser's navigation: a GET
// or HEAD asking for HTML.
func wantsPage(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, v := range r.Header["Accept"] {
		if containsFold(v, "text/html") {
			return true
		}
	}
	return false
}

// proto is the scheme the client used, as far as the edge can tell: https
// over TLS or behind an https external URL.
func (p *Proxy) proto(r *http.Request) string {
	if r.TLS != nil || (p.external != nil && p.external.Scheme == "https") {
		return "https"
	}
	return "http"
}

// claimsOf describes the caller to the app: a user (also for a delegated
// token, its owner) with its groups' names, a service token by its own ID
// and name, or the anonymous visitor.
func claimsOf(rd *raftstore.Reader, a identity.Authenticated, appID string) Claims {
	c := Claims{Audience: appID, Subject: AnonymousSubject}
	switch {
	case a.User != nil:
		c.Subject, c.Email, c.EmailVerified, c.Name = a.User.ID, a.User.Email, a.User.EmailVerified, a.User.DisplayName
		if c.Name == "" {
			c.Name = a.User.Username
		}
		if names := identity.GroupNames(rd, a.User.ID); len(names) > 0 {
			c.Groups = names
		}
	case a.Token != nil:
		c.Subject, c.Name = a.Token.ID, a.Token.Name
	}
	return c
}

// rewrite turns the inbound request into what the app receives.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	ob, ok := pr.In.Context().Value(outboundKey{}).(*outbound)
	if !ok {
		// Only serve calls the reverse proxy, always with this.
		panic("edge: a request reached the reverse proxy without authorization")
	}
	out := pr.Out
	if ob.prefix != "" {
		out.URL.Path, out.URL.RawPath = ob.path, ob.rawPath
	}
	if p.upstream != nil {
		pr.SetURL(p.upstream)
	} else {
		out.URL.Scheme, out.URL.Host = "http", ob.route.Upstream
	}
	out.Host = pr.In.Host
	h := out.Header
	stripReserved(h)
	stripCookies(h)
	stripBearer(h)
	p.forwardedFor(pr)
	c := &ob.claims
	// One backing array for the values the edge sets.
	vals := [...]string{ob.assertion, ob.route.AppID, headerValue(c.Subject), headerValue(c.Email), headerValue(c.Name), "", ob.proto, ob.prefix}
	h["X-Forwarded-Proto"] = vals[6:7:7]
	if ob.prefix != "" {
		h["X-Forwarded-Prefix"] = vals[7:8:8]
	}
	h[AssertionHeader] = vals[0:1:1]
	h[HeaderAppID] = vals[1:2:2]
	h[HeaderUserID] = vals[2:3:3]
	if c.Email != "" && c.EmailVerified { // unsigned: only what svc vouches for
		h[HeaderEmail] = vals[3:4:4]
	}
	if c.Name != "" {
		h[HeaderName] = vals[4:5:5]
	}
	if len(c.Groups) > 0 {
		vals[5] = headerValue(strings.Join(c.Groups, ","))
		h[HeaderGroups] = vals[5:6:6]
	}
}

// modifyResponse keeps an app from setting svc's cookies and, in path
// mode, from reaching beyond its prefix on the console's origin: its
// answers may not register a service worker for a wider scope
// (Service-Worker-Allowed) or wipe the origin's storage and cookies
// (Clear-Site-Data), the console's included. (Its answers carry the
// sandbox policy, set before the proxy copies them.)
func (p *Proxy) modifyResponse(res *http.Response) error {
	stripSetCookies(res.Header)
	if p.cfg.Mode == ModePath {
		delete(res.Header, "Service-Worker-Allowed")
		delete(res.Header, "Clear-Site-Data")
	}
	return nil
}

// forwardedFor sets X-Forwarded-For, -Host and -Proto on the outbound
// request: the client's address appended to the chain the request came
// with. This is the one place the chain is decided: a client's own
// X-Forwarded-For is kept only when the peer is a trusted proxy
// (server.trusted_proxies); SetXForwarded then appends the peer (to a
// copy).
func (p *Proxy) forwardedFor(pr *httputil.ProxyRequest) {
	if prior, ok := pr.In.Header["X-Forwarded-For"]; ok && p.clients.PeerTrusted(pr.In) {
		pr.Out.Header["X-Forwarded-For"] = prior
	}
	pr.SetXForwarded()
}

// upstreamFailed answers when the app could not be reached (502) or did
// not answer in time (504).
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	appID := ""
	if ob, ok := r.Context().Value(outboundKey{}).(*outbound); ok {
		appID = ob.route.AppID
	}
	e := errcode.New(errcode.AdapterUnavailable, "the app could not be reached").WithDetail("reason", "unreachable").
		WithRemedy("the app may be starting or failing; someone who manages it can read its logs")
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		e = errcode.New(errcode.AdapterUnavailable, "the app did not answer in time").WithDetail("reason", "timeout").
			WithStatus(http.StatusGatewayTimeout)
	}
	id := writeError(w, r, e)
	p.log.Warn("edge: upstream failed", "app_id", appID, "request_id", id, "status", e.Status(), "err", err)
}
