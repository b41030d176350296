// Package notify owns how an event reads to a person: a subject, one line,
// its data fields as labelled values and a link into the console. Every
// notification adapter (chat, email, push) renders the same Message, and
// webhook templates see it as .Subject, .Body, .Fields and .Link.
//
// It also declares Notifier, the interface notification adapters
// implement. It must not send anything itself, import an adapter, or read
// the store; a Message never carries a secret (events never do).
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/events"
)

// Field is one labelled value of an event's data, as a person reads it.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Message is an event rendered for people.
type Message struct {
	// Subject is a short title: what happened, and to which app.
	Subject string `json:"subject"`
	// Body is one line saying the same with its main details.
	Body string `json:"body"`
	// Fields are the event's data fields in catalogue order, then
	// target_kind and target_id when present.
	Fields []Field `json:"fields"`
	// Link points into the console; empty when no external URL is set.
	Link string `json:"link"`
	// Event is the event itself.
	Event *events.Event `json:"-"`
}

// Notifier is what a notification adapter does: tell people of one event.
// An error means the message did not get through; it must not carry a
// credential.
type Notifier interface {
	Notify(ctx context.Context, m Message) error
}

// Render renders an event for people. consoleURL is the installation's
// external URL (server.external_url); empty leaves Link empty.
func Render(ev *events.Event, consoleURL string) Message {
	m := Message{Event: ev, Fields: Fields(ev), Link: Link(ev, consoleURL)}
	who := "the installation"
	if ev.App != nil {
		who = ev.App.Name
		if who == "" {
			who = ev.App.Slug
		}
	}
	kind, _ := events.Lookup(ev.Type)
	what := sentences[ev.Type]
	if ev.Type == "app.disk_warning" && ev.Data["over"] == true {
		what = "over its disk limit; stopped at the next check if still over"
	}
	if what == "" {
		what = kind.Meaning
	}
	m.Subject = fmt.Sprintf("%s: %s", who, what)
	var details []string
	for _, f := range m.Fields {
		if f.Name == "target_kind" || f.Name == "target_id" || f.Value == "" {
			continue
		}
		details = append(details, f.Name+" "+f.Value)
	}
	m.Body = m.Subject
	if len(details) > 0 {
		m.Body += " (" + strings.Join(details, ", ") + ")"
	}
	return m
}

// sentences say what an event means in a few words, where the catalogue's
// meaning is too long for a subject.
var sentences = map[string]string{
	"adapter.configured":        "adapter configured; applies after a restart",
	"adapter.recovered":         "adapter healthy again",
	"adapter.unhealthy":         "adapter unhealthy",
	"app.created":               "app created",
	"app.deleted":               "app deleted",
	"app.disk_stopped":          "stopped over its disk limit",
	"app.disk_warning":          "near its disk limit",
	"app.shell_opened":          "shell opened",
	"app.gave_up":               "gave up restarting; stays failed until deployed",
	"app.idle_warning":          "idle; action planned",
	"app.idle_stopped":          "stopped for idleness",
	"app.restarted":             "restarted",
	"app.data_restored":         "data restored from a backup",
	"app.secret_changed":        "secret changed",
	"app.state_changed":         "state changed",
	"backup.completed":          "backup completed",
	"backup.failed":             "backup failed",
	"backup.restored":           "backup restored",
	"deploy.approved":           "deploy approved",
	"deploy.failed":             "deploy failed",
	"deploy.rejected":           "deploy rejected",
	"deploy.waiting_approval":   "deploy waiting for approval",
	"deploy.started":            "deploy started",
	"deploy.succeeded":          "deploy succeeded",
	"grant.created":             "access given",
	"grant.deleted":             "access removed",
	"grant.role_changed":        "role changed",
	"svc.upgrade_failed":        "upgrade failed",
	"svc.upgraded":              "upgraded",
	"policy.updated":            "host policy changed",
	"security.below_minimum":    "security score below the minimum",
	"security.recovered":        "security score back at the minimum",
	"security.scan_failed":      "security scan failed",
	"security.scanned":          "security scan done",
	"security.insecure_stopped": "stopped for a low security score",
	"subscription.disabled":     "subscription turned off after a day of failures",
	"subscription.test":         "test delivery",
	"token.created":             "token created",
	"token.revoked":             "token revoked",
	"user.created":              "account created",
	"user.deleted":              "account deleted",
	"user.sign_in_failed":       "sign-in refused",
	"user.signed_in":            "signed in",
}

// Fields lists an event's data as labelled values: the catalogue's fields
// in its order, then any other field (target_kind, target_id) by name.
// Strings are shown as they are; other values as JSON; a missing or null
// value is empty.
func Fields(ev *events.Event) []Field {
	kind, _ := events.Lookup(ev.Type)
	names := slices.Clone(kind.Data)
	var extra []string
	for name := range ev.Data {
		if !slices.Contains(names, name) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	out := []Field{}
	for _, name := range append(names, extra...) {
		out = append(out, Field{Name: name, Value: show(ev.Data[name])})
	}
	return out
}

func show(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

// Link is where in the console an event is best seen: the app's page (its
// deploys for a deploy event) for an app event, the installation's page for
// an install event; empty when consoleURL is empty or not an absolute URL.
func Link(ev *events.Event, consoleURL string) string {
	base, err := url.Parse(strings.TrimRight(consoleURL, "/"))
	if consoleURL == "" || err != nil || base.Scheme == "" || base.Host == "" {
		return ""
	}
	family, _, _ := strings.Cut(ev.Type, ".")
	var path string
	switch {
	case ev.App != nil && family == "deploy":
		path = "/apps/" + url.PathEscape(ev.App.ID) + "/deploys"
	case ev.App != nil && family == "subscription":
		path = "/apps/" + url.PathEscape(ev.App.ID) + "/events"
	case ev.App != nil:
		path = "/apps/" + url.PathEscape(ev.App.ID)
	case family == "adapter":
		path = "/admin/adapters"
	case family == "user" || family == "grant":
		path = "/admin/accounts"
	case family == "token":
		path = "/admin/tokens"
	case family == "policy":
		path = "/admin/policy"
	case family == "subscription":
		path = "/admin/events"
	default:
		path = "/admin/audit"
	}
	return base.String() + path
}
