package chat

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
	"github.com/svchost/svc/notifiers/internal/notifytest"
)

// token is the secret part of the test webhooks' path.
const token = "xK9s3cr3tW3bh00kT0k3n"

// received is one request a receiver got.
type received struct {
	method, path, contentType string
	body                      []byte
}

// receiver is a real HTTPS server with a certificate of a test CA; answer
// says what it answers to each request it records.
func receiver(t *testing.T, ca *notifytest.CA, answer http.HandlerFunc) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"), body: b}
		r.Body = io.NopCloser(bytes.NewReader(b))
		answer(w, r)
	}))
	srv.TLS = ca.ServerTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes of clients that do not trust it
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, got
}

func answerOK(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

func open(t *testing.T, settings map[string]string, webhook string) *Chat {
	t.Helper()
	k := Kind()
	if err := k.Validate(settings, []string{"webhook_url"}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_chat", Settings: settings, Credentials: map[string]string{"webhook_url": webhook}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return inst.(*Chat)
}

func one(t *testing.T, got chan received) received {
	t.Helper()
	select {
	case r := <-got:
		return r
	default:
		t.Fatal("the receiver got no request")
	}
	return received{}
}

func TestNotifyPostsSlackBody(t *testing.T) {
	ca := notifytest.NewCA(t, "chat CA")
	srv, got := receiver(t, ca, answerOK)
	c := open(t, map[string]string{"username": "svc", "channel": "#ops", "ca_file": ca.File}, srv.URL+"/services/T1/B2/"+token)

	if err := c.Notify(context.Background(), notifytest.DeployFailed()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := one(t, got)
	if r.method != "POST" || r.path != "/services/T1/B2/"+token || r.contentType != "application/json" {
		t.Errorf("request %s %s (%s); want POST to the webhook's path as application/json", r.method, r.path, r.contentType)
	}
	const line = "shop: deploy failed (deployment_id dep_01, spec_id spc_01, trigger push, error_code BUILD_FAILED, message npm ci exited with status 1)"
	want := `{
		"text": "*shop: deploy failed*\n` + line + `\n<https://svc.example.com/apps/app_01/deploys|Open in svc>",
		"username": "svc", "channel": "#ops",
		"attachments": [{"fallback": "` + line + `", "color": "#d40e0d", "fields": [
			{"title": "deployment_id", "value": "dep_01", "short": true},
			{"title": "spec_id", "value": "spc_01", "short": true},
			{"title": "trigger", "value": "push", "short": true},
			{"title": "error_code", "value": "BUILD_FAILED", "short": true},
			{"title": "message", "value": "npm ci exited with status 1", "short": true}]}]}`
	if diff := cmp.Diff(decode(t, []byte(want)), decode(t, r.body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// mattermostRequest is the incoming webhook request as Mattermost's server
// reads it (model.IncomingWebhookRequest with Slack attachments); a field
// it does not know makes the receiver refuse the request.
type mattermostRequest struct {
	Text        string `json:"text"`
	Username    string `json:"username"`
	IconURL     string `json:"icon_url"`
	ChannelName string `json:"channel"`
	Attachments []struct {
		Fallback  string `json:"fallback"`
		Color     string `json:"color"`
		Pretext   string `json:"pretext"`
		Title     string `json:"title"`
		TitleLink string `json:"title_link"`
		Text      string `json:"text"`
		Fields    []struct {
			Title string `json:"title"`
			Value any    `json:"value"`
			Short bool   `json:"short"`
		} `json:"fields"`
	} `json:"attachments"`
}

var slackLink = regexp.MustCompile(`<([^<>|]+)\|([^<>]+)>`)

// mattermost answers like Mattermost's incoming webhooks: it refuses a
// body it cannot read (400 with a JSON error), and turns the Slack markup
// into what it posts: <url|text> into a Markdown link, <!channel> into a
// channel mention, entities into characters.
func mattermost(posted chan<- string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req mattermostRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || r.Header.Get("Content-Type") != "application/json" || (req.Text == "" && len(req.Attachments) == 0) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"id":"web.incoming_webhook.parse.app_error","message":"Unable to parse incoming data","status_code":400}`)
			return
		}
		text := slackLink.ReplaceAllString(req.Text, "[$2]($1)")
		text = strings.NewReplacer("<!channel>", "@channel", "<!here>", "@here", "<!all>", "@all").Replace(text)
		text = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(text)
		posted <- text
		_, _ = io.WriteString(w, "ok")
	}
}

func TestMattermostReadsTheSameBody(t *testing.T) {
	ca := notifytest.NewCA(t, "chat CA")
	posted := make(chan string, 2)
	srv, _ := receiver(t, ca, mattermost(posted))
	c := open(t, map[string]string{"username": "svc", "ca_file": ca.File}, srv.URL+"/hooks/"+token)

	if err := c.Notify(context.Background(), notifytest.DeployFailed()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if text := <-posted; !strings.Contains(text, "[Open in svc](https://svc.example.com/apps/app_01/deploys)") {
		t.Errorf("Mattermost posts %q; want the link as a Markdown link", text)
	}

	// An app named to ping everyone pings nobody: the markup arrives as
	// text.
	hostile := notifytest.Rendered("app.created", "<!channel> @all <https://evil.example|x>", map[string]any{"name": "n", "slug": "s"})
	if err := c.Notify(context.Background(), hostile); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	text := <-posted
	if strings.Contains(text, "@channel") || strings.Contains(text, "@all ") || strings.Contains(text, "](https://evil.example)") {
		t.Errorf("Mattermost posts %q: the app's name made a mention or a link", text)
	}
	if !strings.Contains(text, "<!channel>") {
		t.Errorf("Mattermost posts %q; want the app's name shown as it is", text)
	}
}

func TestRefusalNamesStatusNotURL(t *testing.T) {
	ca := notifytest.NewCA(t, "chat CA")
	for _, tt := range []struct {
		name   string
		answer http.HandlerFunc
		want   []string
	}{
		{"slack's no_service", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "no_service for "+r.URL.Path)
		}, []string{"404 Not Found", "no_service for [redacted]"}},
		{"a redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://127.0.0.1:1/"+token, http.StatusFound)
		}, []string{"302 Found"}},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "internal error\nat "+r.URL.String(), http.StatusInternalServerError)
		}, []string{"500 Internal Server Error: internal error"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := receiver(t, ca, tt.answer)
			url := srv.URL + "/services/T1/B2/" + token
			c := open(t, map[string]string{"ca_file": ca.File}, url)
			err := c.Notify(context.Background(), notifytest.DeployFailed())
			notifytest.NoSecret(t, err, errcode.AdapterFailed, token, url)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "the chat webhook at 127.0.0.1:") {
				t.Errorf("error %q does not name the webhook's host", err)
			}
			one(t, got)
			if len(got) != 0 {
				t.Errorf("the receiver got %d more requests; a refusal is not retried here, a redirect not followed", len(got))
			}
		})
	}
}

func TestUnreachableAndUntrusted(t *testing.T) {
	ca := notifytest.NewCA(t, "chat CA")
	other := notifytest.NewCA(t, "another CA")
	srv, got := receiver(t, ca, answerOK)
	url := srv.URL + "/services/T1/B2/" + token

	untrusted := open(t, map[string]string{"ca_file": other.File}, url)
	err := untrusted.Notify(context.Background(), notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, token, url)
	if !strings.Contains(err.Error(), "certificate this server does not trust: it is signed by an unknown authority") {
		t.Errorf("Notify with the wrong CA: %v", err)
	}
	err = untrusted.Check(context.Background())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, token, url)

	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) })
	hang, _ := receiver(t, ca, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-slow:
		case <-r.Context().Done():
			// Never answer: a 200 written as the client gives up can
			// still reach it.
			panic(http.ErrAbortHandler)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = open(t, map[string]string{"ca_file": ca.File}, hang.URL+"/x/"+token).Notify(ctx, notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterUnavailable, token)
	if !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("Notify to a receiver that never answers: %v", err)
	}

	srv.Close()
	c := open(t, map[string]string{"ca_file": ca.File}, url)
	for name, err := range map[string]error{"Notify": c.Notify(context.Background(), notifytest.DeployFailed()), "Check": c.Check(context.Background())} {
		notifytest.NoSecret(t, err, errcode.AdapterUnavailable, token, url)
		if !strings.Contains(err.Error(), "is not reachable: connection refused") {
			t.Errorf("%s with the receiver down: %v", name, err)
		}
	}
	if len(got) != 0 {
		t.Errorf("the receiver got %d requests from a client that does not trust it", len(got))
	}
}

func TestCheckConnectsAndPostsNothing(t *testing.T) {
	ca := notifytest.NewCA(t, "chat CA")
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	srv.TLS = ca.ServerTLS(t)
	handshakes := make(chan struct{}, 1)
	srv.TLS.VerifyConnection = func(tls.ConnectionState) error {
		handshakes <- struct{}{}
		return nil
	}
	srv.StartTLS()
	defer srv.Close()

	c := open(t, map[string]string{"ca_file": ca.File}, srv.URL+"/services/"+token)
	if err := c.Check(context.Background()); err != nil {
		t.Fatalf("Check against a live server: %v", err)
	}
	select {
	case <-handshakes:
	case <-time.After(10 * time.Second):
		t.Fatal("Check completed no TLS handshake with the server")
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("Check sent %d requests; it must post nothing", n)
	}
	if caps := c.Capabilities(); caps["host"] != strings.TrimPrefix(srv.URL, "https://") {
		t.Errorf("Capabilities = %v", caps)
	}
}

func TestOpenRefusesWebhooks(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"", "must be the webhook's https URL"},
		{"not a url " + token, "must be the webhook's https URL"},
		{"hooks.slack.com/services/" + token, "must be the webhook's https URL"},
		{"ftp://hooks.example.com/" + token, "must be the webhook's https URL"},
		{"https:///" + token, "must be the webhook's https URL"},
		{"http://hooks.example.com/services/" + token, "must be https"},
		{"http://10.0.0.7/hooks/" + token, "must be https"},
		{"https://hooks.example.com/services/" + token + "#x", "must not have a fragment"},
	} {
		_, err := Kind().Open(context.Background(), adapters.Config{Settings: map[string]string{}, Credentials: map[string]string{"webhook_url": tt.url}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v; want an error saying %q", tt.url, err, tt.want)
			continue
		}
		notifytest.NoSecret(t, err, errcode.ValidInvalid, token)
	}
	for _, ok := range []string{"https://hooks.slack.com/services/T/B/" + token, "http://127.0.0.1:8065/hooks/" + token, "http://localhost/hooks/x", "http://[::1]:80/h"} {
		if _, err := parseWebhook(ok); err != nil {
			t.Errorf("parseWebhook(%q) = %v", ok, err)
		}
	}
	if _, err := Kind().Open(context.Background(), adapters.Config{Settings: map[string]string{"ca_file": "/nonexistent/ca.pem"},
		Credentials: map[string]string{"webhook_url": "https://hooks.example.com/" + token}}); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("Open with a missing ca_file = %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		settings map[string]string
		field    string // empty: valid
	}{
		{map[string]string{}, ""},
		{map[string]string{"username": "svc bot", "channel": "#ops"}, ""},
		{map[string]string{"username": "svc\nInjected: yes"}, "config.username"},
		{map[string]string{"username": strings.Repeat("x", 81)}, "config.username"},
		{map[string]string{"channel": "#ops team"}, "config.channel"},
		{map[string]string{"channel": "#ops\r"}, "config.channel"},
	} {
		notifytest.Validated(t, Kind().Validate(tt.settings, []string{"webhook_url"}), tt.field, fmt.Sprint(tt.settings))
	}
}

func TestPayloadEscapesAndFolds(t *testing.T) {
	m := notify.Message{Subject: "a&b <c>\nd", Body: "line\r\ntwo", Link: "https://svc.example.com/a|b>c&d",
		Fields: []notify.Field{{Name: "empty", Value: ""}, {Name: "mail", Value: "ann@example.com (@here)"},
			{Name: "long", Value: strings.Repeat("é", 600)}}}
	p := payloadOf(m, "", "")
	want := "*a&amp;b &lt;c&gt; d*\nline  two\n<https://svc.example.com/a%7Cb%3Ec&amp;d|Open in svc>"
	if p.Text != want {
		t.Errorf("text = %q; want %q", p.Text, want)
	}
	if len(p.Attachments) != 1 || len(p.Attachments[0].Fields) != 2 {
		t.Fatalf("attachments = %+v; want one with the two non-empty fields", p.Attachments)
	}
	if f := p.Attachments[0].Fields[0]; f.Value != "ann@example.com (@\u2060here)" || !f.Short {
		t.Errorf("field %+v; an address stays whole, a mention is broken", f)
	}
	if f := p.Attachments[0].Fields[1]; len([]rune(f.Value)) != maxValue || !strings.HasSuffix(f.Value, "…") || f.Short {
		t.Errorf("a long value is %d characters (short %t); want it cut to %d", len([]rune(f.Value)), f.Short, maxValue)
	}
	if p := payloadOf(notify.Message{Subject: "s"}, "", ""); p.Attachments != nil || p.Text != "*s*" {
		t.Errorf("a message with no fields or link: %+v", p)
	}
}

// FuzzParseWebhook: whatever the input, an accepted URL is https (or http
// to this machine) with a host, and a refusal is one of a few fixed
// sentences, so it can never quote the secret it was given.
func FuzzParseWebhook(f *testing.F) {
	for _, s := range []string{"https://hooks.slack.com/services/T/B/x", "http://127.0.0.1:1/x", "http://evil/x", "https://h/#f", "%zz", "https://[::1"} {
		f.Add(s)
	}
	refusals := map[string]bool{}
	for _, s := range []string{"", "http://h/x", "https://h/#f"} {
		_, err := parseWebhook(s)
		refusals[err.Error()] = true
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseWebhook(s)
		if err != nil {
			if !refusals[err.Error()] {
				t.Fatalf("parseWebhook(%q) refused with a new text %q", s, err)
			}
			return
		}
		if u.Hostname() == "" || !(u.Scheme == "https" || u.Scheme == "http" && deliver.IsLoopback(u.Hostname())) {
			t.Fatalf("parseWebhook(%q) accepted %s", s, u)
		}
	})
}

// BenchmarkNotify: messages per second to a receiver on loopback over
// HTTPS (connections kept alive).
func BenchmarkNotify(b *testing.B) {
	ca := notifytest.NewCA(b, "chat CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	srv.TLS = ca.ServerTLS(b)
	srv.StartTLS()
	defer srv.Close()
	c, err := New(map[string]string{"ca_file": ca.File}, srv.URL+"/services/"+token)
	if err != nil {
		b.Fatal(err)
	}
	m := notifytest.DeployFailed()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Notify(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}
