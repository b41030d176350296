package edge

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// Where things are. Every address the edge sends a browser to (the
// console's handoff and sign-in, an app's own origin) and every address
// it accepts as a handoff's destination is built from configuration (the
// external URL, the base and apps domains, the console's port) or from
// the address the connection came to, never from the request's Host
// header: a Host header is the client's to choose, and an answer built
// from it could send a browser (or a cache serving many) anywhere.

// listenerAddr is the address the request's connection was accepted on,
// as a host and a port: a loopback or unspecified address is "localhost",
// as svc's startup log names it.
func listenerAddr(r *http.Request) (host, port string) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "localhost", ""
	}
	h, pt, err := net.SplitHostPort(a.String())
	if err != nil {
		return "localhost", ""
	}
	if ip := net.ParseIP(h); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		h = "localhost"
	}
	return h, pt
}

// consoleHost is the console's host as configured: the external URL's, or
// the base domain in subdomain mode; "" when only the listener knows.
func (p *Proxy) consoleHost() string {
	switch {
	case p.external != nil:
		return strings.ToLower(strings.TrimSuffix(p.external.Hostname(), "."))
	case p.cfg.Mode == ModeSubdomain:
		return p.base
	}
	return ""
}

// consolePort is the main listener's port, or the port r came to.
func (p *Proxy) consolePort(r *http.Request) string {
	if p.cfg.ConsolePort > 0 {
		return strconv.Itoa(p.cfg.ConsolePort)
	}
	_, port := listenerAddr(r)
	return port
}

// consoleBase is the console's address, without a trailing slash: the
// external URL; else the base domain (subdomain mode) or the address the
// connection came to, at the main listener's port.
func (p *Proxy) consoleBase(r *http.Request) string {
	if p.external != nil {
		return strings.TrimRight(p.external.String(), "/")
	}
	host := p.consoleHost()
	if host == "" {
		host, _ = listenerAddr(r)
	}
	return originOf(p.proto(r), host, p.consolePort(r))
}

// originOf is scheme://host[:port], the port left out when it is the
// scheme's default.
func originOf(scheme, host, port string) string {
	if port == defaultPort(scheme) {
		port = ""
	}
	return scheme + "://" + joinHost(host, port)
}

// defaultPort is the port a URL of the scheme means when it names none.
func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// portOf is a URL's port, its scheme's default when it names none.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return defaultPort(u.Scheme)
}

// appsHost is the host of the apps' ports (port mode): the apps domain, the
// external URL's host, or the address the connection came to.
func (p *Proxy) appsHost(r *http.Request) string {
	if p.apps != "" {
		return p.apps
	}
	if p.external != nil {
		return p.external.Hostname()
	}
	host, _ := listenerAddr(r)
	return host
}

// subdomainPort is the port of the apps' subdomains: the external URL's
// (its scheme's default when it names none), or the main listener's.
func (p *Proxy) subdomainPort(r *http.Request) string {
	if p.external != nil {
		return portOf(p.external)
	}
	return p.consolePort(r)
}

// appOrigin is the origin an app is served at, and in path mode the
// prefix after it (without its trailing slash): for port mode the app's
// host port, for the others its slug (as it appears in the URL).
func (p *Proxy) appOrigin(r *http.Request, t target) (origin, prefix string) {
	switch p.cfg.Mode {
	case ModeSubdomain:
		return originOf(p.proto(r), strings.ToLower(t.slug)+"."+p.apps, p.subdomainPort(r)), ""
	case ModePath:
		prefix = t.prefix
		if prefix == "" {
			prefix = appsPrefix + url.PathEscape(t.slug)
		}
		return p.consoleBase(r), prefix
	}
	return originOf("http", p.appsHost(r), strconv.Itoa(t.port)), ""
}

// pageURL is the URL a request for an app asked for, on the app's origin.
func (p *Proxy) pageURL(r *http.Request, t target) string {
	origin, _ := p.appOrigin(r, t)
	return origin + r.URL.RequestURI()
}

// AppURL is where the edge serves the app with this slug (and, in port
// mode, this host port; 0 for none) in the current mode, for a client
// that asked the API at r; "" when it serves it nowhere (port mode, no
// port). Port mode: http://<apps host>:<port>/; subdomain mode:
// <scheme>://<slug>.<apps domain>[:<port>]/; path mode: <console>/apps/<slug>/.
func (p *Proxy) AppURL(r *http.Request, slug string, port int) string {
	if p.cfg.Mode == ModePort && port <= 0 {
		return ""
	}
	origin, prefix := p.appOrigin(r, target{slug: slug, port: port})
	return origin + prefix + "/"
}

// addressed reads a handoff's destination: an absolute URL on an app's
// origin (and in path mode under its prefix) as this installation serves
// it, never anything else (an open redirect would hand a code to whoever
// named the destination). It returns the app it addresses (found or not).
func (p *Proxy) addressed(r *http.Request, next string) (target, error) {
	bad := func(why string) (target, error) {
		return target{}, errcode.Invalid("next", "next must be an address of one of this installation's apps: %s", why)
	}
	u, err := url.Parse(next)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" {
		return bad("not an absolute URL")
	}
	if u.User != nil {
		return bad("it carries credentials")
	}
	switch p.cfg.Mode {
	case ModePort:
		port, err := strconv.Atoi(portOf(u))
		if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portOf(u) || u.Scheme != "http" || !strings.EqualFold(u.Hostname(), p.appsHost(r)) {
			return bad(fmt.Sprintf("apps are at http://%s:<port>/", p.appsHost(r)))
		}
		route, found := p.d.Routes.ByPort(port)
		return target{route: route, found: found, port: port}, nil
	case ModeSubdomain:
		slug, ok := p.subdomainSlug(u.Host)
		if !ok || strings.HasSuffix(u.Hostname(), ".") || u.Scheme != p.proto(r) || portOf(u) != p.subdomainPort(r) {
			return bad(fmt.Sprintf("apps are at %s/", originOf(p.proto(r), "<slug>."+p.apps, p.subdomainPort(r))))
		}
		route, found := p.d.Routes.BySlug(slug)
		return target{route: route, found: found, slug: slug}, nil
	}
	base, _ := url.Parse(p.consoleBase(r))
	rest, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimRight(base.EscapedPath(), "/")+appsPrefix)
	escSlug, _, slash := strings.Cut(rest, "/")
	slug, err := url.PathUnescape(escSlug)
	if !ok || !slash || err != nil || slug == "" || u.Scheme != base.Scheme || !strings.EqualFold(u.Hostname(), base.Hostname()) || portOf(u) != portOf(base) {
		return bad(fmt.Sprintf("apps are at %s/apps/<slug>/", p.consoleBase(r)))
	}
	route, found := p.d.Routes.BySlug(slug)
	return target{route: route, found: found, slug: slug, prefix: appsPrefix + escSlug}, nil
}

// NextPage is where a console page (sign-in, an app's passcode, setup) may
// send the browser once it is done with it, next being what the page was
// given: a path on the console's own origin (the handoff that sent the
// browser there, say), answered as a path, which the browser resolves on
// the page's origin; or an address of one of this installation's apps,
// exactly as addressed reads a handoff's destination. Anything else is
// refused (VALID_INVALID), so that no page is an open redirect: another
// host, a scheme-relative //host, a backslash (browsers read /\host as
// //host), a javascript: URL, an address where no app is.
func (p *Proxy) NextPage(r *http.Request, next string) (string, error) {
	bad := errcode.Invalid("next", "next must be a path on this console or the address of one of this installation's apps")
	if !strings.HasPrefix(next, "/") {
		t, err := p.addressed(r, next)
		if err != nil {
			return "", err
		}
		if !t.found {
			return "", bad
		}
		return next, nil
	}
	u, err := url.Parse(next)
	if err != nil || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return "", bad
	}
	// Written again from what was parsed: a path, and its query.
	out := u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, nil
}
