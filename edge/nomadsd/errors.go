package nomadsd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/svchost/svc/internal/errcode"
)

// statusError is what is kept of an answer with an error status: not
// Nomad's body, which can echo what was sent.
type statusError struct {
	what   string
	status int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("nomad answered %s with HTTP %d", e.what, e.status)
}

// statusError translates an answer with an error status, by status alone.
func (c *client) statusError(what string, status int) *errcode.Error {
	cause := &statusError{what: what, status: status}
	switch {
	case status == 401 || status == 403:
		return errcode.Wrap(cause, errcode.AdapterFailed, "nomad refused %s (HTTP %d): the adapter has no token, or one nomad does not know, or one whose policy does not allow it", what, status).
			WithRemedy("set the adapter's token to a nomad ACL token whose policy grants the read-job capability on namespace %s", c.namespaceName())
	case status == 404:
		return errcode.Wrap(cause, errcode.AdapterFailed, "nomad at %s has no such endpoint for %s (HTTP 404)", c.base, what).
			WithRemedy("check that the adapter's address points at nomad's HTTP API (nomad 1.3 or later), not at a proxy or another service")
	case status == 429:
		return errcode.Wrap(cause, errcode.AdapterFailed, "nomad refused %s: rate limited (HTTP 429)", what).
			WithRemedy("raise nomad's request rate limits for this server, or run fewer edge nodes against one agent")
	case status >= 400 && status < 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "nomad refused %s (HTTP %d)", what, status).
			WithRemedy("check the adapter's namespace and region; nomad's log has the reason")
	case status >= 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "nomad failed %s (HTTP %d)", what, status).
			WithRemedy("check that the nomad servers have a leader and that the adapter's region exists; nomad's server log has the reason")
	}
	return errcode.Wrap(cause, errcode.AdapterFailed, "nomad answered %s with HTTP %d", what, status).
		WithRemedy("check that the adapter's address points at nomad's HTTP API, not a proxy or a redirect")
}

func (c *client) namespaceName() string {
	if c.namespace == "" {
		return "default"
	}
	return c.namespace
}

// transportError translates a failure to get an answer at all, as
// edge/consul translates Consul's.
func transportError(address, what string, err error) *errcode.Error {
	var (
		ue        *url.Error
		dnsErr    *net.DNSError
		certErr   *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		notTLS    tls.RecordHeaderError
		netErr    net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s was cancelled before nomad answered", what).
			WithRemedy("retry")
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "nomad at %s did not answer in time while %s", address, what).
			WithRemedy("check that nomad is running and reachable from this server, and not overloaded")
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		return errcode.Wrap(err, errcode.AdapterFailed, "nomad at %s presented a certificate this server does not trust while %s", address, what).
			WithRemedy("set the adapter's ca_cert to the CA that signed nomad's certificate, and use the host name the certificate names")
	case errors.As(err, &notTLS):
		return errcode.Wrap(err, errcode.AdapterFailed, "nomad at %s does not speak TLS, so %s failed", address, what).
			WithRemedy("use an http:// address for a nomad listener without TLS, or enable TLS on it")
	case errors.As(err, &dnsErr):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "nomad at %s is not reachable: its host name does not resolve (while %s)", address, what).
			WithRemedy("check the adapter's address and this server's DNS")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "nomad at %s is not reachable: connection refused (while %s)", address, what).
			WithRemedy("check that nomad is running and listening at the adapter's address")
	case errors.As(err, &ue):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "nomad at %s is not reachable (while %s)", address, what).
			WithRemedy("check the adapter's address, and that nomad is running and reachable from this server")
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "nomad's answer to %s could not be used", what).
		WithRemedy("check that the adapter's address points at nomad's HTTP API; this server's log has the cause")
}
