package email

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// mailServer is a real SMTP server (go-smtp) for one test: it offers
// STARTTLS when it has a TLS configuration, takes AUTH before TLS as well
// (so that only the client's discipline keeps credentials off the clear
// connection), and records what it was told.
type mailServer struct {
	addr string
	// mechs are the AUTH mechanisms offered; user and pass are accepted.
	mechs      []string
	user, pass string
	// refuse lists recipients answered 550.
	refuse []string
	// stop closes the server and waits for it.
	stop func()

	mu         sync.Mutex
	mails      []received
	auths      []authAttempt
	transcript bytes.Buffer
}

type received struct {
	from string
	to   []string
	data []byte
}

type authAttempt struct {
	mech, user, pass string
	tls              bool
}

type serverOptions struct {
	tls    *tls.Config // nil: no STARTTLS
	mechs  []string
	refuse []string
}

const (
	testUser = "svc@example.com"
	testPass = "p4ss-W0rd-s3cr3t"
)

func startServer(t testing.TB, o serverOptions) *mailServer {
	t.Helper()
	ms := &mailServer{mechs: o.mechs, user: testUser, pass: testPass, refuse: o.refuse}
	if ms.mechs == nil {
		ms.mechs = []string{sasl.Plain}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.addr = l.Addr().String()
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{ms: ms, conn: c}, nil }))
	s.Domain = "localhost"
	s.TLSConfig = o.tls
	s.AllowInsecureAuth = true
	s.Debug = writerFunc(func(b []byte) (int, error) {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		return ms.transcript.Write(b)
	})
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	s.ErrorLog = silentLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	ms.stop = sync.OnceFunc(func() {
		_ = s.Close()
		// Close closes the listeners Serve has taken; this one too, in case
		// Serve has not started yet. Its port refuses connections from now on.
		_ = l.Close()
		<-done
	})
	t.Cleanup(ms.stop)
	return ms
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

type silentLog struct{}

func (silentLog) Printf(string, ...any) {}
func (silentLog) Println(...any)        {}

func (ms *mailServer) host() string { h, _, _ := net.SplitHostPort(ms.addr); return h }
func (ms *mailServer) port() string { _, p, _ := net.SplitHostPort(ms.addr); return p }

func (ms *mailServer) received() []received {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return slices.Clone(ms.mails)
}

func (ms *mailServer) authAttempts() []authAttempt {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return slices.Clone(ms.auths)
}

var command = regexp.MustCompile(`^(EHLO|HELO|STARTTLS|AUTH|MAIL|RCPT|DATA|QUIT|RSET|NOOP)\b`)

// commands lists the commands the client sent, in order (the server's
// replies begin with digits; the mail between DATA and its lone dot is
// skipped).
func (ms *mailServer) commands() []string {
	ms.mu.Lock()
	text := ms.transcript.String()
	ms.mu.Unlock()
	var out []string
	inData := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case inData:
			inData = line != "."
		case command.MatchString(line):
			verb := command.FindString(line)
			out = append(out, verb)
		case strings.HasPrefix(line, "354"):
			inData = true
		}
	}
	return out
}

type session struct {
	ms   *mailServer
	conn *smtp.Conn
	from string
	to   []string
}

func (s *session) tls() bool { _, ok := s.conn.TLSConnectionState(); return ok }

func (s *session) AuthMechanisms() []string { return s.ms.mechs }

func (s *session) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		s.ms.mu.Lock()
		s.ms.auths = append(s.ms.auths, authAttempt{mech: mech, user: user, pass: pass, tls: s.tls()})
		s.ms.mu.Unlock()
		if user != s.ms.user || pass != s.ms.pass {
			return smtp.ErrAuthFailed
		}
		return nil
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if slices.Contains(s.ms.refuse, to) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.ms.mu.Lock()
	s.ms.mails = append(s.ms.mails, received{from: s.from, to: s.to, data: b})
	s.ms.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

// loginServer is the server's side of AUTH LOGIN (go-sasl has only the
// client's).
type loginServer struct {
	step  int
	user  string
	check func(user, pass string) error
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if len(resp) == 0 {
			return []byte("Username:"), false, nil
		}
		fallthrough
	case 1:
		l.user, l.step = string(resp), 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		return nil, true, l.check(l.user, string(resp))
	}
	return nil, false, errors.New("unexpected LOGIN step")
}

// silent is a TCP listener that accepts connections and never says a
// word, like a server that hangs.
func silent(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
