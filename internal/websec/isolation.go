package websec

import (
	"net/http"
	"net/url"
	"strings"
)

// Fetch-metadata resource isolation for cookie credentials.
//
// A browser attaches cookies to requests that other sites' pages make
// (subresources, form posts, fetches; SameSite=Lax stops only cross-site
// ones, and an app on the same host at another port, or on a sibling
// subdomain, is the same site). A cookie therefore proves who the browser
// is, not that the person asked for this request. CookieAllowed decides
// whether it may count, after the resource isolation policy of
// web.dev/articles/fetch-metadata and in the spirit of Go's
// http.CrossOriginProtection (which checks unsafe methods only and lets
// every navigation through; this also covers reads and lets only
// top-level navigations with a safe method through):
//
//   - Sec-Fetch-Site: same-origin or none (the person typed the address,
//     or used a bookmark): allowed;
//   - any other Sec-Fetch-Site (same-site, cross-site): allowed only for a
//     top-level navigation with a safe method (Sec-Fetch-Mode: navigate,
//     Sec-Fetch-Dest: document, GET or HEAD): following a link is fine,
//     a form post, a fetch, an image or a frame from another origin is not;
//   - no Sec-Fetch-Site (a client that is not a browser, or an old one):
//     allowed when there is no Origin, or the Origin is the request's own
//     (the host it asked for) or one of the trusted origins; Origin: null
//     (a sandboxed document's) never matches.

// Decision is the outcome of CookieAllowed, with its reason for logs and
// tests.
type Decision struct {
	Allowed bool
	Reason  string
}

// CookieAllowed decides whether a cookie credential may authenticate r
// (see above). trusted lists origins ("https://console.example.com")
// that count as the request's own when a client sends Origin without
// fetch metadata (the external URL, when a proxy rewrites Host).
func CookieAllowed(r *http.Request, trusted ...string) Decision {
	d := SameOrigin(r, trusted...)
	if site := r.Header.Get("Sec-Fetch-Site"); !d.Allowed && site != "" && TopLevelNavigation(r) {
		return Decision{true, "top-level navigation from " + site}
	}
	return d
}

// SameOrigin is CookieAllowed without the exception for navigations: the
// request comes from the origin it is for (or from no browser). An effect
// that a link from elsewhere must not trigger (reading a secret, which is
// audited) asks for it.
func SameOrigin(r *http.Request, trusted ...string) Decision {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return Decision{true, "sec-fetch-site " + site}
	case "":
	default:
		return Decision{false, "a " + site + " request that is not a top-level navigation with a safe method"}
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return Decision{true, "no fetch metadata and no origin (not a browser)"}
	}
	if sameOrigin(origin, r.Host, trusted) {
		return Decision{true, "origin is the request's own"}
	}
	return Decision{false, "origin " + quoteShort(origin) + " is not the request's own"}
}

// TopLevelNavigation reports whether r is a browser's top-level navigation
// with a safe method (GET or HEAD, Sec-Fetch-Mode: navigate,
// Sec-Fetch-Dest: document), or a safe request from a client that sends
// no fetch metadata at all (not a browser).
func TopLevelNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	mode, dest := r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Sec-Fetch-Dest")
	if mode == "" && dest == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return true
	}
	return mode == "navigate" && dest == "document"
}

// sameOrigin reports whether origin names host (the request's Host) or one
// of the trusted origins.
func sameOrigin(origin, host string, trusted []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null", and anything that is no origin
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, t := range trusted {
		if strings.EqualFold(strings.TrimRight(t, "/"), u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// quoteShort quotes a client-supplied value for a reason, cut to a length
// a log line can bear.
func quoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < ' ' || r == '"' || r == 0x7f {
			return '?'
		}
		return r
	}, s) + `"`
}
