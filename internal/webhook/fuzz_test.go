package webhook

import (
	"bufio"
	"bytes"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
)

// FuzzCheckURL: any string is checked without panicking; what is refused
// is VALID_INVALID about the url; what is accepted with the policy off has
// http(s), a host, no user, and no host that is, in any spelling, an
// address the rule refuses or a localhost name; it is accepted with the
// policy on too, and by Send's own check.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/x", "http://127.0.0.1/", "http://[::ffff:127.0.0.1]:80/", "http://2130706433/",
		"http://0x7f.1/", "http://0177.0.0.1/", "http://localhost./", "http://a.localhost/", "http://[fe80::1%25eth0]/",
		"http://user@host/", "https://8.8.8.8:443/", "http://[64:ff9b::a9fe:a9fe]/", "http://1.2.3.4.5/", "http://%31/"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allow bool) {
		err := CheckURL(raw, allow)
		if err != nil {
			if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != "url" {
				t.Fatalf("CheckURL(%q) = %v, want VALID_INVALID about url", raw, err)
			}
			return
		}
		if _, err := target(raw, allow, false); err != nil {
			t.Fatalf("CheckURL accepts %q, Send's check refuses it: %v", raw, err)
		}
		if allow {
			return
		}
		if err := CheckURL(raw, true); err != nil {
			t.Fatalf("%q accepted with the policy off, refused with it on: %v", raw, err)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Hostname() == "" || len(raw) > MaxURLBytes {
			t.Fatalf("accepted %q (%v)", raw, err)
		}
		host := strings.ToLower(u.Hostname())
		if a, err := netip.ParseAddr(host); err == nil && classify(a) != "" {
			t.Fatalf("accepted %q: %s is %s", raw, a, classify(a))
		}
		if a, ok := parseLegacyIPv4(host); ok && (classify(a) != "" || a.String() != host) {
			t.Fatalf("accepted %q: %s reads as %s", raw, host, a)
		}
		if localName(strings.TrimSuffix(host, ".")) {
			t.Fatalf("accepted %q: a localhost name", raw)
		}
	})
}

// FuzzCheckTemplate: any template source is checked without panicking and
// within bounded time; one that is accepted renders events (the sample,
// an event with a long list, an install event) within bounded time and
// size, never printing "<no value>".
func FuzzCheckTemplate(f *testing.F) {
	for _, h := range hostile {
		if len(h.tmpl) < 4096 {
			f.Add(h.tmpl)
		}
	}
	for _, s := range []string{`{"text": {{json .Subject}}}`, `{{range .Fields}}{{.Name}}{{end}}`, `{{.Data.x.y}}`,
		`{{default "a" .Data.b}}`, `{{printf "%5.2f|%-3s" .Data.n .Type}}`, `{{with .App}}{{.Name}}{{end}}`,
		`{{range $i, $e := .Data.reasons}}{{if gt $i 2}}{{break}}{{end}}{{$e}}{{end}}`, `{{json .Envelope}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		err := CheckTemplate(src, "text/plain")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("checking took %s", d)
		}
		if err != nil {
			if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != "payload_template" {
				t.Fatalf("CheckTemplate = %v, want VALID_INVALID about payload_template", err)
			}
			return
		}
		for _, ev := range []*events.Event{sampleEvent(), bigEvent(), installEvent("evt_i")} {
			start := time.Now()
			out, _ := Body(Request{Template: src, ContentType: "text/plain", Event: ev})
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("rendering took %s", d)
			}
			if len(out) > MaxBodyBytes {
				t.Fatalf("rendered %d bytes", len(out))
			}
			if bytes.Contains(out, []byte("<no value>")) && !strings.Contains(src, "no value") {
				t.Fatalf("rendered <no value>: %q", out)
			}
		}
	})
}

// FuzzCheckHeaders: any header is checked without panicking; one that is
// accepted is none svc sets or the connection owns, and goes over the wire
// as exactly that one header with that value.
func FuzzCheckHeaders(f *testing.F) {
	for _, s := range [][2]string{{"Authorization", "Bearer x"}, {"Svc-Event", "x"}, {"X-A", "a\r\nB: c"}, {"Host", "h"},
		{"x-y", "\tv "}, {"Proxy-Authorization", "p"}, {"X-Ü", "v"}, {"", ""}, {"Content-Type", "text/plain"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		err := CheckHeaders(map[string]string{name: value})
		if err != nil {
			if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != "headers" {
				t.Fatalf("CheckHeaders = %v, want VALID_INVALID about headers", err)
			}
			if len(value) > 8 && strings.Contains(err.Error(), value) {
				t.Fatalf("the refusal quotes the value: %v", err)
			}
			return
		}
		if forbiddenHeader(name) != "" {
			t.Fatalf("accepted %q", name)
		}
		req, _ := http.NewRequest("POST", "http://example.com/", strings.NewReader("{}"))
		req.Header.Set(name, value)
		var wire bytes.Buffer
		if err := req.Write(&wire); err != nil {
			t.Fatalf("accepted %q: %q, which does not go over the wire: %v", name, value, err)
		}
		back, err := http.ReadRequest(bufio.NewReader(&wire))
		if err != nil {
			t.Fatalf("accepted %q: %q; reading it back: %v", name, value, err)
		}
		if vs := back.Header.Values(name); len(vs) != 1 || vs[0] != strings.Trim(value, " \t") {
			t.Fatalf("accepted %q: %q; read back %q", name, value, vs)
		}
		for k := range back.Header {
			if k != http.CanonicalHeaderKey(name) && k != "Content-Length" && k != "User-Agent" {
				t.Fatalf("accepted %q: %q; read back another header %s", name, value, k)
			}
		}
	})
}
