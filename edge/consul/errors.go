package consul

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/internal/errcode"
)

// statusError is what is kept of an answer with an error status: not
// Consul's body, which can echo what was sent.
type statusError struct {
	what   string
	status int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("consul answered %s with HTTP %d", e.what, e.status)
}

// translate turns an error of Consul's client into a coded error, by HTTP
// status and error type, never by message text.
func (w *Watcher) translate(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var se api.StatusError
	if errors.As(err, &se) {
		return w.statusError(what, se.Code)
	}
	return transportError(w.cfg.Address, what, err)
}

// statusError translates an answer with an error status.
func (w *Watcher) statusError(what string, status int) *errcode.Error {
	cause := &statusError{what: what, status: status}
	switch {
	case status == 401 || status == 403:
		return errcode.Wrap(cause, errcode.AdapterFailed, "consul refused %s (HTTP %d): the adapter's token is unknown to consul or its policy does not allow it", what, status).
			WithRemedy("set the adapter's token to a consul ACL token whose policy grants service:read on svc's services and node:read on their nodes")
	case status == 404:
		return errcode.Wrap(cause, errcode.AdapterFailed, "consul at %s has no such endpoint for %s (HTTP 404)", w.cfg.Address, what).
			WithRemedy("check that the adapter's address points at consul's HTTP API, not at a proxy or another service")
	case status == 429:
		return errcode.Wrap(cause, errcode.AdapterFailed, "consul refused %s: rate limited (HTTP 429)", what).
			WithRemedy("raise consul's request rate limits for this server, or run fewer edge nodes against one agent")
	case status >= 400 && status < 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "consul refused %s (HTTP %d)", what, status).
			WithRemedy("check the adapter's datacenter and address; consul's log has the reason")
	case status >= 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "consul failed %s (HTTP %d)", what, status).
			WithRemedy("check that the consul servers have a leader and that the adapter's datacenter exists; consul's server log has the reason")
	}
	return errcode.Wrap(cause, errcode.AdapterFailed, "consul answered %s with HTTP %d", what, status).
		WithRemedy("check that the adapter's address points at consul's HTTP API, not a proxy or a redirect")
}

// transportError translates a failure to get an answer at all
// (edge/nomadsd translates Nomad's the same way).
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
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s was cancelled before consul answered", what).
			WithRemedy("retry")
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "consul at %s did not answer in time while %s", address, what).
			WithRemedy("check that consul is running and reachable from this server, and not overloaded")
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		return errcode.Wrap(err, errcode.AdapterFailed, "consul at %s presented a certificate this server does not trust while %s", address, what).
			WithRemedy("set the adapter's ca_cert to the CA that signed consul's certificate, and use the host name the certificate names")
	case errors.As(err, &notTLS):
		return errcode.Wrap(err, errcode.AdapterFailed, "consul at %s does not speak TLS, so %s failed", address, what).
			WithRemedy("use an http:// address for a consul listener without TLS, or enable TLS on it")
	case errors.As(err, &dnsErr):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "consul at %s is not reachable: its host name does not resolve (while %s)", address, what).
			WithRemedy("check the adapter's address and this server's DNS")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "consul at %s is not reachable: connection refused (while %s)", address, what).
			WithRemedy("check that consul is running and listening at the adapter's address")
	case errors.As(err, &ue):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "consul at %s is not reachable (while %s)", address, what).
			WithRemedy("check the adapter's address, and that consul is running and reachable from this server")
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "consul's answer to %s could not be used", what).
		WithRemedy("check that the adapter's address points at consul's HTTP API; this server's log has the cause")
}
