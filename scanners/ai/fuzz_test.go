package ai

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParseAnswer: whatever an endpoint answers, parseAnswer does not
// fall over, and what it keeps is within bounds: at most the maximum,
// severities of the four, one-line titles of at most maxTitle runes,
// paths only of the checkout's files.
func FuzzParseAnswer(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"content":"{\"findings\":[{\"severity\":\"high\",\"title\":\"t\",\"path\":\"Dockerfile\",\"fixable\":true}]}"}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"{\"findings\":[{\"severity\":\"low\",\"title\":\"\\u0000\\n x\",\"path\":null,\"fixable\":false}]}"}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"{\"findings\":[{\"severity\":\"high\",\"title\":\"t\",\"path\":\"../x\",\"fixable\":true}]} {}"}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`not json`))
	files := map[string]bool{"Dockerfile": true, "go.mod": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, dropped, err := parseAnswer(body, files, 3)
		if err != nil {
			if got != nil || dropped != 0 {
				t.Fatalf("an error with findings: %v %d", got, dropped)
			}
			return
		}
		if len(got) > 3 || dropped < 0 {
			t.Fatalf("%d findings, %d dropped", len(got), dropped)
		}
		for _, g := range got {
			if !severities[g.severity] || (g.path != "" && !files[g.path]) || g.title == "" ||
				utf8.RuneCountInString(g.title) > maxTitle || !utf8.ValidString(g.title) ||
				strings.IndexFunc(g.title, func(r rune) bool { return unicode.IsControl(r) || r == '\n' }) >= 0 {
				t.Fatalf("kept %+v", g)
			}
		}
	})
}
