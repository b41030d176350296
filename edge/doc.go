// Package edge owns the identity-aware reverse proxy in front of every app:
// route lookup (port, subdomain or path mode), stripping inbound X-Svc-*
// headers and svc_* cookies, authenticating and authorizing every request,
// and forwarding it with the Ed25519 assertion the app trusts. It fails
// closed: no assertion, no request.
//
// Routes come from a RouteTable: Table, the in-process table (the builtin
// routes adapter), is replaced whole by cmd/svc from what the scheduler
// runs; in a cluster edge/consul feeds the same interface. In port mode
// Listeners opens one listener per host port in the table; in subdomain
// and path modes Proxy.Front puts the edge ahead of the API on the main
// listener.
//
// Every request is authorized: the caller (a bearer token, else the
// session cookie) needs a data-plane grant on the app (to its account, a
// group of it, the token itself, or the grant to everyone); the grant to
// everyone behind a passcode admits a request with a valid admission
// cookie (Passcodes), signed in or not (then the subject is "anonymous").
// Refusals use the API's error envelope; a browser asking for a page is
// sent to the console's /login or /passcode/<app ID> page instead, with
// next= the address it asked for. Not signed in, the answer is 401 for an
// app that does not exist and for one not shared with everyone alike;
// signed in, 404 for an address where no app is and 403 PERM_DENIED for an
// app without a data-plane grant to the caller (API.md's edge section; an
// app's address is no secret once it is routed); 403
// PERM_PASSCODE_REQUIRED for a passcode-protected app. An app not running answers 502, an app that does
// not answer 502 (refused) or 504 (no response headers within the
// configured time), all ADAPTER_UNAVAILABLE with details.reason; a signer
// failure answers 500 INTERNAL (or the signer's own 5xx code) and nothing
// is forwarded.
//
// What an app receives: exactly one X-Svc-Assertion from the Signer
// (email_verified says whether svc vouches for email); the unsigned
// X-Svc-User-Id, -Email (only a verified address), -Name, -Groups
// (comma-separated group names) and -App-Id; X-Forwarded-For (the connection's peer appended to
// the client's own header when that peer is a trusted proxy, else the
// peer alone: internal/clientip),
// X-Forwarded-Host, X-Forwarded-Proto (https behind TLS or an https
// external URL) and, in path mode, X-Forwarded-Prefix with the prefix
// removed from the path; the Host header the client sent. Every inbound
// header that any server could read as X-Svc-* (any case, '_' for '-') is
// dropped, as are non-canonical spellings of the forwarding headers, every
// svc_* cookie (any case) and an Authorization header carrying an svc
// token; an app's Set-Cookie of an svc_* cookie is dropped from its answer.
// With SVC_SERVER_PROXY_UPSTREAM set, authorized requests go there instead
// of the workload, whether or not this node knows one.
//
// Upstream connections are pooled in one tuned transport; responses stream
// unbuffered (server-sent events) and upgrades (websockets) pass through.
// Activity per app (LastActivity) is kept in memory for idle detection;
// persisting it comes later.
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
