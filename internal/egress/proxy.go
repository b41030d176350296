package egress

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resolver looks host names up (net.DefaultResolver in production).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Refusal is a destination a proxy's rule refused; Err, when set, is the
// rule's own error (a coded one, say).
type Refusal struct {
	Dest   string
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return "egress to " + r.Dest + " refused: " + r.Reason }
func (r *Refusal) Unwrap() error { return r.Err }

// Dialer connects to destinations an Allowlist allows, at an address it
// checked (the rules in the package doc).
type Dialer struct {
	// Allow is the list; nil allows nothing.
	Allow *Allowlist
	// Resolver looks names up; nil means net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds a look-up and a connection (10 s when 0).
	Timeout time.Duration
}

// Dial connects to host:port if the list lets it, to an address it
// checked; a *Refusal when it does not.
func (d *Dialer) Dial(ctx context.Context, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, &Refusal{Dest: hostport, Reason: "not a host:port"}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, &Refusal{Dest: hostport, Reason: "not a valid port"}
	}
	addrs, how, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if d.Allow.allowAddr(a, how) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		reason := "not in host policy's egress_allowlist"
		if how == wildcard {
			reason = "the name resolves only to addresses that are not public; list them as IP addresses or CIDRs in egress_allowlist"
		}
		return nil, &Refusal{Dest: hostport, Reason: reason}
	}
	nd := net.Dialer{Timeout: d.timeout()}
	var last error
	for _, a := range ok {
		c, err := nd.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("egress to %s: %w", hostport, last)
}

func (d *Dialer) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return 10 * time.Second
}

// resolve returns the addresses a destination host stands for and how the
// list matched it; a refusal when it cannot match.
func (d *Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, match, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return nil, noMatch, &Refusal{Dest: host, Reason: "an address with a zone"}
		}
		return []netip.Addr{ip}, noMatch, nil
	}
	how := d.Allow.matchName(host)
	if how == noMatch {
		return nil, noMatch, &Refusal{Dest: host, Reason: "not in host policy's egress_allowlist"}
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	rctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	addrs, err := r.LookupNetIP(rctx, "ip", normalName(host))
	if err != nil {
		return nil, how, fmt.Errorf("egress to %s: look up: %w", host, err)
	}
	return addrs, how, nil
}

// Proxy is a forward proxy whose every connection goes through Dial, which
// decides: CONNECT tunnels (HTTPS, and whatever else a client tunnels) and
// plain HTTP requests in absolute form. A sandbox's egress under a list
// uses it with a Dialer; a clone uses it with its own address rule
// (package source). Serve it on a listener of its own; Close ends it and
// every tunnel.
type Proxy struct {
	// Dial connects to host:port or refuses it (a *Refusal, answered 403;
	// any other error is 502).
	Dial func(ctx context.Context, hostport string) (net.Conn, error)
	// Password, when set, must be given as Proxy-Authorization (Basic,
	// any user name): only a client told of it may use the proxy.
	Password string
	// Failed, if set, is told of each destination Dial did not connect to.
	Failed func(dest string, err error)

	once    sync.Once
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	srv     *http.Server
	tunnels map[net.Conn]struct{}
	closed  bool
}

var _ http.Handler = (*Proxy)(nil)

func (p *Proxy) init() {
	p.once.Do(func() {
		p.tunnels = map[net.Conn]struct{}{}
		p.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.Header.Del("Proxy-Authorization")
				pr.Out.Header.Del("Proxy-Connection")
				pr.Out.Host = pr.In.Host
			},
			// No keep-alive: a server that talks first (a banner) must not
			// be read as a later request's answer.
			Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: false, DisableKeepAlives: true, DisableCompression: true,
				ResponseHeaderTimeout: 5 * time.Minute,
				DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
					return p.dial(ctx, addr)
				}},
			ErrorLog: log.New(io.Discard, "", 0),
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				p.fail(w, err)
			},
		}
	})
}

// dial is Dial, telling Failed of a failure.
func (p *Proxy) dial(ctx context.Context, hostport string) (net.Conn, error) {
	c, err := p.Dial(ctx, hostport)
	if err != nil && p.Failed != nil {
		p.Failed(hostport, err)
	}
	return c, err
}

// fail answers a request the proxy could not carry: 403 for a refusal,
// 502 otherwise.
func (p *Proxy) fail(w http.ResponseWriter, err error) {
	if ref := (*Refusal)(nil); errors.As(err, &ref) {
		http.Error(w, "svc proxy: "+ref.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "svc proxy: the destination could not be reached", http.StatusBadGateway)
}

// ServeHTTP proxies one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	if p.Password != "" && !p.authorized(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="svc"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
		return
	}
	if r.Method != http.MethodConnect {
		if r.URL.Scheme != "http" || r.URL.Host == "" {
			http.Error(w, "svc proxy: send absolute http:// requests, or CONNECT for anything else", http.StatusBadRequest)
			return
		}
		if r.URL.Port() == "" {
			r.URL.Host = net.JoinHostPort(r.URL.Hostname(), "80")
		}
		p.rp.ServeHTTP(w, r)
		return
	}
	up, err := p.dial(r.Context(), r.Host)
	if err != nil {
		p.fail(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !p.track(up, down) {
		return
	}
	defer p.untrack(up, down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, buf); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); closeWrite(down); done <- struct{}{} }()
	<-done
	<-done
}

func (p *Proxy) authorized(r *http.Request) bool {
	_, pass, ok := parseProxyAuth(r.Header.Get("Proxy-Authorization"))
	return ok && subtle.ConstantTimeCompare([]byte(pass), []byte(p.Password)) == 1
}

// parseProxyAuth reads a Basic Proxy-Authorization header.
func parseProxyAuth(h string) (user, pass string, ok bool) {
	scheme, enc, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// closeWrite passes the end of one direction of a tunnel on.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.tunnels, c)
		_ = c.Close()
	}
}

// Serve runs the proxy on ln until Close.
func (p *Proxy) Serve(ln net.Listener) error {
	p.init()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ln.Close()
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	srv := p.srv
	p.mu.Unlock()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Close stops the proxy and ends its tunnels.
func (p *Proxy) Close() error {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.tunnels {
		_ = c.Close()
	}
	if p.srv != nil {
		return p.srv.Close()
	}
	return nil
}
