package blocking

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

// Vendor is what the translation of a route source's failures says about
// its server: its name and address, and what an operator should check
// for the statuses whose advice differs between vendors.
type Vendor struct {
	// Name is the vendor's name in messages, lowercase ("consul").
	Name string
	// Address is the server's address as configured.
	Address string
	// DeniedWhy explains a 401 or 403; DeniedRemedy says what to do.
	DeniedWhy, DeniedRemedy string
	// NotFoundRemedy is the advice on a 404, RefusedRemedy on any other
	// 4xx, FailedRemedy on a 5xx.
	NotFoundRemedy, RefusedRemedy, FailedRemedy string
}

// statusError is what is kept of an answer with an error status: not the
// server's body, which can echo what was sent.
type statusError struct {
	vendor string
	what   string
	status int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s answered %s with HTTP %d", e.vendor, e.what, e.status)
}

// StatusError translates an answer with an error status, by status alone.
func (v *Vendor) StatusError(what string, status int) *errcode.Error {
	cause := &statusError{vendor: v.Name, what: what, status: status}
	switch {
	case status == 401 || status == 403:
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s refused %s (HTTP %d): %s", v.Name, what, status, v.DeniedWhy).
			WithRemedy("%s", v.DeniedRemedy)
	case status == 404:
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s at %s has no such endpoint for %s (HTTP 404)", v.Name, v.Address, what).
			WithRemedy("%s", v.NotFoundRemedy)
	case status == 429:
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s refused %s: rate limited (HTTP 429)", v.Name, what).
			WithRemedy("raise %s's request rate limits for this server, or run fewer edge nodes against one agent", v.Name)
	case status >= 400 && status < 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s refused %s (HTTP %d)", v.Name, what, status).
			WithRemedy("%s", v.RefusedRemedy)
	case status >= 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s failed %s (HTTP %d)", v.Name, what, status).
			WithRemedy("%s", v.FailedRemedy)
	}
	return errcode.Wrap(cause, errcode.AdapterFailed, "%s answered %s with HTTP %d", v.Name, what, status).
		WithRemedy("check that the adapter's address points at %s's HTTP API, not a proxy or a redirect", v.Name)
}

// TransportError translates a failure to get an answer at all, by error
// type, never by message text.
func (v *Vendor) TransportError(what string, err error) *errcode.Error {
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
	name, address := v.Name, v.Address
	switch {
	case errors.Is(err, context.Canceled):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s was cancelled before %s answered", what, name).
			WithRemedy("retry")
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s at %s did not answer in time while %s", name, address, what).
			WithRemedy("check that %s is running and reachable from this server, and not overloaded", name)
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		return errcode.Wrap(err, errcode.AdapterFailed, "%s at %s presented a certificate this server does not trust while %s", name, address, what).
			WithRemedy("set the adapter's ca_cert to the CA that signed %s's certificate, and use the host name the certificate names", name)
	case errors.As(err, &notTLS):
		return errcode.Wrap(err, errcode.AdapterFailed, "%s at %s does not speak TLS, so %s failed", name, address, what).
			WithRemedy("use an http:// address for a %s listener without TLS, or enable TLS on it", name)
	case errors.As(err, &dnsErr):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s at %s is not reachable: its host name does not resolve (while %s)", name, address, what).
			WithRemedy("check the adapter's address and this server's DNS")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s at %s is not reachable: connection refused (while %s)", name, address, what).
			WithRemedy("check that %s is running and listening at the adapter's address", name)
	case errors.As(err, &ue):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s at %s is not reachable (while %s)", name, address, what).
			WithRemedy("check the adapter's address, and that %s is running and reachable from this server", name)
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "%s's answer to %s could not be used", name, what).
		WithRemedy("check that the adapter's address points at %s's HTTP API; this server's log has the cause", name)
}
