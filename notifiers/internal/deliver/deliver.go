// Package deliver holds what the notification adapters (notifiers/chat,
// notifiers/email, notifiers/ntfy) share to get a message through: the
// time bound of one attempt, TLS configured from an operator's CA file, an
// HTTP client that follows no redirect and uses no proxy, a post that
// reads the answer, a reachability check, errors that name a service by
// its host and never carry a URL, a path or a credential, the rule that a
// credential never crosses a network in the clear, and which events are
// urgent.
//
// It must not import the store, the server or another adapter; it sends
// nothing on its own.
package deliver

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/cacert"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/netfail"
)

// Timeout bounds one attempt when the caller's context sets no deadline
// (the specification's attempt timeout for webhooks).
const Timeout = 15 * time.Second

// Bound returns ctx with a deadline: its own, or Timeout from now.
func Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, Timeout)
}

// TLSConfig is how the adapters verify a server named host: TLS 1.2 or
// later, against the certificates of the PEM file caFile when it is set,
// else against the system's roots.
func TLSConfig(host, caFile string) (*tls.Config, error) {
	c := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := cacert.Pool(caFile)
		if err != nil {
			return nil, errcode.New(errcode.ValidInvalid, "ca_file: %v", err).WithDetail("field", "config.ca_file").
				WithRemedy("ca_file must name a PEM file of CA certificates readable by svc on every server")
		}
		c.RootCAs = pool
	}
	return c, nil
}

// Client returns an HTTP client verifying servers with tlsConf: it uses
// no proxy (the adapters' health checks dial the server itself, so both
// take the same path), and never follows a redirect (a redirect is an
// answer like any other non-2xx one).
func Client(tlsConf *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.TLSClientConfig = tlsConf
	t.MaxIdleConnsPerHost = 4
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// maxAnswer bounds how much of an answer is read; maxShown how much of a
// refusal's text an error quotes.
const (
	maxAnswer = 64 << 10
	maxShown  = 200
)

// Do sends req (bounded by Bound) and returns the answer's body when its
// status is 2xx. Any other status is ADAPTER_FAILED naming who, the status
// and the first line of the answer; a failure to reach the server is
// translated by Explain. secrets are removed from anything quoted.
func Do(c *http.Client, req *http.Request, who string, secrets ...string) ([]byte, error) {
	ctx, cancel := Bound(req.Context())
	defer cancel()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return nil, Explain(who, err, secrets...)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, Explain(who, err, secrets...)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := errcode.New(errcode.AdapterFailed, "%s answered %s%s", who, resp.Status, quote(body, secrets)).
			WithDetail("status", resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			e.WithRemedy("redirects are not followed: configure the address the redirect leads to")
		}
		return nil, e
	}
	return body, nil
}

// quote is ": " and the first line of an answer, cut short and with
// secrets removed; empty for an empty answer.
func quote(body []byte, secrets []string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	line = Cut(Redact(OneLine(strings.ToValidUTF8(line, "")), secrets...), maxShown)
	if line == "" {
		return ""
	}
	return ": " + line
}

// Redact replaces every occurrence of each secret in s. Secrets shorter
// than four bytes are ignored (they would blot out ordinary words).
func Redact(s string, secrets ...string) string { return netfail.Redact(s, secrets...) }

// URLSecrets lists the parts of a secret URL an error must never show:
// the whole URL, its path and query, and each longer path segment and
// query value (a receiver's answer may quote any of them).
func URLSecrets(u *url.URL) []string {
	out := []string{u.String(), u.RequestURI(), u.EscapedPath(), u.Path, u.RawQuery}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if len(seg) >= 6 {
			out = append(out, seg)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	if u.User != nil {
		out = append(out, u.User.String())
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	// Longest first, so that a part inside another is not left behind.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Reach checks that addr (host:port) can be reached: it resolves the host,
// connects, and completes a TLS handshake when tlsConf is set; it sends
// nothing else.
func Reach(ctx context.Context, who, addr string, tlsConf *tls.Config) error {
	ctx, cancel := Bound(ctx)
	defer cancel()
	var (
		conn net.Conn
		err  error
		d    net.Dialer
	)
	if tlsConf != nil {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: tlsConf}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return Explain(who, err)
	}
	return conn.Close()
}

// Explain translates a failure to talk to who into an error with a code,
// by error type, never by message text (internal/netfail): cancelled,
// timed out, refused, reset and DNS are ADAPTER_UNAVAILABLE; an untrusted
// certificate, not TLS, and anything else ADAPTER_FAILED. Its message
// names who and the kind of failure only; the cause is kept with secrets
// removed and never as a *url.Error (whose text is the whole URL).
func Explain(who string, err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	if e, ok := netfail.Explain(who, err, secrets...); ok {
		return e
	}
	return errcode.New(errcode.AdapterFailed, "%s failed: %s", who, netfail.Cause(netfail.Unwrap(err), secrets...).Error())
}

// IsLoopback reports whether host is this machine without asking DNS:
// "localhost", a name under .localhost, or a loopback address.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Urgent reports whether an event calls for attention: something failed,
// stopped, was turned off or became unhealthy. Notifiers raise such
// messages (ntfy's priority, a chat message's colour).
func Urgent(eventType string) bool {
	_, name, _ := strings.Cut(eventType, ".")
	switch {
	case eventType == "user.sign_in_failed":
		return false // routine; the audit log keeps them
	case strings.HasSuffix(name, "failed"), strings.HasSuffix(name, "stopped"),
		name == "unhealthy", name == "disabled", name == "gave_up", name == "below_minimum":
		return true
	}
	return false
}

// Good reports whether an event says something works again or is done:
// a deploy succeeded, an adapter or a score recovered.
func Good(eventType string) bool {
	_, name, _ := strings.Cut(eventType, ".")
	return name == "succeeded" || name == "recovered"
}

// OneLine makes text from an event one line: control characters (line
// breaks first) and the Unicode line and paragraph separators become
// spaces, and the ends are trimmed.
func OneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s))
}

// EncodeWords makes s one line (OneLine) and returns it as the words of
// an RFC 2047 header value: s itself when it is printable ASCII that
// cannot be read as an encoded word, else UTF-8 base64 encoded words of at
// most 75 characters, cut between characters. Joined by spaces they make
// an HTTP header value; by CRLF and a space, a folded mail header.
func EncodeWords(s string) []string {
	s = OneLine(s)
	plain := !strings.Contains(s, "=?") && !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' })
	if plain {
		return []string{s}
	}
	const maxChunk = 45 // bytes: 60 base64 characters, 72 with the =?utf-8?b? and ?=
	var words []string
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			_, size := utf8.DecodeRuneInString(s[n:])
			if n+size > maxChunk {
				break
			}
			n += size
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return words
}

// Cut shortens s to at most n characters, the last being … when cut.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Who names a service by its host (and port, when not the scheme's), for
// messages: never a path, query or user.
func Who(what string, u *url.URL) string {
	return fmt.Sprintf("%s at %s", what, u.Host)
}
