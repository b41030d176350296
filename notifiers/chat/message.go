package chat

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
)

// payload is the body of an incoming webhook's request, in the subset
// Slack, Mattermost and Rocket.Chat all read.
type payload struct {
	Text        string       `json:"text"`
	Username    string       `json:"username,omitempty"`
	Channel     string       `json:"channel,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
}

type attachment struct {
	Fallback string  `json:"fallback"`
	Color    string  `json:"color"`
	Fields   []field `json:"fields"`
}

type field struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// Colours of the attachment's bar: urgent, good news, anything else.
const (
	colorUrgent = "#d40e0d"
	colorGood   = "#2eb886"
	colorOther  = "#8c959f"
)

// maxLine bounds the line and maxValue a field's value (a deploy's error
// message can be long); shortValue is the longest value shown side by
// side with another.
const (
	maxLine    = 1000
	maxValue   = 500
	shortValue = 40
)

// payloadOf is what the webhook receives for m: text with the subject in
// bold, the line and a link, and one attachment with the event's non-empty
// fields. Everything that comes from the event is escaped, so that a name
// or value cannot make a link, mention a channel (<!channel>, @all) or
// break the layout.
func payloadOf(m notify.Message, username, channel string) payload {
	text := "*" + escape(deliver.OneLine(m.Subject)) + "*"
	line := deliver.Cut(deliver.OneLine(m.Body), maxLine)
	if line != "" {
		text += "\n" + escape(line)
	}
	if m.Link != "" {
		text += "\n<" + escapeLink(m.Link) + "|Open in svc>"
	}
	p := payload{Text: text, Username: username, Channel: channel}
	var fields []field
	for _, f := range m.Fields {
		if f.Value == "" {
			continue
		}
		v := deliver.Cut(f.Value, maxValue)
		fields = append(fields, field{Title: escape(f.Name), Value: escape(v), Short: utf8.RuneCountInString(v) <= shortValue && !strings.Contains(v, "\n")})
	}
	if len(fields) > 0 {
		color := colorOther
		if m.Event != nil && deliver.Urgent(m.Event.Type) {
			color = colorUrgent
		} else if m.Event != nil && deliver.Good(m.Event.Type) {
			color = colorGood
		}
		p.Attachments = []attachment{{Fallback: escape(line), Color: color, Fields: fields}}
	}
	return p
}

// escape makes text from an event inert in Slack's mrkdwn and Mattermost's
// Markdown: &, < and > become entities (both read them back as the
// characters), and an @ starting a word is followed by a word joiner, so
// that @channel or @all mentions nobody.
func escape(s string) string {
	var b strings.Builder
	prev := ' '
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '@':
			b.WriteRune(r)
			if unicode.IsSpace(prev) || unicode.IsPunct(prev) {
				b.WriteRune('\u2060')
			}
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// escapeLink escapes a URL for <url|text>: | and the angle brackets cannot
// appear in it, & is an entity.
func escapeLink(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C", " ", "%20").Replace(s)
}
