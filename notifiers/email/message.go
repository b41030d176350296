package email

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/notifiers/internal/deliver"
)

// maxSubject bounds the subject, in characters.
const maxSubject = 200

// compose is the mail for m: headers (From, To, Subject, Date, Message-ID,
// MIME, Auto-Submitted so that no auto-reply comes back, X-Svc-Event) and a
// quoted-printable UTF-8 text body: the line, the fields as "name: value"
// lines, the link. Lines end in CRLF.
func compose(m notify.Message, from *mail.Address, to []*mail.Address, now time.Time, id string) ([]byte, error) {
	var b bytes.Buffer
	header := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	header("From", from.String())
	rcpts := make([]string, len(to))
	for i, a := range to {
		rcpts[i] = a.String()
	}
	header("To", strings.Join(rcpts, ",\r\n "))
	header("Subject", subject(m.Subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", id)
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	if m.Event != nil && isToken(m.Event.Type) {
		header("X-Svc-Event", m.Event.Type)
	}
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(&b)
	if _, err := w.Write([]byte(text(m))); err != nil {
		return nil, errcode.Wrap(err, errcode.Internal, "encode the mail's body")
	}
	if err := w.Close(); err != nil {
		return nil, errcode.Wrap(err, errcode.Internal, "encode the mail's body")
	}
	return b.Bytes(), nil
}

// text is the body of the mail for m, lines ending in LF: the line, a
// blank line, the non-empty fields as "name: value" (a value's further
// lines indented), and the link.
func text(m notify.Message) string {
	var b strings.Builder
	b.WriteString(deliver.OneLine(m.Body) + "\n")
	var fields []string
	for _, f := range m.Fields {
		if f.Value == "" {
			continue
		}
		v := strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(f.Value), "\r\n", "\n"), "\r", "\n")
		fields = append(fields, f.Name+": "+strings.ReplaceAll(v, "\n", "\n  "))
	}
	if len(fields) > 0 {
		b.WriteString("\n" + strings.Join(fields, "\n") + "\n")
	}
	if m.Link != "" {
		b.WriteString("\nOpen in svc: " + m.Link + "\n")
	}
	return b.String()
}

// subject is the Subject header's value for s: one line cut to
// maxSubject characters, encoded as RFC 2047 words unless it is plain
// ASCII (deliver.EncodeWords), folded between words so that no line is
// too long. It can never end the header.
func subject(s string) string {
	return strings.Join(deliver.EncodeWords(deliver.Cut(deliver.OneLine(s), maxSubject)), "\r\n ")
}

// isToken: an event name is letters, digits, dots and underscores.
func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_')
	})
}

// messageID is a new Message-ID at the sender's domain.
func messageID(from *mail.Address) string {
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	if !isDomain(domain) {
		domain = "svc.invalid"
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	return "<" + hex.EncodeToString(r[:]) + "@" + domain + ">"
}

func isDomain(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-')
	})
}
