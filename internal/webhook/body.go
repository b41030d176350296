package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/notify"
)

// envelope is the standard body, in the specification's field order.
type envelope struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	OccurredAt time.Time      `json:"occurred_at"`
	App        *events.AppRef `json:"app,omitempty"`
	Actor      events.Actor   `json:"actor"`
	Data       map[string]any `json:"data"`
}

// Envelope is the standard webhook body of an event: {id, type,
// occurred_at, app (absent for install events), actor {kind, id}, data},
// with the time in RFC 3339 UTC and data's keys sorted, so the same event
// always gives the same bytes (a resent delivery carries the body the
// first attempt did). HTML characters are not escaped.
func Envelope(ev *events.Event) ([]byte, error) {
	if ev == nil {
		return nil, errors.New("no event to send")
	}
	data := ev.Data
	if data == nil {
		data = map[string]any{}
	}
	return marshal(envelope{
		ID:         ev.ID,
		Type:       ev.Type,
		OccurredAt: ev.OccurredAt.UTC(),
		App:        ev.App,
		Actor:      ev.Actor,
		Data:       data,
	})
}

// marshal is json.Marshal without HTML escaping or a trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Body is the body Send sends for req: the envelope, or req.Template
// rendered (bounded in time, size and work; see the package's template
// rules), which must be JSON when the content type is.
func Body(req Request) ([]byte, error) {
	if req.Template == "" {
		return Envelope(req.Event)
	}
	data, err := templateData(req.Event, req.ConsoleURL)
	if err != nil {
		return nil, err
	}
	out, err := render(req.Template, data, nil)
	if err != nil {
		return nil, errors.New(templateFailure(err, ""))
	}
	if isJSON(req.ContentType) && !json.Valid(out) {
		return nil, fmt.Errorf("the payload template's output is not JSON, and the content type is %s; write values with {{json …}}", contentType(req.ContentType))
	}
	return out, nil
}

// contentType is a request's content type, application/json when empty.
func contentType(ct string) string {
	if ct == "" {
		return "application/json"
	}
	return ct
}

// templateData is what a payload template sees: .ID .Type .OccurredAt
// .App (.ID .Name .Slug; absent for install events) .Actor (.Kind .ID)
// .Data .Subject .Body .Fields (each .Name .Value) .Link .Envelope. Every
// value is a string, a float64, a bool, nil, a []any or a map[string]any
// (the event goes through JSON), so nothing in it is an integer a template
// could range over, or has methods.
func templateData(ev *events.Event, consoleURL string) (map[string]any, error) {
	env, err := Envelope(ev)
	if err != nil {
		return nil, err
	}
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		return nil, err
	}
	m := notify.Render(ev, consoleURL)
	fields := make([]any, 0, len(m.Fields))
	for _, f := range m.Fields {
		fields = append(fields, map[string]any{"Name": f.Name, "Value": f.Value})
	}
	d := map[string]any{
		"ID":         ev.ID,
		"Type":       ev.Type,
		"OccurredAt": e["occurred_at"],
		"Actor":      map[string]any{"Kind": ev.Actor.Kind, "ID": ev.Actor.ID},
		"Data":       e["data"],
		"Subject":    m.Subject,
		"Body":       m.Body,
		"Fields":     fields,
		"Link":       m.Link,
		"Envelope":   e,
	}
	if ev.App != nil {
		d["App"] = map[string]any{"ID": ev.App.ID, "Name": ev.App.Name, "Slug": ev.App.Slug}
	}
	return d, nil
}

// sampleEvent is the event a template is checked against when saved: a
// deploy failure of an app, every data field set.
func sampleEvent() *events.Event {
	return &events.Event{
		ID:         "evt_01JB4R3Q8S2W5Y7Z9A1C3E5G7H",
		Type:       "deploy.failed",
		OccurredAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		App:        &events.AppRef{ID: "app_01JB4R3Q8S2W5Y7Z9A1C3E5G7J", Name: "Sample app", Slug: "sample-app"},
		Actor:      events.Actor{Kind: "user", ID: "usr_01JB4R3Q8S2W5Y7Z9A1C3E5G7K"},
		Data: map[string]any{
			"deployment_id": "dep_01JB4R3Q8S2W5Y7Z9A1C3E5G7M",
			"spec_id":       "spec_01JB4R3Q8S2W5Y7Z9A1C3E5G7N",
			"trigger":       "manual",
			"error_code":    "BUILD_FAILED",
			"message":       "the build ran and did not succeed",
		},
	}
}
