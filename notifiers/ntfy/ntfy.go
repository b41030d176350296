// Package ntfy is the push notification adapter for the ntfy protocol
// (ntfy.sh or a self-hosted ntfy server): each message is a POST of its
// line to <server>/<topic>, with its subject as the Title header, the
// console link as Click, a tag saying what kind of event it is, and a
// priority (the setting's, raised to high for urgent events). The token,
// when set, is sent as a bearer token and never appears in an error; it is
// never sent over plain http to another machine. The health check asks the
// server's /v1/health.
//
// This package must not touch the store, HTTP routing or another adapter.
package ntfy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
)

// Interface guards.
var (
	_ adapters.Instance = (*Ntfy)(nil)
	_ notify.Notifier   = (*Ntfy)(nil)
)

// Kind declares the ntfy notification adapter.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryNotification,
		Name:     "ntfy",
		Description: "Sends events as push notifications through an ntfy server (ntfy.sh or self-hosted): " +
			"the subject as title, one line, a link into the console, a higher priority for failures",
		Settings: []adapters.Setting{
			{Name: "server", Description: "The ntfy server's URL", Default: "https://ntfy.sh"},
			{Name: "topic", Description: "Topic to publish to: 1 to 64 letters, digits, - and _ (on a server without access control, whoever knows it can read the messages: choose one hard to guess)",
				Required: true, Example: "svc-alerts-7f3k2"},
			{Name: "priority", Description: "Priority of messages: min, low, default, high, max (or 1 to 5); urgent events (failures, stops, unhealthy adapters, turned-off subscriptions) are sent at high at least",
				Default: "default"},
			{Name: "ca_file", Description: "PEM file of the CA that signed a self-hosted server's certificate; empty for the system's roots", Example: "/etc/svc/ntfy-ca.pem"},
			{Name: "token", Description: "Access token (tk_…) of a user allowed to publish to the topic, sent as a bearer token", Credential: true},
		},
		Validate: func(settings map[string]string, creds []string) error {
			_, err := configOf(settings, slices.Contains(creds, "token"))
			return err
		},
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			return New(c.Settings, c.Credentials["token"])
		},
	}
}

// config is a checked configuration.
type config struct {
	server   *url.URL
	topic    string
	priority int
}

var topicSyntax = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)

// priorities are ntfy's priority names, 1 to 5.
var priorities = []string{"min", "low", "default", "high", "max"}

// configOf checks the settings; withToken says a token is set.
func configOf(settings map[string]string, withToken bool) (config, error) {
	server := settings["server"]
	if server == "" {
		server = "https://ntfy.sh"
	}
	u, err := url.Parse(server)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.Opaque != "":
		return config{}, errcode.Invalid("config.server", "server must be the ntfy server's http or https URL, such as https://ntfy.sh")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return config{}, errcode.Invalid("config.server", "server must be a plain URL: no user, query or fragment").
			WithRemedy("give the token as the token credential")
	case withToken && u.Scheme == "http" && !deliver.IsLoopback(u.Hostname()):
		return config{}, errcode.Invalid("config.server", "server must be https when a token is set: over http, the token would cross the network in the clear").
			WithRemedy("use the server's https address; http with a token is accepted only for a server on this machine")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	topic := settings["topic"]
	if !topicSyntax.MatchString(topic) {
		return config{}, errcode.Invalid("config.topic", "topic must be 1 to 64 letters, digits, - or _, such as svc-alerts-7f3k2")
	}
	prio, err := parsePriority(settings["priority"])
	if err != nil {
		return config{}, err
	}
	return config{server: u, topic: topic, priority: prio}, nil
}

// parsePriority reads a priority: a name or 1 to 5; empty is default (3).
func parsePriority(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 3, nil
	}
	if s == "urgent" {
		return 5, nil
	}
	if i := slices.Index(priorities, s); i >= 0 {
		return i + 1, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= 5 {
		return n, nil
	}
	return 0, errcode.Invalid("config.priority", "priority must be one of %s, or 1 to 5", strings.Join(priorities, ", "))
}

// priorityFor is the priority of a message about an event of type
// eventType: the configured one, raised to high (4) for urgent events.
func priorityFor(configured int, eventType string) int {
	if deliver.Urgent(eventType) {
		return max(configured, 4)
	}
	return configured
}

// Ntfy publishes to one topic. It is safe for concurrent use.
type Ntfy struct {
	cfg    config
	token  string
	client *http.Client
	who    string
}

// New makes an ntfy adapter from its settings and token (empty: none).
func New(settings map[string]string, token string) (*Ntfy, error) {
	cfg, err := configOf(settings, token != "")
	if err != nil {
		return nil, err
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return nil, errcode.Invalid("credentials.token", "token must be one word of printable ASCII, such as tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2")
	}
	conf, err := deliver.TLSConfig(cfg.server.Hostname(), settings["ca_file"])
	if err != nil {
		return nil, err
	}
	return &Ntfy{cfg: cfg, token: token, client: deliver.Client(conf), who: deliver.Who("ntfy", cfg.server)}, nil
}

func (n *Ntfy) endpoint(path string) string {
	u := *n.cfg.server
	u.Path += "/" + path
	return u.String()
}

// maxBody bounds the body, in characters: ntfy turns a message of more
// than 4096 bytes into an attachment, which a notification does not show.
const maxBody = 1000

// Notify publishes m: its line (cut to maxBody characters) as the body,
// its subject as the title.
func (n *Ntfy) Notify(ctx context.Context, m notify.Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.endpoint(n.cfg.topic), strings.NewReader(deliver.Cut(m.Body, maxBody)))
	if err != nil {
		return errcode.New(errcode.AdapterFailed, "cannot make a request to %s", n.who)
	}
	h := headersFor(m, n.cfg.priority)
	for k, v := range h {
		req.Header[k] = v
	}
	n.authorize(req)
	_, err = deliver.Do(n.client, req, n.who, n.token)
	return err
}

// headersFor is the publish request's headers for m, but Authorization.
func headersFor(m notify.Message, priority int) http.Header {
	typ := ""
	if m.Event != nil {
		typ = m.Event.Type
	}
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Title", headerValue(m.Subject))
	h.Set("Priority", strconv.Itoa(priorityFor(priority, typ)))
	if tags := tagsFor(typ); tags != "" {
		h.Set("Tags", tags)
	}
	if m.Link != "" {
		h.Set("Click", m.Link)
	}
	return h
}

// headerValue makes text a header value: one line, encoded as RFC 2047
// words (which ntfy decodes) unless it is plain ASCII.
func headerValue(s string) string { return strings.Join(deliver.EncodeWords(s), " ") }

// tagsFor is the Tags header: an emoji (ntfy shows tags named like an
// emoji as the emoji) for urgent or good news, and the event's name.
func tagsFor(eventType string) string {
	var tags []string
	switch {
	case deliver.Urgent(eventType):
		tags = append(tags, "rotating_light")
	case deliver.Good(eventType):
		tags = append(tags, "white_check_mark")
	}
	if eventType != "" {
		tags = append(tags, eventType)
	}
	return strings.Join(tags, ",")
}

func (n *Ntfy) authorize(req *http.Request) {
	if n.token != "" {
		req.Header.Set("Authorization", "Bearer "+n.token)
	}
}

// Check asks the server's health endpoint, which must answer
// {"healthy":true}.
func (n *Ntfy) Check(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.endpoint("v1/health"), nil)
	if err != nil {
		return errcode.New(errcode.AdapterFailed, "cannot make a request to %s", n.who)
	}
	body, err := deliver.Do(n.client, req, n.who, n.token)
	if err != nil {
		return err
	}
	var health struct {
		Healthy *bool `json:"healthy"`
	}
	switch err := json.Unmarshal(body, &health); {
	case err != nil || health.Healthy == nil:
		return errcode.New(errcode.AdapterFailed, "%s answered its health check with something other than ntfy's {\"healthy\": …}", n.who).
			WithRemedy("check that server is the URL of an ntfy server")
	case !*health.Healthy:
		return errcode.New(errcode.AdapterUnavailable, "%s says it is not healthy", n.who).
			WithRemedy("check the ntfy server's log")
	}
	return nil
}

// Capabilities of the adapter.
func (n *Ntfy) Capabilities() map[string]any {
	return map[string]any{"server": n.cfg.server.String(), "priority": priorities[n.cfg.priority-1]}
}
