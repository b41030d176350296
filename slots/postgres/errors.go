package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svchost/svc/internal/errcode"
)

// Error translation. The driver's errors become *errcode.Error by SQLSTATE
// class and by error type, never by message text:
//
//	SQLSTATE class 08 (connection), 53 (resources), 57 (operator intervention)   ADAPTER_UNAVAILABLE
//	any other SQLSTATE: 28 authentication, 42 privileges, 3D no such database …  ADAPTER_FAILED
//	not reachable: refused, DNS, reset, timeout, cancelled                        ADAPTER_UNAVAILABLE
//	TLS certificate not trusted                                                   ADAPTER_FAILED
//	anything else                                                                 ADAPTER_FAILED
//
// Messages name the server, the operation and the SQLSTATE. The adapter
// sends no password in the clear (roles get SCRAM verifiers; pgx proves the
// administrator's password without sending it, under SCRAM), the
// configuration's password is set outside any string the driver formats,
// and no message here includes one.
func (p *Postgres) translate(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	addr := p.cfg.addr()
	var (
		pgErr     *pgconn.PgError
		certErr   *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		dnsErr    *net.DNSError
		netErr    net.Error
	)
	switch {
	case errors.As(err, &pgErr):
		return sqlError(addr, what, pgErr)
	case errors.Is(err, context.Canceled):
		return errcode.New(errcode.AdapterUnavailable, "%s on postgres at %s was cancelled before the server answered", what, addr).
			WithRemedy("retry the request")
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || (errors.As(err, &netErr) && netErr.Timeout()):
		return errcode.New(errcode.AdapterUnavailable, "postgres at %s did not answer in time while %s", addr, what).
			WithRemedy("check that PostgreSQL is running and reachable from this server, and not overloaded")
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		return errcode.New(errcode.AdapterFailed, "postgres at %s presented a certificate this server does not trust while %s", addr, what).
			WithRemedy("set the adapter's ca_cert to the CA that signed the server's certificate, and use the host name it names")
	case errors.As(err, &dnsErr):
		return errcode.New(errcode.AdapterUnavailable, "postgres at %s is not reachable: its host name does not resolve (while %s)", addr, what).
			WithRemedy("check the adapter's host and this server's DNS")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.New(errcode.AdapterUnavailable, "postgres at %s is not reachable: connection refused (while %s)", addr, what).
			WithRemedy("check that PostgreSQL is running and listening at the adapter's host and port")
	case errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return errcode.New(errcode.AdapterUnavailable, "postgres at %s is not reachable, or closed the connection (while %s)", addr, what).
			WithRemedy("check that PostgreSQL is running and reachable from this server")
	}
	return errcode.New(errcode.AdapterFailed, "postgres at %s: %s failed", addr, what).
		WithRemedy("check the adapter's settings (sslmode, host, port) and the server's log")
}

// sqlError translates an error the server reported.
func sqlError(addr, what string, e *pgconn.PgError) error {
	code, class := errcode.AdapterFailed, ""
	if len(e.Code) >= 2 {
		class = e.Code[:2]
	}
	switch class {
	case "08", "53", "57":
		code = errcode.AdapterUnavailable
	}
	out := errcode.New(code, "postgres at %s refused %s: %s (SQLSTATE %s)", addr, what, e.Message, e.Code).WithDetail("sqlstate", e.Code)
	switch class {
	case "28":
		return out.WithRemedy("check the adapter's username and password, and that pg_hba.conf lets it connect from this server")
	case "42":
		return out.WithRemedy("the adapter's role must be a superuser, or have CREATEROLE and CREATEDB")
	case "3D":
		return out.WithRemedy("the adapter's database setting names a database the server does not have")
	case "53", "57":
		return out.WithRemedy("the server is overloaded, starting or shutting down: retry later")
	}
	return out
}
