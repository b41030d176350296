// Package email is the email notification adapter: it sends each message
// as a plain-text mail over SMTP, through a submission server (port 587)
// or a relay on this machine. The client is the standard library's
// net/smtp, bounded by the caller's context (a deadline on the
// connection).
//
// Security: STARTTLS is required by default, verified against the
// system's roots or the operator's ca_file, and a server that does not
// offer it is refused before anything is sent; credentials are sent only
// after STARTTLS (AUTH PLAIN, or LOGIN where the server offers only that).
// starttls "none" is accepted only for a relay on the loopback interface,
// and then without credentials. The subject cannot add a header (line
// breaks are removed, text that is not ASCII is encoded as RFC 2047
// words), and no error carries the password. The health check connects,
// says EHLO, starts TLS, authenticates when it has credentials and quits:
// it sends no mail.
//
// This package must not touch the store, HTTP or another adapter.
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
)

// Interface guards.
var (
	_ adapters.Instance = (*Email)(nil)
	_ notify.Notifier   = (*Email)(nil)
	_ smtp.Auth         = loginAuth{}
)

// STARTTLS modes.
const (
	startTLSRequired = "required"
	startTLSNone     = "none"
)

// maxRecipients bounds the to list.
const maxRecipients = 50

// Kind declares the email notification adapter.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryNotification,
		Name:     "email",
		Description: "Sends events as plain-text mail over SMTP with STARTTLS: the subject, one line, the event's fields " +
			"and a link into the console",
		Settings: []adapters.Setting{
			{Name: "host", Description: "Host name or address of the SMTP server (a submission server, or a relay on this machine)", Required: true, Example: "smtp.example.com"},
			{Name: "port", Description: "Port of the SMTP server", Default: "587"},
			{Name: "from", Description: "Sender address, optionally with a name", Required: true, Example: "svc <svc@example.com>"},
			{Name: "to", Description: fmt.Sprintf("Recipients, separated by commas (at most %d)", maxRecipients), Required: true, Example: "ops@example.com, Ann <ann@example.com>"},
			{Name: "username", Description: "User to authenticate as (after STARTTLS); empty to send without authenticating", Example: "svc@example.com"},
			{Name: "starttls", Description: "required (the default: refuse a server that does not offer STARTTLS), or none for a relay on the loopback interface, without credentials", Default: startTLSRequired},
			{Name: "ca_file", Description: "PEM file of the CA that signed the server's certificate; empty for the system's roots", Example: "/etc/svc/smtp-ca.pem"},
			{Name: "password", Description: "Password of username", Credential: true},
		},
		Validate: func(settings map[string]string, creds []string) error {
			_, err := configOf(settings, slices.Contains(creds, "password"))
			return err
		},
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			return New(c.Settings, c.Credentials["password"])
		},
	}
}

// config is a checked configuration.
type config struct {
	host     string
	port     int
	from     *mail.Address
	to       []*mail.Address
	username string
	starttls bool
	caFile   string
}

func (c config) addr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// configOf checks the settings; withPassword says a password is set.
func configOf(s map[string]string, withPassword bool) (config, error) {
	cfg := config{host: strings.Trim(strings.TrimSpace(s["host"]), "[]"), username: s["username"], caFile: s["ca_file"]}
	port := s["port"]
	if port == "" {
		port = "587"
	}
	var err error
	cfg.port, err = strconv.Atoi(port)
	mode := s["starttls"]
	if mode == "" {
		mode = startTLSRequired
	}
	cfg.starttls = mode == startTLSRequired
	switch {
	case cfg.host == "" || strings.ContainsFunc(cfg.host, func(r rune) bool { return r <= ' ' || strings.ContainsRune("/,@?#[]", r) }):
		return config{}, errcode.Invalid("config.host", "host must be a host name or address such as smtp.example.com")
	case err != nil || cfg.port < 1 || cfg.port > 65535:
		return config{}, errcode.Invalid("config.port", "port must be a number from 1 to 65535")
	case mode != startTLSRequired && mode != startTLSNone:
		return config{}, errcode.Invalid("config.starttls", "starttls must be required or none")
	case mode == startTLSNone && !deliver.IsLoopback(cfg.host):
		return config{}, errcode.Invalid("config.starttls", "starttls none is accepted only for a relay on this machine (localhost or a loopback address): mail to %s would cross the network in the clear", cfg.host).
			WithRemedy("use starttls required with the server's submission port (587)")
	case mode == startTLSNone && (cfg.username != "" || withPassword):
		return config{}, errcode.Invalid("config.starttls", "credentials are sent only after STARTTLS: with starttls none, leave username and password unset")
	case cfg.username != "" && !withPassword, cfg.username == "" && withPassword:
		return config{}, errcode.Invalid("config.username", "username and password go together: set both to authenticate, or neither")
	case strings.ContainsFunc(cfg.username, unicode.IsControl):
		return config{}, errcode.Invalid("config.username", "username must be one line")
	}
	cfg.from, err = mail.ParseAddress(s["from"])
	if err != nil || !plainAddress(cfg.from.Address) {
		return config{}, errcode.Invalid("config.from", "from must be one address, optionally with a name, such as svc <svc@example.com>")
	}
	cfg.to, err = parseRecipients(s["to"])
	if err != nil {
		return config{}, err
	}
	return cfg, nil
}

// parseRecipients reads the to setting: addresses separated by commas,
// each optionally with a name (RFC 5322), at least one and at most
// maxRecipients once each (a repeated address is kept once).
func parseRecipients(s string) ([]*mail.Address, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errcode.Invalid("config.to", "to must name at least one recipient, such as ops@example.com")
	}
	list, err := mail.ParseAddressList(s)
	if err != nil {
		return nil, errcode.Invalid("config.to", "to must be addresses separated by commas, such as ops@example.com, Ann <ann@example.com>")
	}
	var out []*mail.Address
	seen := map[string]bool{}
	for _, a := range list {
		if !plainAddress(a.Address) {
			return nil, errcode.Invalid("config.to", "to must be addresses separated by commas, such as ops@example.com, Ann <ann@example.com>")
		}
		key := strings.ToLower(a.Address)
		if !seen[key] {
			seen[key] = true
			out = append(out, a)
		}
	}
	switch {
	case len(out) == 0:
		return nil, errcode.Invalid("config.to", "to must name at least one recipient, such as ops@example.com")
	case len(out) > maxRecipients:
		return nil, errcode.Invalid("config.to", "to names %d recipients; at most %d", len(out), maxRecipients).
			WithRemedy("send to a mailing list instead")
	}
	return out, nil
}

// plainAddress: an address SMTP can carry in a command line: no space or
// control character, one @ with something on each side.
func plainAddress(a string) bool {
	local, domain, ok := strings.Cut(a, "@")
	return ok && local != "" && domain != "" && !strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsControl(r) })
}

// Email sends messages through one SMTP server. It is safe for concurrent
// use: each message is a connection of its own.
type Email struct {
	cfg      config
	password string
	tls      *tls.Config
	who      string
	// now and localName are the clock and the name said in EHLO.
	now       func() time.Time
	localName string
}

// New makes an email adapter from its settings and password (empty:
// none).
func New(settings map[string]string, password string) (*Email, error) {
	cfg, err := configOf(settings, password != "")
	if err != nil {
		return nil, err
	}
	conf, err := deliver.TLSConfig(cfg.host, cfg.caFile)
	if err != nil {
		return nil, err
	}
	return &Email{cfg: cfg, password: password, tls: conf, who: "the SMTP server at " + cfg.addr(), now: time.Now, localName: localName()}, nil
}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]{0,252}[A-Za-z0-9])?$`)

// localName is this machine's host name for EHLO, or localhost when it is
// not a plain host name.
func localName() string {
	h, err := os.Hostname()
	if err != nil || !hostName.MatchString(h) {
		return "localhost"
	}
	return h
}

// Notify sends m to every recipient, in one mail. A recipient the server
// refuses fails the whole message (nothing is sent), naming the address.
func (e *Email) Notify(ctx context.Context, m notify.Message) error {
	msg, err := compose(m, e.cfg.from, e.cfg.to, e.now(), messageID(e.cfg.from))
	if err != nil {
		return err
	}
	return e.session(ctx, func(c *smtp.Client) error {
		if err := c.Mail(e.cfg.from.Address); err != nil {
			return e.refused("the sender "+e.cfg.from.Address, err)
		}
		for _, to := range e.cfg.to {
			if err := c.Rcpt(to.Address); err != nil {
				return e.refused("the recipient "+to.Address, err)
			}
		}
		w, err := c.Data()
		if err != nil {
			return e.refused("the message", err)
		}
		if _, err := w.Write(msg); err != nil {
			return e.failed(err)
		}
		if err := w.Close(); err != nil {
			return e.refused("the message", err)
		}
		return nil
	})
}

// Check connects, says EHLO, starts TLS, authenticates when it has
// credentials and quits; it sends no mail.
func (e *Email) Check(ctx context.Context) error {
	return e.session(ctx, func(*smtp.Client) error { return nil })
}

// Capabilities of the adapter.
func (e *Email) Capabilities() map[string]any {
	mode := startTLSRequired
	if !e.cfg.starttls {
		mode = startTLSNone
	}
	return map[string]any{"starttls": mode, "recipients": len(e.cfg.to), "authenticates": e.cfg.username != ""}
}

// session runs fn on a connection that has said EHLO, started TLS and
// authenticated as configured, then quits. Everything is bounded by ctx.
func (e *Email) session(ctx context.Context, fn func(c *smtp.Client) error) (err error) {
	ctx, cancel := deliver.Bound(ctx)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.cfg.addr())
	if err != nil {
		return deliver.Explain(e.who, err, e.password)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return e.failed(err)
	}
	// A cancelled context ends whatever the connection waits for.
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })()
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = deliver.Explain(e.who, ctx.Err())
		}
	}()

	c, err := smtp.NewClient(conn, e.cfg.host)
	if err != nil {
		return e.refused("the connection", err)
	}
	defer c.Close()
	if err := c.Hello(e.localName); err != nil {
		return e.refused("EHLO", err)
	}
	if e.cfg.starttls {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errcode.New(errcode.AdapterFailed, "%s does not offer STARTTLS; nothing was sent, since starttls is required", e.who).
				WithRemedy("use the server's submission port (587), where it offers STARTTLS")
		}
		if err := c.StartTLS(e.tls); err != nil {
			return e.refused("STARTTLS", err)
		}
	}
	if e.cfg.username != "" {
		if err := e.auth(c); err != nil {
			return err
		}
	}
	if err := fn(c); err != nil {
		return err
	}
	if err := c.Quit(); err != nil {
		return e.refused("QUIT", err)
	}
	return nil
}

// auth authenticates over TLS only, with PLAIN, or LOGIN where the server
// offers only that.
func (e *Email) auth(c *smtp.Client) error {
	if _, ok := c.TLSConnectionState(); !ok {
		return errcode.New(errcode.Internal, "refusing to send credentials to %s before STARTTLS", e.who)
	}
	ok, mechs := c.Extension("AUTH")
	offered := strings.Fields(strings.ToUpper(mechs))
	var a smtp.Auth
	switch {
	case ok && slices.Contains(offered, "PLAIN"):
		a = smtp.PlainAuth("", e.cfg.username, e.password, e.cfg.host)
	case ok && slices.Contains(offered, "LOGIN"):
		a = loginAuth{username: e.cfg.username, password: e.password}
	default:
		return errcode.New(errcode.AdapterFailed, "%s offers no authentication this adapter speaks (PLAIN or LOGIN) after STARTTLS; it offers %q", e.who, mechs).
			WithRemedy("leave username and password unset if the server accepts mail without them, or use another server")
	}
	if err := c.Auth(a); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) && tp.Code == 535 {
			return errcode.New(errcode.AdapterFailed, "%s refused the username and password (%d)", e.who, tp.Code).
				WithRemedy("check the adapter's username and password")
		}
		return e.refused("authentication", err)
	}
	return nil
}

// refused explains an error of a step: a reply of the server (4xx:
// unavailable for now, 5xx: refused), or a failure to talk to it.
func (e *Email) refused(what string, err error) error {
	var tp *textproto.Error
	if !errors.As(err, &tp) {
		return e.failed(err)
	}
	code := errcode.AdapterFailed
	if tp.Code >= 400 && tp.Code < 500 {
		code = errcode.AdapterUnavailable
	}
	msg := deliver.Redact(strings.Join(strings.Fields(tp.Msg), " "), e.password)
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	return errcode.New(code, "%s refused %s: %d %s", e.who, what, tp.Code, msg).WithDetail("smtp_code", tp.Code)
}

func (e *Email) failed(err error) error { return deliver.Explain(e.who, err, e.password) }

// loginAuth is the LOGIN mechanism (username, then password, each asked
// for by the server), offered by servers that lack PLAIN. Like
// smtp.PlainAuth it refuses a connection without TLS.
type loginAuth struct{ username, password string }

func (a loginAuth) Start(s *smtp.ServerInfo) (string, []byte, error) {
	if !s.TLS {
		return "", nil, errors.New("refusing LOGIN over a connection without TLS")
	}
	return "LOGIN", nil, nil
}

func (a loginAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	switch strings.ToLower(strings.TrimSpace(string(fromServer))) {
	case "username:", "user name", "username":
		return []byte(a.username), nil
	case "password:", "password":
		return []byte(a.password), nil
	}
	return nil, errors.New("the server asked LOGIN for something other than the username and the password")
}
