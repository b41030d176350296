// Package chat is the chat notification adapter: it posts each message to
// a Slack-compatible incoming webhook. Slack, Mattermost and Rocket.Chat
// accept the same JSON body: text (the subject in bold, the line, a link
// into the console) and an attachment listing the event's fields.
//
// The webhook URL is a credential: whoever has it can post to the
// channel. It must be https (http only to this machine), and no error,
// log line or capability carries it or a part of its path; errors name the
// webhook's host. The health check resolves the host and completes a TCP
// (and TLS) connection; it posts nothing.
//
// This package must not touch the store, HTTP routing or another adapter.
package chat

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
)

// Interface guards.
var (
	_ adapters.Instance = (*Chat)(nil)
	_ notify.Notifier   = (*Chat)(nil)
)

// Kind declares the chat notification adapter.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryNotification,
		Name:     "chat",
		Description: "Posts events to a Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat): " +
			"the subject in bold, one line, the event's fields and a link into the console",
		Settings: []adapters.Setting{
			{Name: "webhook_url", Description: "The incoming webhook's URL (https; whoever has it can post, so it is kept as a credential)",
				Credential: true, Required: true, Example: "https://hooks.slack.com/services/T000/B000/XXXX"},
			{Name: "username", Description: "Name to post as, where the chat tool lets a webhook choose; empty for the webhook's own", Example: "svc"},
			{Name: "channel", Description: "Channel to post to instead of the webhook's own, where the chat tool allows it; empty for the webhook's own", Example: "#ops"},
			{Name: "ca_file", Description: "PEM file of the CA that signed the chat server's certificate (a self-hosted Mattermost or Rocket.Chat); empty for the system's roots", Example: "/etc/svc/chat-ca.pem"},
		},
		Validate: validate,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			return New(c.Settings, c.Credentials["webhook_url"])
		},
	}
}

func validate(settings map[string]string, _ []string) error {
	for _, name := range []string{"username", "channel"} {
		v := settings[name]
		if len(v) > 80 || strings.ContainsFunc(v, unicode.IsControl) {
			return errcode.Invalid("config."+name, "%s must be one line of at most 80 characters", name)
		}
	}
	if strings.ContainsFunc(settings["channel"], unicode.IsSpace) {
		return errcode.Invalid("config.channel", "channel must be a channel's name, such as #ops, without spaces")
	}
	return nil
}

// parseWebhook checks a webhook URL: an absolute https URL with a host
// (http only for a host on this machine, since the URL is the secret). Its
// error never quotes the URL.
func parseWebhook(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "" || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http"):
		return nil, errcode.Invalid("credentials.webhook_url", "webhook_url must be the webhook's https URL, such as https://hooks.slack.com/services/T000/B000/XXXX").
			WithRemedy("copy the URL the chat tool shows for its incoming webhook")
	case u.Scheme == "http" && !deliver.IsLoopback(u.Hostname()):
		return nil, errcode.Invalid("credentials.webhook_url", "webhook_url must be https: over http, the URL (the secret) would cross the network in the clear").
			WithRemedy("use the https address of the chat server; http is accepted only for a server on this machine")
	case u.Fragment != "":
		return nil, errcode.Invalid("credentials.webhook_url", "webhook_url must not have a fragment (#…)")
	}
	return u, nil
}

// Chat posts messages to one webhook. It is safe for concurrent use.
type Chat struct {
	url      *url.URL
	username string
	channel  string
	tls      *tls.Config
	client   *http.Client
	who      string
	secrets  []string
}

// New makes a chat adapter from its settings (ca_file, username, channel)
// and the webhook URL.
func New(settings map[string]string, webhookURL string) (*Chat, error) {
	if err := validate(settings, nil); err != nil {
		return nil, err
	}
	u, err := parseWebhook(webhookURL)
	if err != nil {
		return nil, err
	}
	conf, err := deliver.TLSConfig(u.Hostname(), settings["ca_file"])
	if err != nil {
		return nil, err
	}
	return &Chat{url: u, username: settings["username"], channel: settings["channel"], tls: conf,
		client: deliver.Client(conf), who: deliver.Who("the chat webhook", u), secrets: deliver.URLSecrets(u)}, nil
}

// Notify posts m.
func (c *Chat) Notify(ctx context.Context, m notify.Message) error {
	body, err := json.Marshal(payloadOf(m, c.username, c.channel))
	if err != nil {
		return errcode.Wrap(err, errcode.Internal, "encode the chat message")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url.String(), bytes.NewReader(body))
	if err != nil {
		return errcode.New(errcode.AdapterFailed, "cannot make a request to %s", c.who)
	}
	req.Header.Set("Content-Type", "application/json")
	_, err = deliver.Do(c.client, req, c.who, c.secrets...)
	return err
}

// Check resolves the webhook's host and connects to it (with a TLS
// handshake for https); it posts nothing.
func (c *Chat) Check(ctx context.Context) error {
	port := c.url.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[c.url.Scheme]
	}
	var conf *tls.Config
	if c.url.Scheme == "https" {
		conf = c.tls
	}
	return deliver.Reach(ctx, c.who, net.JoinHostPort(c.url.Hostname(), port), conf)
}

// Capabilities of the adapter: the webhook's host (never its path).
func (c *Chat) Capabilities() map[string]any {
	return map[string]any{"host": c.url.Host, "fields": true}
}
