package edge

import (
	"net/http"
	"strings"
)

// What the edge takes out of a request before an app sees it. Everything
// here is pure and runs on the outbound copy of the request, never on the
// inbound one.

// svcHeaderPrefix is the prefix of the edge's own headers, lower-cased.
const svcHeaderPrefix = "x-svc-"

// forwardingHeaders are the forwarding headers the edge alone sets, in the
// lower-cased, '-' spelling.
var forwardingHeaders = []string{"forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-prefix"}

// clientClaimHeaders are headers in which a proxy or CDN states the
// client's address, or the address or scheme the client asked for, in the
// lower-cased, '-' spelling. The edge is the proxy in front of every app,
// and it states these in X-Forwarded-* only: a client that sends one of
// these would be believed by an app (or its framework) that reads it, so
// none reaches an app, in any spelling.
var clientClaimHeaders = []string{
	"x-real-ip", "true-client-ip", "cf-connecting-ip", "cf-connecting-ipv6", "x-client-ip", "client-ip",
	"x-cluster-client-ip", "fastly-client-ip", "x-original-forwarded-for", "forwarded-for", "x-forwarded",
	"x-forwarded-server", "x-forwarded-port", "x-forwarded-ssl", "x-forwarded-scheme", "x-forwarded-uri",
	"x-original-host", "x-original-url", "x-original-uri", "x-rewrite-url", "x-host", "x-url-scheme",
	"front-end-https", "x-proxyuser-ip", "x-envoy-external-address", "x-appengine-user-ip", "x-azure-clientip",
	"x-azure-socketip",
}

// headerFold reports whether name, lower-cased with '_' read as '-',
// begins with (or, with exact, equals) want, which is lower-case. Servers
// and frameworks that map underscores to dashes (CGI's HTTP_X_SVC_EMAIL,
// WSGI, Rack, PHP) read such a name as the header want names. It does
// not allocate.
func headerFold(name, want string, exact bool) bool {
	if len(name) < len(want) || (exact && len(name) != len(want)) {
		return false
	}
	for i := 0; i < len(want); i++ {
		c := name[i]
		switch {
		case c == '_':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

// reservedHeader reports whether an inbound header with this name must not
// reach an app: any spelling of X-Svc-* (the edge's headers), any spelling
// of the client-claim headers, and any spelling of the forwarding headers
// but the canonical ones, which the proxy replaces itself.
func reservedHeader(name string) bool {
	if headerFold(name, svcHeaderPrefix, false) {
		return true
	}
	for _, f := range forwardingHeaders {
		if headerFold(name, f, true) && name != http.CanonicalHeaderKey(f) {
			return true
		}
	}
	for _, f := range clientClaimHeaders {
		if headerFold(name, f, true) {
			return true
		}
	}
	return false
}

// stripReserved deletes every reserved header (see reservedHeader) and
// X-Forwarded-Prefix, which only the edge sets (in path mode).
func stripReserved(h http.Header) {
	for name := range h {
		if reservedHeader(name) {
			delete(h, name)
		}
	}
	delete(h, "X-Forwarded-Prefix")
}

// svcCookie reports whether a cookie name is one of svc's (svc_…, also
// behind the __Host- or __Secure- prefix, in any case): such cookies never
// reach an app.
func svcCookie(name string) bool {
	for _, prefix := range [...]string{"__host-", "__secure-"} {
		if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
			name = name[len(prefix):]
			break
		}
	}
	return len(name) >= 4 && strings.EqualFold(name[:4], "svc_")
}

// stripCookies removes every svc_* cookie from the Cookie header lines,
// keeping the others as they came. A pair is split at ';' whatever quotes
// say, so that a quoted value cannot hide a cookie behind it; a line left
// empty goes, and the header with it.
func stripCookies(h http.Header) {
	lines, ok := h["Cookie"]
	if !ok {
		return
	}
	kept := lines[:0]
	for _, line := range lines {
		if line = stripCookieLine(line); line != "" {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		delete(h, "Cookie")
		return
	}
	h["Cookie"] = kept
}

// stripCookieLine returns a Cookie header line without its svc_* pairs.
// A line without any is returned as it is, without allocating.
func stripCookieLine(line string) string {
	if !containsFold(line, "svc_") {
		return line
	}
	var b strings.Builder
	for pair := range strings.SplitSeq(line, ";") {
		name, _, _ := strings.Cut(pair, "=")
		name = strings.Trim(name, " \t")
		if svcCookie(name) || strings.TrimSpace(pair) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Trim(pair, " \t"))
	}
	return b.String()
}

// containsFold reports whether s contains sub (lower-case ASCII) in any
// case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// stripSetCookies removes Set-Cookie lines of svc_* cookies from an app's
// answer: an app cannot plant a session, or an admission, for the console
// or another app (cookies ignore ports, and in subdomain mode are shared
// across the base domain).
func stripSetCookies(h http.Header) {
	dropLines(h, "Set-Cookie", func(line string) bool {
		name, _, _ := strings.Cut(line, "=")
		return svcCookie(strings.Trim(name, " \t"))
	})
}

// dropLines removes the lines of a header that drop says to, and the
// header itself when none is left.
func dropLines(h http.Header, key string, drop func(string) bool) {
	lines, ok := h[key]
	if !ok {
		return
	}
	kept := lines[:0]
	for _, line := range lines {
		if !drop(line) {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		delete(h, key)
		return
	}
	h[key] = kept
}

// svcBearer returns the token of an Authorization header value that
// carries svc's credential ("Bearer tok_…", the scheme in any case), and
// whether it does. Other values (an app's own scheme, Basic, a bearer
// token of the app's) are not svc's and pass through to the app.
func svcBearer(v string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	if token = strings.TrimSpace(token); !strings.HasPrefix(token, "tok_") {
		return "", false
	}
	return token, true
}

// bearerOf returns svc's bearer token among the request's Authorization
// lines, if any line carries one.
func bearerOf(h http.Header) string {
	for _, v := range h["Authorization"] {
		if tok, ok := svcBearer(v); ok {
			return tok
		}
	}
	return ""
}

// anyBearer reports whether an Authorization line carries a bearer token,
// svc's or any other.
func anyBearer(h http.Header) bool {
	for _, v := range h["Authorization"] {
		scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
			return true
		}
	}
	return false
}

// stripBearer removes the Authorization lines that carry svc's credential:
// a token that opens svc's API never reaches an app.
func stripBearer(h http.Header) {
	dropLines(h, "Authorization", func(v string) bool {
		_, svc := svcBearer(v)
		return svc
	})
}

// headerValue makes s safe as a header value: control characters (which
// the transport would refuse, failing the request) become spaces.
func headerValue(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
