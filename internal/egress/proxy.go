package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// Proxy is the forward proxy a sandbox's network reaches the world through
// when its egress is restricted: CONNECT for any TCP (HTTPS, and whatever
// else a client tunnels), and plain HTTP requests in absolute form. Every
// destination is checked against Allow on the address actually dialled.
type Proxy struct {
	// Allow is the list; nil allows nothing.
	Allow *Allowlist
	// Resolver looks names up; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds a connection to a destination (10 s when 0).
	DialTimeout time.Duration
	// Refused, if set, is told of each refused destination (for the
	// workload's log) with the reason.
	Refused func(dest, reason string)

	once      sync.Once
	transport *http.Transport
}

var _ http.Handler = (*Proxy)(nil)

// Refusal is why a destination was refused.
type Refusal struct {
	Dest   string
	Reason string
}

func (r *Refusal) Error() string { return "egress to " + r.Dest + " refused: " + r.Reason }

// Dial connects to host:port if the allowlist lets it, to an address it
// checked.
func (p *Proxy) Dial(ctx context.Context, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, &Refusal{Dest: hostport, Reason: "not a host:port"}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, &Refusal{Dest: hostport, Reason: "not a valid port"}
	}
	addrs, how, err := p.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if p.Allow.allowAddr(a, how) {
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
	d := net.Dialer{Timeout: p.dialTimeout()}
	var last error
	for _, a := range ok {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("egress to %s: %w", hostport, last)
}

func (p *Proxy) dialTimeout() time.Duration {
	if p.DialTimeout > 0 {
		return p.DialTimeout
	}
	return 10 * time.Second
}

// resolve returns the addresses a destination host stands for and how the
// list matched it; a refusal when it cannot match.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, match, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return nil, noMatch, &Refusal{Dest: host, Reason: "an address with a zone"}
		}
		return []netip.Addr{ip}, noMatch, nil
	}
	how := p.Allow.matchName(host)
	if how == noMatch {
		return nil, noMatch, &Refusal{Dest: host, Reason: "not in host policy's egress_allowlist"}
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	rctx, cancel := context.WithTimeout(ctx, p.dialTimeout())
	defer cancel()
	addrs, err := r.LookupNetIP(rctx, "ip", normalName(host))
	if err != nil {
		return nil, how, fmt.Errorf("egress to %s: look up: %w", host, err)
	}
	return addrs, how, nil
}

// ServeHTTP proxies one request: CONNECT, or an absolute-form HTTP request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "svc egress proxy: send absolute http:// requests, or CONNECT for anything else", http.StatusBadRequest)
		return
	}
	p.once.Do(func() {
		p.transport = &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return p.Dial(ctx, addr)
			},
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
			DisableCompression:    true,
		}
	})
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		out.Header.Del(h)
	}
	if out.URL.Port() == "" {
		out.URL.Host = net.JoinHostPort(out.URL.Hostname(), "80")
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.fail(w, out.URL.Host, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// fail answers a request the proxy could not carry: 403 for a refusal,
// 502 otherwise.
func (p *Proxy) fail(w http.ResponseWriter, dest string, err error) {
	var ref *Refusal
	if errors.As(err, &ref) {
		if p.Refused != nil {
			p.Refused(ref.Dest, ref.Reason)
		}
		http.Error(w, "svc egress proxy: "+ref.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "svc egress proxy: "+dest+": "+err.Error(), http.StatusBadGateway)
}

// connect tunnels a CONNECT request's connection to its destination.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	dest := r.Host
	up, err := p.Dial(r.Context(), dest)
	if err != nil {
		p.fail(w, dest, err)
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		up.Close()
		return
	}
	down, buf, err := rc.Hijack()
	if err != nil {
		up.Close()
		return
	}
	go splice(down, buf, up)
}

// splice copies both ways until either side ends, then closes both.
func splice(down net.Conn, buffered io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, buffered)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
	down.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// Serve runs the proxy on ln until it is closed.
func (p *Proxy) Serve(ln net.Listener) error {
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
