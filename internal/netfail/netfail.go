// Package netfail explains why a service could not be talked to over the
// network, by the error's type and never by its text: a coded error whose
// message names the service and the kind of failure only (the same each
// time the same thing fails, so that health reasons compare), with a remedy,
// and whose cause is kept with secrets removed and never as a *url.Error
// (whose text is a whole URL).
//
//	cancelled, timed out, refused, reset, DNS          ADAPTER_UNAVAILABLE
//	certificate not trusted, not TLS                    ADAPTER_FAILED
//
// The adapters that talk to their services themselves use it (the
// notification adapters, the s3 backup storage). It must not import
// anything of the module but errcode.
package netfail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/svchost/svc/internal/errcode"
)

// Explain translates a failure to talk to who (for example "ntfy at
// ntfy.sh") into an error with a code; ok is false when err is none of the
// network failures above, and the caller says what it is.
func Explain(who string, err error, secrets ...string) (e *errcode.Error, ok bool) {
	err = Unwrap(err)
	cause := Cause(err, secrets...)
	var (
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		dnsErr  *net.DNSError
		netErr  net.Error
		opErr   *net.OpError
	)
	unavailable := func(format string, args ...any) *errcode.Error {
		return errcode.Wrap(cause, errcode.AdapterUnavailable, format, args...)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return unavailable("%s: cancelled before it answered", who).WithRemedy("retry"), true
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return unavailable("%s did not answer in time", who).
			WithRemedy("check that the server is up and reachable from this server, and not overloaded"), true
	case errors.As(err, &certErr):
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s presented a certificate this server does not trust: %s", who, certReason(certErr.Err)).
			WithRemedy("set ca_file to the PEM file of the CA that signed the server's certificate, and use the host name the certificate names"), true
	case errors.As(err, &recErr):
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s does not speak TLS on that port", who).
			WithRemedy("check the port, and whether the server expects TLS there"), true
	case errors.As(err, &dnsErr):
		return unavailable("%s is not reachable: its host name does not resolve", who).
			WithRemedy("check the host name and this server's DNS"), true
	case errors.Is(err, syscall.ECONNREFUSED):
		return unavailable("%s is not reachable: connection refused", who).
			WithRemedy("check that the server is running and listening at that host and port"), true
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return unavailable("%s is not reachable", who).WithRemedy("check the host, the port and the network between this server and it"), true
	case errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return unavailable("%s closed the connection", who).WithRemedy("check the server's log; retry later"), true
	}
	return nil, false
}

// Unwrap strips *url.Error layers (whose text is the whole URL).
func Unwrap(err error) error {
	var ue *url.Error
	for errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return err
}

// certReason says in a few words why a certificate is not trusted.
func certReason(err error) string {
	var (
		hostErr   x509.HostnameError
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &hostErr):
		return "it is not valid for this host name"
	case errors.As(err, &unknownCA):
		return "it is signed by an unknown authority"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "it has expired or is not yet valid"
	}
	return "it does not verify"
}

// Cause is err with its text's secrets removed; it unwraps to err and
// holds no secret itself (so that printing it with %#v shows none).
func Cause(err error, secrets ...string) error {
	return redacted{text: Redact(err.Error(), secrets...), err: err}
}

type redacted struct {
	text string
	err  error
}

func (r redacted) Error() string { return r.text }
func (r redacted) Unwrap() error { return r.err }

// Redact replaces every occurrence of each secret in s. Secrets shorter
// than four bytes are ignored (they would blot out ordinary words).
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}
