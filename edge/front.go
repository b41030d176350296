package edge

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// How requests reach the edge: on an app's own port (PortHandler, port
// mode), or on the main listener ahead of the API (Front, subdomain and
// path modes).

// appsPrefix begins every app's path in path mode.
const appsPrefix = "/apps/"

// Front puts the edge ahead of the API on the main listener. In subdomain
// mode a request for <slug>.<base domain> (any case, any port) goes to the
// edge; in path mode a request whose path begins with /apps/ does;
// everything else (the JWKS included) goes to api. In port mode it is api
// itself.
func (p *Proxy) Front(api http.Handler) http.Handler {
	if p.cfg.Mode == ModePort {
		return api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.cfg.Mode {
		case ModeSubdomain:
			if slug, ok := p.subdomainSlug(r.Host); ok {
				route, found := p.d.Routes.BySlug(slug)
				p.serve(w, r, target{route: route, found: found})
				return
			}
		case ModePath:
			if strings.HasPrefix(r.URL.Path, appsPrefix) {
				p.servePath(w, r)
				return
			}
		}
		api.ServeHTTP(w, r)
	})
}

// PortHandler serves the app that holds the host port (port mode).
func (p *Proxy) PortHandler(port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, found := p.d.Routes.ByPort(port)
		p.serve(w, r, target{route: route, found: found})
	})
}

// subdomainSlug returns the label(s) of host before the base domain when
// host is under it (not the base domain itself, which is the console's).
// A slug with a dot in it matches no app.
func (p *Proxy) subdomainSlug(hostport string) (string, bool) {
	host, _ := splitHost(hostport)
	host = strings.TrimSuffix(host, ".")
	n := len(host) - len(p.base) - 1
	if n < 1 || host[n] != '.' || !strings.EqualFold(host[n+1:], p.base) {
		return "", false
	}
	return host[:n], true
}

// servePath serves /apps/<slug>/…: the slug names the app, and the app
// receives the rest of the path (at least "/") with the prefix in
// X-Forwarded-Prefix. /apps/<slug> without its slash is redirected to add
// it, for every slug alike.
func (p *Proxy) servePath(w http.ResponseWriter, r *http.Request) {
	escaped := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(escaped, appsPrefix)
	if !ok {
		// The decoded path begins with /apps/ and the escaped one does
		// not (/%61pps/…): no app's address is written that way.
		p.serve(w, r, target{})
		return
	}
	escSlug, tail, slash := strings.Cut(rest, "/")
	slug, err := url.PathUnescape(escSlug)
	if err != nil || slug == "" {
		p.serve(w, r, target{})
		return
	}
	if !slash {
		to := appsPrefix + escSlug + "/"
		if r.URL.RawQuery != "" {
			to += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", to)
		w.WriteHeader(http.StatusPermanentRedirect)
		return
	}
	t := target{prefix: appsPrefix + escSlug, rawPath: "/" + tail}
	if t.path, err = url.PathUnescape(t.rawPath); err != nil {
		p.serve(w, r, target{})
		return
	}
	t.route, t.found = p.d.Routes.BySlug(slug)
	p.serve(w, r, t)
}

// AppURL is where the edge serves the app with this slug (and, in port
// mode, this host port; 0 for none) in the current mode, for a client that
// asked the API at r; "" when it serves it nowhere (port mode, no port).
// Port mode: http://<host>:<port>/, the host being the external URL's or
// else the one r asked for; subdomain mode:
// <scheme>://<slug>.<base domain>[:<port>]/, scheme and port the external
// URL's or else r's; path mode: <external URL or r's origin>/apps/<slug>/.
func (p *Proxy) AppURL(r *http.Request, slug string, port int) string {
	host, hostPort := splitHost(r.Host)
	scheme := p.proto(r)
	if p.external != nil {
		host, hostPort, scheme = p.external.Hostname(), p.external.Port(), p.external.Scheme
	}
	switch p.cfg.Mode {
	case ModeSubdomain:
		return scheme + "://" + joinHost(strings.ToLower(slug)+"."+p.base, hostPort) + "/"
	case ModePath:
		origin := scheme + "://" + joinHost(host, hostPort)
		if p.external != nil {
			origin = strings.TrimRight(p.external.String(), "/")
		}
		return origin + appsPrefix + url.PathEscape(slug) + "/"
	}
	if port <= 0 {
		return ""
	}
	return "http://" + joinHost(host, strconv.Itoa(port)) + "/"
}

// splitHost splits a Host header into host and port ("" when none),
// without the brackets of an IPv6 literal.
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// joinHost is the inverse of splitHost.
func joinHost(host, port string) string {
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}
