// Package edge owns the identity-aware reverse proxy in front of every app:
// route lookup (port, subdomain or path mode), the handoff that gives
// browsers an app cookie on each app's own origin, stripping inbound X-Svc-*
// headers, client-claim headers and svc_* cookies, authenticating and
// authorizing every request, and forwarding it with the Ed25519 assertion
// the app trusts. It fails closed: no assertion, no request. See
// docs/security.md for what apps' pages can and cannot do.
//
// Routes come from a RouteTable: Table, the in-process table (the builtin
// routes adapter), is replaced whole by cmd/svc from what the scheduler
// runs; in a cluster edge/consul feeds the same interface. In port mode
// Listeners opens one listener per host port in the table; Proxy.Front
// puts the edge ahead of the API on the main listener (subdomain and path
// modes; in port mode it only keeps the console off a separate apps
// domain). In path mode /apps/<slug>/ is the app's and /apps/<app ID>/…
// the console's (ConsoleAppPage: an ID has an underscore, a slug never
// does).
//
// Every request is authorized: the caller (svc's bearer token, else the
// app's own cookie) needs a data-plane grant on the app (to its account, a
// group of it, the token itself, or the grant to everyone); the grant to
// everyone behind a passcode admits a request that shows a valid admission
// (an app cookie given for one, or the admission cookie itself, which API
// clients may send), signed in or not (then the subject is "anonymous").
//
// The console's session cookie is never a credential here: browsers open
// apps with an app cookie of the app's own origin (svc_app_<app ID>;
// __Host- or, in path mode, __Secure- over TLS) that a handoff gives
// (handoff.go): a browser asking for a page without one is sent (303) to
// the console's GET /api/v1/edge/handoff with next= the page and a state
// it keeps in a cookie on the app's origin; there a signed-in person (or an
// admission by passcode) gets a single-use code bound to the app, the
// session or admission and the state (identity's app sessions), and is sent
// to <app origin>/.svc/handoff, a path the edge keeps, which redeems it,
// sets the app cookie and sends the browser on; anyone else is sent to the
// console's /login or /passcode/<app ID> page first. A handoff's next must
// be an address of one of this installation's apps as the edge builds it
// (no open redirect). Cookie credentials count only where fetch-metadata
// isolation lets them (internal/websec: same-origin requests and
// top-level navigations with a safe method): another app's form post,
// fetch, image or frame is not signed in. Two cookies of one app are
// refused (401 AUTH_INVALID, ambiguous) and cleared.
//
// Refusals use the API's error envelope. Not signed in, the answer is 401
// for an app that does not exist and for one not shared with everyone
// alike; signed in (by a token, or an app cookie), 404 for an address where
// no app is and 403 PERM_DENIED for an app without a data-plane grant to
// the caller (API.md's edge section; an app's address is no secret once it
// is routed); 403 PERM_PASSCODE_REQUIRED for a passcode-protected app. An
// app not running answers 502, an app that does not answer 502 (refused)
// or 504 (no response headers within the configured time), all
// ADAPTER_UNAVAILABLE with details.reason; a signer failure answers 500
// INTERNAL (or the signer's own 5xx code) and nothing is forwarded. A node
// whose store has not caught up with the cluster (just started, or
// restoring a snapshot) answers every request 503 STORE_UNAVAILABLE with
// Retry-After before it reads anything, rather than refuse a credential or
// a grant it has not seen yet.
//
// Addresses (origins.go) come from configuration (the external URL, the
// base and apps domains, the console's port) or from the address the
// connection was accepted on, never from the Host header: the console's,
// the handoff's, and every app's url. With a separate apps domain
// (Config.AppsDomain) apps are served under it only and the console never
// is. In path mode every answer carries a Content-Security-Policy sandbox
// without allow-same-origin (apps' documents get an opaque origin on the
// console's origin; an app's own policy is kept beside it), and apps'
// Service-Worker-Allowed and Clear-Site-Data are dropped.
//
// What an app receives: exactly one X-Svc-Assertion from the Signer
// (email_verified says whether svc vouches for email); the unsigned
// X-Svc-User-Id, -Email (only a verified address), -Name, -Groups
// (comma-separated group names) and -App-Id; X-Forwarded-For (the
// connection's peer appended to the client's own header when that peer is
// a trusted proxy, else the peer alone: internal/clientip; forwardedFor is
// where the chain is decided), X-Forwarded-Host, X-Forwarded-Proto (https
// behind TLS or an https external URL) and, in path mode,
// X-Forwarded-Prefix with the prefix removed from the path; the Host
// header the client sent. Every inbound header that any server could read
// as X-Svc-* (any case, '_' for '-') is dropped, as are non-canonical
// spellings of the forwarding headers, the headers in which proxies state
// a client's address or what it asked for (X-Real-IP, True-Client-IP,
// CF-Connecting-IP, X-Original-URL, …, any spelling), every svc_* cookie
// (any case, also behind __Host- or __Secure-) and an Authorization header
// carrying an svc token; an app's Set-Cookie of such a cookie is dropped
// from its answer. With SVC_SERVER_PROXY_UPSTREAM set, authorized requests
// go there instead of the workload, whether or not this node knows one.
//
// Upstream connections are pooled in one tuned transport; responses stream
// unbuffered (server-sent events) and upgrades (websockets) pass through.
// Activity per app (LastActivity, Activity) is kept in memory for idle
// detection; internal/idle stores it coarsely.
//
// Assertions are signed by JWTSigner with the current Ed25519 key of
// SigningKeys (the edge_keys table, private halves sealed by the keyring),
// each reused while more than half its life is left; the leader makes the
// first key, rotates every 30 days and retires a key once no assertion it
// signed can be valid, and the JWKS publishes every key not retired.
//
// It must not import the scheduler or any runtime adapter (cmd/svc feeds
// the table), nor the server (it writes the envelope itself).
package edge
