package deliver

import (
	"context"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
)

func TestUrgentAndGood(t *testing.T) {
	urgent := []string{"deploy.failed", "backup.failed", "svc.upgrade_failed", "security.scan_failed", "adapter.unhealthy",
		"subscription.disabled", "app.gave_up", "app.disk_stopped", "app.idle_stopped", "security.insecure_stopped", "security.below_minimum"}
	good := []string{"deploy.succeeded", "adapter.recovered", "security.recovered"}
	for _, k := range events.Catalogue() {
		wantUrgent, wantGood := slices.Contains(urgent, k.Name), slices.Contains(good, k.Name)
		if Urgent(k.Name) != wantUrgent || Good(k.Name) != wantGood {
			t.Errorf("%s: urgent %t, good %t; want %t, %t", k.Name, Urgent(k.Name), Good(k.Name), wantUrgent, wantGood)
		}
	}
	for _, name := range append(urgent, good...) {
		if _, ok := events.Lookup(name); !ok {
			t.Errorf("%s is not in the catalogue; the lists above are out of date", name)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST.": true, "mail.localhost": true, "127.0.0.1": true, "127.8.9.10": true,
		"::1": true, "[::1]": true, "::ffff:127.0.0.1": true,
		"": false, "localhost.example.com": false, "10.0.0.1": false, "0.0.0.0": false, "::": false, "smtp.example.com": false, "127.0.0.1.nip.io": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %t; want %t", host, got, want)
		}
	}
}

func TestRedactURLSecrets(t *testing.T) {
	u, _ := url.Parse("https://user:pw-123456@hooks.example.com/services/T1/B2/s3cr3tT0k3n?sig=abcdef123")
	text := "bad request for https://user:pw-123456@hooks.example.com/services/T1/B2/s3cr3tT0k3n?sig=abcdef123 (path /services/T1/B2/s3cr3tT0k3n, token s3cr3tT0k3n, sig abcdef123, pw pw-123456)"
	got := Redact(text, URLSecrets(u)...)
	for _, s := range []string{"s3cr3tT0k3n", "abcdef123", "pw-123456"} {
		if strings.Contains(got, s) {
			t.Errorf("Redact left %q in %q", s, got)
		}
	}
	if !strings.Contains(got, "bad request for") || Redact("abc", "abc") != "abc" {
		t.Errorf("Redact removed more than the secrets: %q", got)
	}
}

func TestExplain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	_, refused := net.Dial("tcp", closed)
	_, dnsErr := net.DefaultResolver.LookupHost(context.Background(), "no-such-host.invalid")
	for _, tt := range []struct {
		err  error
		code errcode.Code
		says string
	}{
		{refused, errcode.AdapterUnavailable, "x is not reachable: connection refused"},
		{&url.Error{Op: "Post", URL: "https://h/secret", Err: refused}, errcode.AdapterUnavailable, "x is not reachable: connection refused"},
		{dnsErr, errcode.AdapterUnavailable, "its host name does not resolve"},
		{context.DeadlineExceeded, errcode.AdapterUnavailable, "x did not answer in time"},
		{context.Canceled, errcode.AdapterUnavailable, "cancelled"},
		{&url.Error{Op: "Post", URL: "https://h/secret", Err: errors.New("odd secret failure")}, errcode.AdapterFailed, "x failed: odd [redacted] failure"},
	} {
		got := Explain("x", tt.err, "secret")
		e, ok := errcode.As(got)
		if !ok || e.Code != tt.code || !strings.Contains(got.Error(), tt.says) || strings.Contains(got.Error(), "secret") {
			t.Errorf("Explain(%v) = %v; want %s saying %q, without the secret", tt.err, got, tt.code, tt.says)
		}
	}
	if !errors.Is(Explain("x", &url.Error{Err: context.DeadlineExceeded}), context.DeadlineExceeded) {
		t.Error("Explain lost its cause")
	}
}

func TestDoQuotesFirstLineOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("  invalid_payload \x00 for s3cr3t\nsecond line\n" + strings.Repeat("x", 1000)))
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	_, err := Do(Client(nil), req, "the receiver", "s3cr3t")
	if err == nil || errcode.MessageOf(err) != "ADAPTER_FAILED: the receiver answered 400 Bad Request: invalid_payload   for [redacted]" {
		t.Errorf("Do = %v", err)
	}
}

// FuzzEncodeWords: the words of any text are printable ASCII of at most 75
// characters, and read back (as an HTTP or mail reader decodes them) as
// the text on one line.
func FuzzEncodeWords(f *testing.F) {
	for _, s := range []string{"shop: deploy failed", "Café ☕", "a\r\nBcc: x", "=?utf-8?q?x?=", "\xff\xfe", strings.Repeat("☕", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := EncodeWords(s)
		for _, w := range words {
			if len(w) > 75 && len(words) > 1 || strings.ContainsFunc(w, func(r rune) bool { return r < ' ' || r > '~' }) {
				t.Fatalf("%q gives the word %q", s, w)
			}
		}
		got, err := new(mime.WordDecoder).DecodeHeader(strings.Join(words, " "))
		if err != nil || got != OneLine(s) {
			t.Fatalf("%q encodes as %q, which reads back as %q (%v); want %q", s, words, got, err, OneLine(s))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("%q reads back as invalid UTF-8", s)
		}
	})
}
