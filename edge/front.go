package edge

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// How requests reach the edge: on an app's own port (PortHandler, port
// mode), or on the main listener ahead of the API (Front, subdomain and
// path modes).

// appsPrefix begins every app's path in path mode.
const appsPrefix = "/apps/"

// ConsoleAppPage reports whether a path under /apps/ is one of the
// console's app pages, /apps/<app ID>/…, rather than an app's address in
// path mode, /apps/<slug>/…: an app ID always has an underscore (app_…)
// and a slug never has one, so the two never meet.
func ConsoleAppPage(path string) bool {
	rest, ok := strings.CutPrefix(path, appsPrefix)
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	return strings.Contains(first, "_")
}

// Front puts the edge ahead of the API on the main listener. In subdomain
// mode a request for <slug>.<apps domain> (any case, any port) goes to the
// edge; in path mode a request whose path begins with /apps/ does, but
// the console's app pages (/apps/<app ID>/…, ConsoleAppPage); everything else (the JWKS included) goes to api, except, with a separate
// apps domain, a request for the apps domain itself: the console is never
// served there (its scripts would share the apps' site).
func (p *Proxy) Front(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.cfg.Mode {
		case ModeSubdomain:
			if slug, ok := p.subdomainSlug(r.Host); ok {
				route, found := p.d.Routes.BySlug(slug)
				p.serve(w, r, target{route: route, found: found, slug: slug})
				return
			}
		case ModePath:
			if strings.HasPrefix(r.URL.Path, appsPrefix) && !ConsoleAppPage(r.URL.Path) {
				p.servePath(w, r)
				return
			}
		}
		if p.separateApps() && p.isAppsHost(r.Host) {
			writeError(w, r, errcode.New(errcode.NotFound, "the console is not served on the apps domain").
				WithRemedy("open the console at %s", p.consoleBase(r)))
			return
		}
		api.ServeHTTP(w, r)
	})
}

// PortHandler serves the app that holds the host port (port mode). With a
// separate apps domain, the app is served only there: a request for
// another host (the console's, which the app's scripts must not share) is
// sent to the app's address on the apps domain, or refused.
func (p *Proxy) PortHandler(port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, found := p.d.Routes.ByPort(port)
		t := target{route: route, found: found, port: port}
		if p.separateApps() && !p.isAppsHost(r.Host) {
			to := p.pageURL(r, t)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				redirectTo(w, to, http.StatusPermanentRedirect)
				return
			}
			writeError(w, r, errcode.New(errcode.NotFound, "apps are served on the apps domain only").WithRemedy("send the request to %s", to))
			return
		}
		p.serve(w, r, t)
	})
}

// subdomainSlug returns the label(s) of host before the apps domain when
// host is under it (not the apps domain itself). A slug with a dot in it
// matches no app.
func (p *Proxy) subdomainSlug(hostport string) (string, bool) {
	host, _ := splitHost(hostport)
	host = strings.TrimSuffix(host, ".")
	n := len(host) - len(p.apps) - 1
	if n < 1 || host[n] != '.' || !strings.EqualFold(host[n+1:], p.apps) {
		return "", false
	}
	return host[:n], true
}

// separateApps reports whether apps have a domain of their own, apart
// from the console's host.
func (p *Proxy) separateApps() bool {
	return p.cfg.AppsDomain != "" && p.apps != p.consoleHost()
}

// isAppsHost reports whether hostport is the apps domain itself.
func (p *Proxy) isAppsHost(hostport string) bool {
	host, _ := splitHost(hostport)
	return strings.EqualFold(strings.TrimSuffix(host, "."), p.apps)
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
	t := target{slug: slug, prefix: appsPrefix + escSlug, rawPath: "/" + tail}
	if t.path, err = url.PathUnescape(t.rawPath); err != nil {
		p.serve(w, r, target{})
		return
	}
	t.route, t.found = p.d.Routes.BySlug(slug)
	p.serve(w, r, t)
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
