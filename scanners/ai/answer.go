package ai

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/svchost/svc/internal/scan"
)

// maxTitle is the most runes of a finding's title the model gives.
const maxTitle = 200

// found is one finding of an answer, checked.
type found struct {
	severity string
	title    string
	path     string // "" for none
	fixable  bool
}

// completion is the part of a chat completion read.
type completion struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// answer is what the model is asked to put in the message: exactly this.
type answer struct {
	Findings *[]answerFinding `json:"findings"`
}

type answerFinding struct {
	Severity string  `json:"severity"`
	Title    string  `json:"title"`
	Path     *string `json:"path"`
	Fixable  *bool   `json:"fixable"`
}

var severities = map[string]bool{scan.Critical: true, scan.High: true, scan.Medium: true, scan.Low: true}

// parseAnswer reads a chat completion's body: the first choice's message
// must be one JSON object with a "findings" list and nothing after it
// (keys a model adds, such as a summary or a finding's description, are
// ignored: nothing but the four fields below is kept). Of its findings, those with a severity outside the
// four, no title left once sanitized, no fixable, or a path that is not
// one of files are dropped, and so are those past max; dropped counts
// them. A body that is not that is an error, which never quotes it.
func parseAnswer(body []byte, files map[string]bool, max int) ([]found, int, error) {
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, 0, errors.New("not a chat completion")
	}
	if len(c.Choices) == 0 || c.Choices[0].Message.Content == nil {
		return nil, 0, errors.New("no message")
	}
	dec := json.NewDecoder(strings.NewReader(*c.Choices[0].Message.Content))
	var a answer
	if err := dec.Decode(&a); err != nil {
		return nil, 0, errors.New("the message is not the findings object asked for")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("the message goes on after the findings object")
	}
	if a.Findings == nil {
		return nil, 0, errors.New("the message has no findings list")
	}
	var out []found
	dropped := 0
	seen := map[found]bool{}
	for _, f := range *a.Findings {
		g, ok := check(f, files)
		if !ok || len(out) >= max || seen[g] {
			dropped++
			continue
		}
		seen[g] = true
		out = append(out, g)
	}
	return out, dropped, nil
}

// check is a finding of the answer as kept, or false.
func check(f answerFinding, files map[string]bool) (found, bool) {
	g := found{severity: f.Severity, title: sanitize(f.Title)}
	if !severities[g.severity] || g.title == "" || f.Fixable == nil {
		return found{}, false
	}
	g.fixable = *f.Fixable
	if f.Path != nil {
		if !files[*f.Path] {
			return found{}, false
		}
		g.path = *f.Path
	}
	return g, true
}

// sanitize is a title on one line: control and format characters and
// runs of spaces become one space, secrets are redacted, and it is cut at
// maxTitle runes.
func sanitize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs) || r == unicode.ReplacementChar {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	out := string(scan.Redact([]byte(b.String())))
	if r := []rune(out); len(r) > maxTitle {
		out = string(r[:maxTitle-1]) + "…"
	}
	return out
}

// findings are the answer's findings as internal/scan's, with IDs stable
// for the same answer: "ai:<adapter ID>:" and a digest of what they say.
func findings(adapterID string, fs []found) []scan.Finding {
	out := make([]scan.Finding, 0, len(fs))
	for _, f := range fs {
		var key bytes.Buffer
		fmt.Fprintf(&key, "%s\x00%s\x00%s", f.severity, f.title, f.path)
		sum := sha256.Sum256(key.Bytes())
		sf := scan.Finding{ID: "ai:" + adapterID + ":" + hex.EncodeToString(sum[:6]), Severity: f.severity,
			Title: "AI screening: " + f.title, Fixable: f.fixable}
		if f.path != "" {
			p := f.path
			sf.Path = &p
		}
		out = append(out, sf)
	}
	return out
}
