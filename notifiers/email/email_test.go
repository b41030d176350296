package email

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/notifiers/internal/notifytest"
)

var sentAt = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// open makes an adapter the way the adapters service does (Validate with
// the names of the credentials, then Open) for the server ms.
func open(t *testing.T, ms *mailServer, settings map[string]string, password string) *Email {
	t.Helper()
	s := map[string]string{"host": ms.host(), "port": ms.port(), "from": "svc <svc@example.com>", "to": "ops@example.com, Ann Lee <ann@example.com>"}
	for k, v := range settings {
		s[k] = v
	}
	var creds []string
	if password != "" {
		creds = []string{"password"}
	}
	if err := Kind().Validate(s, creds); err != nil {
		t.Fatalf("Validate(%v): %v", s, err)
	}
	inst, err := Kind().Open(context.Background(), adapters.Config{ID: "adp_mail", Settings: s, Credentials: map[string]string{"password": password}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e := inst.(*Email)
	e.now = func() time.Time { return sentAt }
	return e
}

func withAuth(ca *notifytest.CA) map[string]string {
	return map[string]string{"username": testUser, "ca_file": ca.File}
}

// parse reads a received mail as a mail reader does and decodes its body.
func parse(t *testing.T, r received) (*mail.Message, string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(r.data))
	if err != nil {
		t.Fatalf("the mail does not parse: %v\n%s", err, r.data)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatalf("the body is not quoted-printable: %v", err)
	}
	return msg, strings.ReplaceAll(string(body), "\r\n", "\n")
}

func TestNotifySendsMailOverSTARTTLS(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	e := open(t, ms, withAuth(ca), testPass)

	if err := e.Notify(context.Background(), notifytest.DeployFailed()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if got, want := ms.commands(), []string{"EHLO", "STARTTLS", "EHLO", "AUTH", "MAIL", "RCPT", "RCPT", "DATA", "QUIT"}; !slices.Equal(got, want) {
		t.Errorf("the client said %v; want %v", got, want)
	}
	if got, want := ms.authAttempts(), []authAttempt{{mech: "PLAIN", user: testUser, pass: testPass, tls: true}}; !slices.Equal(got, want) {
		t.Errorf("authentication %+v; want PLAIN once, over TLS", got)
	}
	mails := ms.received()
	if len(mails) != 1 {
		t.Fatalf("the server received %d mails; want 1", len(mails))
	}
	if m := mails[0]; m.from != "svc@example.com" || !slices.Equal(m.to, []string{"ops@example.com", "ann@example.com"}) {
		t.Errorf("envelope from %q to %v", m.from, m.to)
	}
	msg, body := parse(t, mails[0])
	want := map[string]string{
		"From":                      `"svc" <svc@example.com>`,
		"To":                        `<ops@example.com>, "Ann Lee" <ann@example.com>`,
		"Subject":                   "shop: deploy failed",
		"Date":                      "Fri, 01 May 2026 12:00:00 +0000",
		"Mime-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
		"Auto-Submitted":            "auto-generated",
		"X-Svc-Event":               "deploy.failed",
	}
	got := map[string]string{}
	for k := range msg.Header {
		if k != "Message-Id" {
			got[k] = msg.Header.Get(k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if id := msg.Header.Get("Message-Id"); !regexp.MustCompile(`^<[0-9a-f]{32}@example\.com>$`).MatchString(id) {
		t.Errorf("Message-ID %q", id)
	}
	if d, err := msg.Header.Date(); err != nil || !d.Equal(sentAt) {
		t.Errorf("Date reads as %v (%v)", d, err)
	}
	wantBody := "shop: deploy failed (deployment_id dep_01, spec_id spc_01, trigger push, error_code BUILD_FAILED, message npm ci exited with status 1)\n" +
		"\n" +
		"deployment_id: dep_01\nspec_id: spc_01\ntrigger: push\nerror_code: BUILD_FAILED\nmessage: npm ci exited with status 1\n" +
		"\n" +
		"Open in svc: https://svc.example.com/apps/app_01/deploys\n"
	if body != wantBody {
		t.Errorf("body:\n%s\nwant:\n%s", body, wantBody)
	}
}

func TestAuthLoginWhenPlainIsNotOffered(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t), mechs: []string{sasl.Login}})
	e := open(t, ms, withAuth(ca), testPass)
	if err := e.Notify(context.Background(), notifytest.DeployFailed()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if got := ms.authAttempts(); len(got) != 1 || got[0] != (authAttempt{mech: "LOGIN", user: testUser, pass: testPass, tls: true}) {
		t.Errorf("authentication %+v; want LOGIN once, over TLS", got)
	}
	if len(ms.received()) != 1 {
		t.Errorf("the server received %d mails", len(ms.received()))
	}
}

func TestRefusesServerWithoutSTARTTLS(t *testing.T) {
	ms := startServer(t, serverOptions{}) // no TLS: STARTTLS is not offered
	e := open(t, ms, map[string]string{"username": testUser}, testPass)
	for name, err := range map[string]error{"Notify": e.Notify(context.Background(), notifytest.DeployFailed()), "Check": e.Check(context.Background())} {
		notifytest.NoSecret(t, err, errcode.AdapterFailed, testPass)
		if !strings.Contains(err.Error(), "does not offer STARTTLS; nothing was sent") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := ms.commands(); !slices.Equal(got, []string{"EHLO", "EHLO"}) {
		t.Errorf("the client said %v; want only EHLO on each connection", got)
	}
	if len(ms.authAttempts()) != 0 || len(ms.received()) != 0 {
		t.Errorf("credentials %v or mail %v went over a connection without TLS", ms.authAttempts(), ms.received())
	}
}

func TestRefusesUntrustedCertificate(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	other := notifytest.NewCA(t, "another CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	e := open(t, ms, withAuth(other), testPass)
	err := e.Notify(context.Background(), notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, testPass)
	if !strings.Contains(err.Error(), "presented a certificate this server does not trust: it is signed by an unknown authority") {
		t.Errorf("Notify with the wrong CA: %v", err)
	}
	if got := ms.commands(); !slices.Equal(got, []string{"EHLO", "STARTTLS"}) {
		t.Errorf("the client said %v; want it to stop at the failed handshake", got)
	}
	if len(ms.authAttempts()) != 0 || len(ms.received()) != 0 {
		t.Errorf("credentials %v or mail %v went to a server the client does not trust", ms.authAttempts(), ms.received())
	}
}

func TestSubjectCannotAddHeaders(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	e := open(t, ms, withAuth(ca), testPass)
	for _, name := range []string{
		"shop\r\nBcc: evil@example.net\r\n\r\nInjected body",
		"shop\nBcc: evil@example.net",
		"shop\rBcc: evil@example.net",
		"shop\u2028Bcc: evil@example.net",
		"=?utf-8?q?shop=0D=0ABcc:_evil@example.net?=",
	} {
		ms.mu.Lock()
		ms.mails = nil
		ms.mu.Unlock()
		m := notifytest.Rendered("app.created", name, map[string]any{"name": name, "slug": "shop"})
		if err := e.Notify(context.Background(), m); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		mails := ms.received()
		if len(mails) != 1 || !slices.Equal(mails[0].to, []string{"ops@example.com", "ann@example.com"}) {
			t.Fatalf("mails %+v; want one to the configured recipients only", mails)
		}
		msg, body := parse(t, mails[0])
		for k := range msg.Header {
			if !slices.Contains([]string{"From", "To", "Subject", "Date", "Message-Id", "Mime-Version", "Content-Type", "Content-Transfer-Encoding", "Auto-Submitted", "X-Svc-Event"}, k) {
				t.Errorf("app name %q added the header %s: %q", name, k, msg.Header.Get(k))
			}
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if want := strings.Join(strings.Fields(name), " ") + ": app created"; err != nil || strings.Join(strings.Fields(subject), " ") != want {
			t.Errorf("Subject %q decodes to %q (%v); want %q", msg.Header.Get("Subject"), subject, err, want)
		}
		if strings.Contains(subject, "\n") || strings.Contains(subject, "\r") {
			t.Errorf("Subject %q holds a line break", subject)
		}
		if !strings.HasPrefix(body, strings.Fields(name)[0]) {
			t.Errorf("body %q; want it to start with the line", body)
		}
	}
}

func TestSubjectNotASCII(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	e := open(t, ms, withAuth(ca), testPass)
	for _, tt := range []struct{ app, want string }{
		{"Café ☕", "Café ☕: app created"},
		{strings.Repeat("☕", 300), strings.Repeat("☕", maxSubject-1) + "…"},
	} {
		ms.mu.Lock()
		ms.mails = nil
		ms.mu.Unlock()
		if err := e.Notify(context.Background(), notifytest.Rendered("app.created", tt.app, map[string]any{"name": tt.app, "slug": "x"})); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		raw := ms.received()[0].data
		for line := range strings.SplitSeq(string(raw), "\r\n") {
			if len(line) > 998 {
				t.Errorf("a line of %d bytes; SMTP allows 998", len(line))
			}
		}
		msg, _ := parse(t, ms.received()[0])
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil || subject != tt.want {
			t.Errorf("Subject %q decodes to %q (%v); want %q", msg.Header.Get("Subject"), subject, err, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	if err := open(t, ms, withAuth(ca), testPass).Check(context.Background()); err != nil {
		t.Fatalf("Check against a live server: %v", err)
	}
	if got, want := ms.commands(), []string{"EHLO", "STARTTLS", "EHLO", "AUTH", "QUIT"}; !slices.Equal(got, want) {
		t.Errorf("Check said %v; want %v", got, want)
	}
	if len(ms.received()) != 0 {
		t.Errorf("Check sent %d mails", len(ms.received()))
	}

	err := open(t, ms, withAuth(ca), "wrong-"+testPass).Check(context.Background())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, testPass)
	if !strings.Contains(err.Error(), "refused the username and password") {
		t.Errorf("Check with a wrong password: %v", err)
	}

	down := startServer(t, serverOptions{tls: ca.ServerTLS(t)})
	e := open(t, down, withAuth(ca), testPass)
	addr := down.addr
	down.stop()
	for name, err := range map[string]error{"Check": e.Check(context.Background()), "Notify": e.Notify(context.Background(), notifytest.DeployFailed())} {
		notifytest.NoSecret(t, err, errcode.AdapterUnavailable, testPass)
		if !strings.Contains(err.Error(), "the SMTP server at "+addr+" is not reachable: connection refused") {
			t.Errorf("%s with the server down: %v", name, err)
		}
	}
}

func TestRecipientRefused(t *testing.T) {
	ca := notifytest.NewCA(t, "smtp CA")
	ms := startServer(t, serverOptions{tls: ca.ServerTLS(t), refuse: []string{"ann@example.com"}})
	err := open(t, ms, withAuth(ca), testPass).Notify(context.Background(), notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, testPass)
	if !strings.Contains(err.Error(), "refused the recipient ann@example.com: 550 5.1.1 No such user here") {
		t.Errorf("Notify with a refused recipient: %v", err)
	}
	if len(ms.received()) != 0 {
		t.Errorf("a mail went out although a recipient was refused")
	}
}

func TestBoundedByContext(t *testing.T) {
	addr := silent(t)
	host, port, _ := strings.Cut(addr, ":")
	e, err := New(map[string]string{"host": host, "port": port, "from": "svc@example.com", "to": "ops@example.com"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = e.Notify(ctx, notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterUnavailable)
	if !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("Notify to a server that never greets: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Notify took %s past its context's deadline", d)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Check(ctx) }()
	cancel()
	select {
	case err := <-done:
		notifytest.NoSecret(t, err, errcode.AdapterUnavailable)
	case <-time.After(10 * time.Second):
		t.Fatal("Check did not return after its context was cancelled")
	}
}

func TestLoopbackRelayWithoutTLS(t *testing.T) {
	ms := startServer(t, serverOptions{})
	e := open(t, ms, map[string]string{"starttls": "none"}, "")
	if err := e.Notify(context.Background(), notifytest.DeployFailed()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if got, want := ms.commands(), []string{"EHLO", "MAIL", "RCPT", "RCPT", "DATA", "QUIT"}; !slices.Equal(got, want) {
		t.Errorf("the client said %v; want %v", got, want)
	}
	if len(ms.received()) != 1 {
		t.Errorf("the relay received %d mails", len(ms.received()))
	}
}

func TestValidate(t *testing.T) {
	base := func(kv ...string) map[string]string {
		s := map[string]string{"host": "smtp.example.com", "from": "svc@example.com", "to": "ops@example.com"}
		for i := 0; i+1 < len(kv); i += 2 {
			s[kv[i]] = kv[i+1]
		}
		return s
	}
	many := make([]string, maxRecipients+1)
	for i := range many {
		many[i] = "u" + strings.Repeat("x", i) + "@example.com"
	}
	for _, tt := range []struct {
		settings map[string]string
		password bool
		field    string // empty: valid
	}{
		{base(), false, ""},
		{base("username", "svc", "port", "465", "to", `ops@example.com, "Lee, Ann" <ann@example.com>, ops@example.com`), true, ""},
		{base("host", "127.0.0.1", "starttls", "none"), false, ""},
		{base("host", "localhost", "starttls", "none"), false, ""},
		{base("host", "::1", "starttls", "none"), false, ""},
		{base("starttls", "none"), false, "config.starttls"},
		{base("host", "10.0.0.5", "starttls", "none"), false, "config.starttls"},
		{base("host", "localhost", "starttls", "none", "username", "svc"), true, "config.starttls"},
		{base("host", "localhost", "starttls", "none"), true, "config.starttls"},
		{base("starttls", "optional"), false, "config.starttls"},
		{base("port", "0"), false, "config.port"},
		{base("port", "70000"), false, "config.port"},
		{base("port", "smtp"), false, "config.port"},
		{base("host", ""), false, "config.host"},
		{base("host", "smtp.example.com/x"), false, "config.host"},
		{base("host", "smtp example.com"), false, "config.host"},
		{base("from", ""), false, "config.from"},
		{base("from", "not an address"), false, "config.from"},
		{base("from", "a@example.com, b@example.com"), false, "config.from"},
		{base("to", ""), false, "config.to"},
		{base("to", "ops"), false, "config.to"},
		{base("to", "ops@example.com; ann@example.com"), false, "config.to"},
		{base("to", "ops@example.com,\r\nBcc: evil@example.net"), false, "config.to"},
		{base("to", "undisclosed-recipients:;"), false, "config.to"},
		{base("to", strings.Join(many, ",")), false, "config.to"},
		{base("username", "svc"), false, "config.username"},
		{base(), true, "config.username"},
		{base("username", "svc\r\nX: y"), true, "config.username"},
	} {
		var creds []string
		if tt.password {
			creds = []string{"password"}
		}
		notifytest.Validated(t, Kind().Validate(tt.settings, creds), tt.field, fmt.Sprintf("%v, password %t", tt.settings, tt.password))
	}
}

// FuzzParseRecipients: an accepted list names at least one and at most
// maxRecipients distinct addresses SMTP can carry, and formatted as the To
// header formats them, reads back as the same list.
func FuzzParseRecipients(f *testing.F) {
	for _, s := range []string{"ops@example.com", `"Lee, Ann" <ann@example.com>, b@x`, "=?utf-8?q?A=0D=0Ab?= <a@b>", "a@b,,c@d", "g: a@b, c@d;", "<@route:a@b>", "\"a\\\r\nb\"@x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := parseRecipients(s)
		if err != nil {
			return
		}
		if len(list) == 0 || len(list) > maxRecipients {
			t.Fatalf("%q read as %d recipients", s, len(list))
		}
		formatted := make([]string, len(list))
		seen := map[string]bool{}
		for i, a := range list {
			if !plainAddress(a.Address) || seen[strings.ToLower(a.Address)] {
				t.Fatalf("%q gave the address %q (repeated: %t)", s, a.Address, seen[strings.ToLower(a.Address)])
			}
			seen[strings.ToLower(a.Address)] = true
			formatted[i] = a.String()
			if strings.ContainsAny(formatted[i], "\r\n") {
				t.Fatalf("%q formats as %q, with a line break", s, formatted[i])
			}
		}
		again, err := parseRecipients(strings.Join(formatted, ", "))
		if err != nil {
			t.Fatalf("%q formats as %q, which does not read back: %v", s, strings.Join(formatted, ", "), err)
		}
		for i := range list {
			if again[i].Address != list[i].Address {
				t.Fatalf("%q: %q reads back as %q", s, list[i].Address, again[i].Address)
			}
		}
	})
}

// BenchmarkNotify: mails per second to an SMTP server on loopback, each a
// session of its own (connect, EHLO, STARTTLS, AUTH, one mail, QUIT).
func BenchmarkNotify(b *testing.B) {
	ca := notifytest.NewCA(b, "smtp CA")
	ms := startServer(b, serverOptions{tls: ca.ServerTLS(b)})
	e, err := New(map[string]string{"host": ms.host(), "port": ms.port(), "from": "svc@example.com", "to": "ops@example.com",
		"username": testUser, "ca_file": ca.File}, testPass)
	if err != nil {
		b.Fatal(err)
	}
	m := notifytest.DeployFailed()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Notify(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}
