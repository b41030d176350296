// Package websec owns the rules svc applies to browsers on both of its
// faces, the console's API and the edge in front of apps: the names its
// credential cookies take (the __Host- prefix over TLS), reading exactly
// one of them from a request (two are ambiguous, never a choice), the
// Set-Cookie lines that clear every copy a request could have carried, and
// the fetch-metadata isolation that decides whether a cookie credential
// counts for a request at all.
//
// Everything here is pure: it reads requests and returns values, and must
// not touch storage, identity or the network.
package websec

import (
	"iter"
	"net/http"
	"strings"
)

// Cookie name prefixes browsers enforce: a __Host- cookie is set only by a
// secure origin, with Secure, Path=/ and no Domain (so a sibling host
// cannot toss one); a __Secure- cookie only by a secure origin, with
// Secure.
const (
	HostPrefix   = "__Host-"
	SecurePrefix = "__Secure-"
)

// The console's session cookie: svc_session over plain HTTP,
// __Host-svc_session over TLS.
const (
	SessionCookie     = "svc_session"
	HostSessionCookie = HostPrefix + SessionCookie
)

// SessionCookieName is the name the session cookie takes: with the __Host-
// prefix when the console is served over TLS.
func SessionCookieName(tls bool) string {
	if tls {
		return HostSessionCookie
	}
	return SessionCookie
}

// Pairs yields the name and value of every cookie in the request's Cookie
// header lines, in order, the way browsers send them: split at ';' whatever
// quotes say, names and values trimmed, a value's surrounding quotes
// removed. A pair without '=' is skipped. It does not allocate.
func Pairs(h http.Header) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, line := range h["Cookie"] {
			for len(line) > 0 {
				var pair string
				pair, line, _ = strings.Cut(line, ";")
				name, value, ok := strings.Cut(pair, "=")
				if !ok {
					continue
				}
				name, value = strings.Trim(name, " \t"), strings.Trim(value, " \t")
				if len(value) > 1 && value[0] == '"' && value[len(value)-1] == '"' {
					value = value[1 : len(value)-1]
				}
				if !yield(name, value) {
					return
				}
			}
		}
	}
}

// Found is what a request carries of one credential cookie.
type Found struct {
	// Value is the cookie's value when the request carries exactly one
	// cookie of the credential, under the name wanted; "" otherwise.
	Value string
	// Count is how many cookies of the credential the request carries,
	// under any of its spellings.
	Count int
}

// Ambiguous reports whether the request carries more than one copy of the
// credential (the same name at two paths or domains, or two spellings): a
// cookie tossed beside the rightful one. Such a request is refused; which
// copy is the rightful one cannot be told.
func (f Found) Ambiguous() bool { return f.Count > 1 }

// Lookup reads a credential cookie from h: want is the spelling that
// counts (the __Host- one over TLS, say), others are its other spellings,
// which count toward ambiguity but are never taken as the credential.
func Lookup(h http.Header, want string, others ...string) Found {
	var f Found
	for name, value := range Pairs(h) {
		if name == want {
			f.Count++
			f.Value = value
			continue
		}
		for _, o := range others {
			if name == o {
				f.Count++
			}
		}
	}
	if f.Count != 1 {
		f.Value = ""
	}
	return f
}

// maxClearing bounds the Set-Cookie lines Clearing returns for one name.
const maxClearing = 48

// Clearing returns Set-Cookie lines (expired, empty) that delete every
// cookie named name a browser could have sent with a request for
// host and path: host-only or for any parent domain of host, at every
// path that path-matches (RFC 6265 §5.1.4), each with and without a
// trailing slash. A __Host- name can only have been set host-only at
// Path=/; __Host- and __Secure- deletions carry Secure, as browsers insist.
// Browsers ignore the lines they would not have accepted (a Domain the host
// is not under, say), so the list may be longer than needed; it is capped.
func Clearing(name, host, path string) []*http.Cookie {
	secure := strings.HasPrefix(name, HostPrefix) || strings.HasPrefix(name, SecurePrefix)
	del := func(domain, p string) *http.Cookie {
		return &http.Cookie{Name: name, Value: "", Path: p, Domain: domain, MaxAge: -1, Secure: secure, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	}
	if strings.HasPrefix(name, HostPrefix) {
		return []*http.Cookie{del("", "/")}
	}
	paths := cookiePaths(path)
	domains := append([]string{""}, parentDomains(host)...)
	out := make([]*http.Cookie, 0, min(maxClearing, len(paths)*len(domains)))
	for _, d := range domains {
		for _, p := range paths {
			if len(out) == maxClearing {
				return out
			}
			out = append(out, del(d, p))
		}
	}
	return out
}

// cookiePaths returns every cookie path that path-matches path, shortest
// first: "/", then each prefix ending before a '/', with and without it.
func cookiePaths(path string) []string {
	if path == "" || path[0] != '/' {
		path = "/"
	}
	out := []string{"/"}
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			out = append(out, path[:i], path[:i+1])
		}
	}
	if len(path) > 1 && path[len(path)-1] != '/' {
		out = append(out, path)
	}
	return out
}

// parentDomains returns host (without its port) and each domain above it
// that has a dot, longest first: a.b.example.com gives a.b.example.com,
// b.example.com and example.com. An IP address has none.
func parentDomains(hostport string) []string {
	host := hostport
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	// Only a plain DNS name has parent domains (anything else in a Host
	// header is forged, and would make net/http log each line it drops).
	if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" || isIPv4(host) {
		return nil
	}
	var out []string
	for strings.Contains(host, ".") {
		out = append(out, host)
		_, host, _ = strings.Cut(host, ".")
	}
	return out
}

func isIPv4(h string) bool {
	return strings.Count(h, ".") == 3 && strings.Trim(h, "0123456789.") == ""
}
