package source

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/svchost/svc/internal/egress"
	"github.com/svchost/svc/internal/errcode"
)

// Which addresses a clone may connect to (server-side request forgery: a
// repository address is a URL anyone who may create an app chooses).
//
//   - Never loopback, link-local (cloud metadata services live there),
//     unspecified, multicast or "this network" (0.0.0.0/8) addresses,
//     whatever the allowlist says: those reach svc's own host.
//   - Private addresses (10/8, 172.16/12, 192.168/16, 100.64/10 shared
//     address space, fc00::/7) only when host policy's source_allowlist
//     names the host connected to by an entry other than a bare "*".
//   - Any other (public) address.
//
// The rule applies to the address actually connected to: clones over
// http(s) go through a proxy svc runs for the clone (guard), which
// resolves each host itself, checks the addresses and dials the one it
// checked, for the repository's host and for every host a redirect leads
// to; clones over ssh are pinned to an address checked beforehand (ssh -o
// HostName, keeping the host's name for its host key). So neither DNS
// answers that change between check and use nor redirects get around it.

// addrPolicy decides whether a clone may connect to a of host.
type addrPolicy func(host string, a netip.Addr) error

// sharedSpace is 100.64.0.0/10 (RFC 6598), private in all but name.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// thisNetwork is 0.0.0.0/8, which Linux connects to as the host itself.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// defaultAddrPolicy is the rule above under allowlist.
func defaultAddrPolicy(allowlist []string) addrPolicy {
	return func(host string, a netip.Addr) error {
		a = a.Unmap().WithZone("")
		switch {
		case a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
			a.IsUnspecified() || a.IsMulticast() || thisNetwork.Contains(a):
			return errcode.New(errcode.PolicySourceNotAllow, "sources are never fetched from a loopback, link-local or otherwise local address (%s resolves to %s)", host, a).
				WithDetail("host", host).WithRemedy("use an address svc's host reaches over the network")
		case a.IsPrivate() || sharedSpace.Contains(a):
			if namedByAllowlist(host, allowlist) {
				return nil
			}
			return errcode.New(errcode.PolicySourceNotAllow, "%s resolves to a private address (%s); sources are fetched from private addresses only when host policy's source_allowlist names the host", host, a).
				WithDetail("host", host).WithRemedy("add the host to source_allowlist (an administrator, PUT /api/v1/policy)")
		}
		return nil
	}
}

// namedByAllowlist reports whether an entry of allowlist other than a
// bare "*" names host (on any port and path): the host itself, or
// *.<domain> for a host below the domain. An IPv6 address may be written
// in brackets.
func namedByAllowlist(host string, allowlist []string) bool {
	host = strings.TrimSuffix(asciiLower(strings.Trim(host, "[]")), ".")
	for _, e := range allowlist {
		if i := strings.Index(e, "://"); i >= 0 {
			e = e[i+3:]
		}
		h, _, _ := strings.Cut(e, "/")
		if rest, ok := strings.CutPrefix(h, "["); ok {
			h, _, _ = strings.Cut(rest, "]")
		} else if name, _, ok := strings.Cut(h, ":"); ok {
			h = name
		}
		h = strings.TrimSuffix(asciiLower(h), ".")
		switch {
		case h == "" || h == "*":
		case strings.HasPrefix(h, "*."):
			if strings.HasSuffix(host, h[1:]) && len(host) > len(h)-1 {
				return true
			}
		case h == host:
			return true
		}
	}
	return false
}

// resolve returns the addresses of host: the address itself when host is
// one, else what DNS says.
func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// pick resolves host and returns the first address policy allows; the
// policy's refusal when it allows none.
func pick(ctx context.Context, host string, policy addrPolicy) (netip.Addr, error) {
	addrs, err := resolve(ctx, host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %s: %w", host, err)
	}
	var refused error
	for _, a := range addrs {
		if err := policy(host, a); err != nil {
			refused = cmpRefusal(refused, err)
			continue
		}
		return a.Unmap(), nil
	}
	if refused == nil {
		refused = fmt.Errorf("resolve %s: no address", host)
	}
	return netip.Addr{}, refused
}

func cmpRefusal(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// guard is the forward proxy a clone over http(s) goes through (package
// egress's): CONNECT tunnels (https) and absolute-form requests (http),
// each to an address the policy allows, dialed as checked. Only the
// clone's git may use it: it asks for a random password
// (Proxy-Authorization) that only that git is given. The first refusal is
// kept for the clone's error.
type guard struct {
	proxy  *egress.Proxy
	ln     net.Listener
	policy addrPolicy
	dialer net.Dialer

	mu      sync.Mutex
	refusal error
}

// startGuard starts a guard on a loopback port.
func startGuard(policy addrPolicy) (*guard, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("clone proxy: %w", err)
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	g := &guard{policy: policy, ln: ln, dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	g.proxy = &egress.Proxy{Dial: g.dial, Password: base64.RawURLEncoding.EncodeToString(b)}
	go func() { _ = g.proxy.Serve(ln) }()
	return g, nil
}

// proxyURL is the proxy address git is given, password included.
func (g *guard) proxyURL() string {
	return "http://svc:" + g.proxy.Password + "@" + g.ln.Addr().String()
}

// close stops the proxy and ends its tunnels.
func (g *guard) close() { _ = g.proxy.Close() }

// refused is the first refusal of the policy, nil if none.
func (g *guard) refused() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusal
}

// dial connects to addr (host:port) at an address the policy allows; a
// refusal is an egress.Refusal (the proxy answers 403) wrapping the
// policy's coded error, which the clone's error reports.
func (g *guard) dial(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	a, err := pick(ctx, host, g.policy)
	if err != nil {
		if _, coded := errcode.As(err); coded {
			g.mu.Lock()
			g.refusal = cmpRefusal(g.refusal, err)
			g.mu.Unlock()
			return nil, &egress.Refusal{Dest: addr, Reason: err.Error(), Err: err}
		}
		return nil, err
	}
	return g.dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
}
