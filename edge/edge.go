package edge

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/identity"
)

// The edge's contracts with the rest of svc. The proxy (proxy.go) finds
// an app's route in a RouteTable, authenticates and authorizes the caller,
// and forwards the request with an assertion a Signer made; admissions by
// passcode are checked through Passcodes.

// AssertionHeader is the one header an app may trust: the signed assertion.
const AssertionHeader = "X-Svc-Assertion"

// AssertionTTL is how long an assertion is valid (the specification's 120
// seconds).
const AssertionTTL = 120 * time.Second

// Claims describe the caller to an app, as its assertion carries them.
type Claims struct {
	// Subject is the stable ID of the caller: the user's usr_… ID (for a
	// delegated token, its owner's), a service token's tok_… ID, or
	// "anonymous" for a visitor admitted by the grant to everyone.
	Subject string
	Email   string
	// EmailVerified says svc vouches for Email (identity.User's
	// EmailVerified); apps must not rely on an unverified one, and the
	// unsigned X-Svc-Email carries only a verified one.
	EmailVerified bool
	Name          string
	// Groups are the names of the user's groups.
	Groups []string
	// Audience is the app's ID: an assertion for one app is refused by
	// another.
	Audience string
}

// Signer makes assertions. Implementations reuse a signed assertion for
// the same claims while most of its life is left, so that the hot path
// does not sign per request, and fail (never return an empty token) when
// no key can sign: the proxy then refuses the request.
type Signer interface {
	Assertion(ctx context.Context, c Claims) (string, error)
}

// Route is where an app's traffic goes.
type Route struct {
	AppID string
	Slug  string
	// Port is the host port the edge listens on for the app in port mode
	// (0: none allocated).
	Port int
	// Upstream is host:port of the app's primary workload; empty when no
	// healthy instance serves (the edge answers 502).
	Upstream string
}

// RouteTable answers where traffic for an app goes. The in-process table
// (Table) is fed by the runtime on this server; in a cluster a Consul
// watcher feeds the same interface.
type RouteTable interface {
	BySlug(slug string) (Route, bool)
	ByPort(port int) (Route, bool)
	All() []Route
}

// Passcodes checks admissions to apps shared with everyone behind a
// passcode: the browser shows an admission cookie (named by
// PasscodeCookie) that the passcode endpoint set on the console's origin,
// and the handoff carries to the app's origin; an API client may send it
// to the app as it is.
type Passcodes interface {
	// Admitted says whether the cookie value admits its bearer to the app
	// now: made for this app, not expired, and for its current passcode.
	Admitted(appID, cookie string) bool
	// Admission is Admitted that names the admission, for a handoff.
	Admission(appID, cookie string) (identity.AdmissionRef, bool)
}

// PasscodeCookie is the name of the admission cookie for an app. Like
// every svc_* cookie it never reaches the app.
func PasscodeCookie(appID string) string { return "svc_passcode_" + appID }
