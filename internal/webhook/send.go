package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// maxAnswerBytes is how much of an answer's body an attempt reads (and
// throws away) before closing it.
const maxAnswerBytes = 64 << 10

// Sender sends webhook requests, one attempt per Send; it is safe for
// concurrent use. It has two clients sharing nothing: one whose dialer
// refuses every address the rule refuses, used while allow_private_webhooks
// is off, and one that allows them, used while it is on; so a connection
// kept alive from a time the policy was on is never reused once it is off.
type Sender struct {
	o      Options
	strict *http.Client
	open   *http.Client
}

// NewSender returns a Sender. A zero Timeout is 15 seconds, a nil Now is
// time.Now, an empty UserAgent is "svc".
func NewSender(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.UserAgent == "" {
		o.UserAgent = "svc"
	}
	return &Sender{o: o, strict: o.client(false), open: o.client(true)}
}

// client is an HTTP client that never uses a proxy from the environment,
// verifies TLS against the system's roots, asks for no compression, never
// follows a redirect, and whose dialer applies the address rule (unless
// allowPrivate) to every address it connects to.
func (o Options) client(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second, Resolver: o.Resolver, Control: dialControl(allowPrivate)}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            d.DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    o.Timeout,
			ResponseHeaderTimeout:  o.Timeout,
			DisableCompression:     true,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refusal is the dialer's refusal of an address.
type refusal struct {
	addr netip.Addr
	kind string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("refused: %s is %s; host policy allow_private_webhooks is off", r.addr, r.kind)
}

// dialControl checks the address a connection is about to be made to,
// after DNS, for every address tried.
func dialControl(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return &refusal{kind: "not a TCP address (" + network + ")"}
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &refusal{kind: "not an address"}
		}
		if allowPrivate {
			return nil
		}
		if kind := classify(ap.Addr()); kind != "" {
			return &refusal{addr: ap.Addr().WithZone(""), kind: kind}
		}
		return nil
	}
}

// Send makes one attempt to deliver req: the body (Body), signed with
// every key at this moment, with the Svc-* headers, Content-Type,
// User-Agent and the subscription's extra headers (never one that would
// replace svc's own). A 2xx answer is delivered; any other status (a
// redirect included: it is never followed), no answer within the
// timeout, or a refused address is a failure, said in Result.Error, which
// never carries a header value, key or body. Send never panics.
func (s *Sender) Send(ctx context.Context, req Request) (res Result) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			res = Result{Error: "the attempt stopped on an internal error"}
		}
		res.Duration = time.Since(start)
		res.Error = scrub(res.Error, req)
	}()
	allow := s.o.AllowPrivate != nil && s.o.AllowPrivate()
	u, err := target(req.URL, allow, false)
	if err != nil {
		return Result{Error: publicMessage(err)}
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	if err := CheckMethod(method); err != nil {
		return Result{Error: publicMessage(err)}
	}
	if err := CheckContentType(req.ContentType); err != nil {
		return Result{Error: publicMessage(err)}
	}
	if len(req.Keys) == 0 {
		return Result{Error: "the subscription has no signing key"}
	}
	if req.Event == nil {
		return Result{Error: "no event to send"}
	}
	body, err := Body(req)
	if err != nil {
		return Result{Error: err.Error()}
	}

	actx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(actx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return Result{Error: "the request could not be made"}
	}
	h := hr.Header
	h.Set("User-Agent", s.o.UserAgent)
	for name, v := range req.Headers {
		if CheckHeaders(map[string]string{name: v}) != nil {
			continue // refused when saved; dropped if it got here anyway
		}
		h.Set(name, v)
	}
	ts := s.o.Now().Unix()
	h.Set("Content-Type", contentType(req.ContentType))
	h.Set("Svc-Event", req.Event.Type)
	h.Set("Svc-Event-Id", req.Event.ID)
	h.Set("Svc-Delivery-Id", req.DeliveryID)
	h.Set("Svc-Timestamp", strconv.FormatInt(ts, 10))
	h.Set("Svc-Signature", Sign(req.Keys, ts, body))

	client := s.strict
	if allow {
		client = s.open
	}
	resp, err := client.Do(hr)
	if err != nil {
		return Result{Error: s.describe(ctx, err, u.Hostname())}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	_ = resp.Body.Close()
	res = Result{StatusCode: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		res.Error = fmt.Sprintf("the receiver answered %d, a redirect; redirects are not followed", resp.StatusCode)
	default:
		res.Error = fmt.Sprintf("the receiver answered %d", resp.StatusCode)
	}
	return res
}

// describe says why an attempt got no answer, without the URL (it may
// carry a token) or anything the request carried.
func (s *Sender) describe(parent context.Context, err error, host string) string {
	var (
		ref   *refusal
		dns   *net.DNSError
		cert  *tls.CertificateVerificationError
		x509U x509.UnknownAuthorityError
		x509H x509.HostnameError
		op    *net.OpError
		ne    net.Error
	)
	switch {
	case errors.As(err, &ref):
		if ref.addr.IsValid() {
			if a, perr := netip.ParseAddr(host); perr == nil && a.WithZone("").Unmap() == ref.addr.Unmap() {
				return fmt.Sprintf("refused: %s is %s; host policy allow_private_webhooks is off", host, ref.kind)
			}
			return fmt.Sprintf("refused: %s resolved to %s, %s; host policy allow_private_webhooks is off", host, ref.addr, ref.kind)
		}
		return fmt.Sprintf("refused: %s is %s", host, ref.kind)
	case parent.Err() != nil:
		return "the attempt was cancelled"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "no answer within " + s.o.Timeout.String()
	case errors.As(err, &dns):
		return fmt.Sprintf("could not resolve %s: %s", host, dns.Err)
	case errors.As(err, &cert) || errors.As(err, &x509U) || errors.As(err, &x509H):
		return fmt.Sprintf("the receiver's TLS certificate was not accepted (%s)", certReason(err))
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Sprintf("could not connect to %s: %v", host, op.Err)
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	return "the request failed: " + err.Error()
}

// certReason is the x509 reason of a certificate error.
func certReason(err error) string {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return cert.Err.Error()
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	return err.Error()
}

// publicMessage is an error's public message (a coded error's message).
func publicMessage(err error) string {
	if e, ok := errcode.As(err); ok {
		return e.Message
	}
	return err.Error()
}

// scrub removes from an attempt's error anything secret the request
// carried, should a lower layer have quoted it: header values, keys, the
// URL and its path and query.
func scrub(msg string, req Request) string {
	if msg == "" {
		return ""
	}
	secrets := []string{req.URL}
	for _, v := range req.Headers {
		secrets = append(secrets, v)
	}
	secrets = append(secrets, req.Keys...)
	if i := strings.Index(req.URL, "://"); i >= 0 {
		if j := strings.IndexAny(req.URL[i+3:], "/?#"); j >= 0 {
			secrets = append(secrets, req.URL[i+3+j:])
		}
	}
	for _, s := range secrets {
		if len(s) >= 6 {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}
