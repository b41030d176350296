package vaultsecrets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/hashicorp/vault/api"

	"github.com/svchost/svc/internal/errcode"
)

// Error translation. Vault's errors become *errcode.Error by HTTP status and
// by error type, never by message text:
//
//	not reachable (refused, DNS, reset, timeout)   ADAPTER_UNAVAILABLE
//	HTTP 503 (sealed, standby, not yet active)     ADAPTER_UNAVAILABLE
//	HTTP 401, 403, other 4xx; 5xx other than 503   ADAPTER_FAILED
//	TLS certificate not trusted, not TLS at all    ADAPTER_FAILED
//	HTTP 404 on a read                             NOT_FOUND (by the caller)
//
// Messages name the operation, the secret's key and the status. They never
// carry a token, a secret ID or a value, and nothing of Vault's response
// body, which can echo what was sent: the wrapped cause keeps only the
// method, the path and the status.

// op describes a request for its error messages.
type op struct {
	// what the adapter was doing, e.g. "writing secret API_KEY".
	what string
	// need is what the credentials' policy must allow, e.g. "create and
	// update on secret/data/svc/apps/*".
	need string
	// refused, if set, replaces the policy hint as the remedy of a 4xx.
	refused string
}

func (v *Vault) op(what, need string) op { return op{what: what, need: need} }

// responseError is what is kept of an answer with an error status.
type responseError struct {
	Method string
	Path   string
	Status int
}

func (e *responseError) Error() string {
	return fmt.Sprintf("vault answered %s %s with HTTP %d", e.Method, e.Path, e.Status)
}

// statusOf returns the HTTP status of a Vault error answer, or 0.
func statusOf(err error) int {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	var own *responseError
	if errors.As(err, &own) {
		return own.Status
	}
	return 0
}

// translate turns an error of Vault's client into a coded error.
func (v *Vault) translate(o op, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var re *api.ResponseError
	if errors.As(err, &re) {
		path := re.URL
		if u, perr := url.Parse(re.URL); perr == nil {
			path = u.Path
		}
		return v.statusError(o, re.StatusCode, &responseError{Method: re.HTTPMethod, Path: path, Status: re.StatusCode})
	}

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
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s was cancelled before vault answered", o.what).
			WithRemedy("retry the request")
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "vault at %s did not answer in time while %s", v.address, o.what).
			WithRemedy("check that vault is running and reachable from this server, and not overloaded")
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		return errcode.Wrap(err, errcode.AdapterFailed, "vault at %s presented a certificate this server does not trust while %s", v.address, o.what).
			WithRemedy("set the adapter's ca_cert to the CA that signed vault's certificate, and use the host name the certificate names")
	case errors.As(err, &notTLS):
		return errcode.Wrap(err, errcode.AdapterFailed, "vault at %s does not speak TLS, so %s failed", v.address, o.what).
			WithRemedy("use an http:// address for a vault listener without TLS, or enable TLS on it")
	case errors.As(err, &dnsErr):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "vault at %s is not reachable: its host name does not resolve (while %s)", v.address, o.what).
			WithRemedy("check the adapter's address and this server's DNS")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "vault at %s is not reachable: connection refused (while %s)", v.address, o.what).
			WithRemedy("check that vault is running and listening at the adapter's address")
	case errors.As(err, &ue):
		// Any other failure to get an answer: reset, unreachable host or
		// network, a connection closed before the answer.
		return errcode.Wrap(err, errcode.AdapterUnavailable, "vault at %s is not reachable (while %s)", v.address, o.what).
			WithRemedy("check the adapter's address, and that vault is running and reachable from this server")
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "vault's answer to %s could not be used", o.what).
		WithRemedy("check that the adapter's address points at vault's API; this server's log has the cause")
}

// statusError translates an answer with an error status.
func (v *Vault) statusError(o op, status int, cause error) *errcode.Error {
	ns := ""
	if v.namespace != "" {
		ns = " in namespace " + v.namespace
	}
	refused := o.refused
	if refused == "" && o.need != "" {
		if v.approle() {
			refused = fmt.Sprintf("check that the AppRole's token policies allow %s%s", o.need, ns)
		} else {
			refused = fmt.Sprintf("check that the token is valid and its policy allows %s%s", o.need, ns)
		}
	}
	switch {
	case status == 503:
		return errcode.Wrap(cause, errcode.AdapterUnavailable, "vault is sealed or not the active node, so it could not answer %s (HTTP 503)", o.what).
			WithRemedy("unseal vault, or point the adapter's address at the active node or at a load balancer in front of the cluster")
	case status == 401 || status == 403:
		return errcode.Wrap(cause, errcode.AdapterFailed, "vault refused %s (HTTP %d)", o.what, status).
			WithRemedy("%s", refused)
	case status == 404:
		remedy := o.refused
		if remedy == "" {
			remedy = fmt.Sprintf("check that the mount %s exists%s and is a KV version 2 secrets engine", v.mount, ns)
		}
		return errcode.Wrap(cause, errcode.AdapterFailed, "vault has nothing at the path used for %s (HTTP 404)", o.what).
			WithRemedy("%s", remedy)
	case status == 429:
		return errcode.Wrap(cause, errcode.AdapterFailed, "vault refused %s: rate limited (HTTP 429)", o.what).
			WithRemedy("retry later, or raise vault's rate limit quota for this path")
	case status >= 400 && status < 500:
		remedy := o.refused
		if remedy == "" {
			remedy = fmt.Sprintf("check the adapter's mount (%s), prefix (%s) and namespace; vault's audit log has the reason", v.mount, v.prefix)
		}
		return errcode.Wrap(cause, errcode.AdapterFailed, "vault refused %s (HTTP %d)", o.what, status).
			WithRemedy("%s", remedy)
	case status >= 500:
		return errcode.Wrap(cause, errcode.AdapterFailed, "vault failed %s (HTTP %d)", o.what, status).
			WithRemedy("vault's server log has the reason; retry once vault is healthy")
	}
	return errcode.Wrap(cause, errcode.AdapterFailed, "vault answered %s with HTTP %d", o.what, status).
		WithRemedy("check that the adapter's address points at vault's API, not a proxy or a redirect")
}
