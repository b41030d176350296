package detect

import (
	"errors"
	"strings"
)

// errShellSyntax means a command line uses what only a shell can do:
// pipes, lists, redirections, substitutions, or a quote left open.
var errShellSyntax = errors.New("command needs a shell")

// splitWords splits a command line into words the way a POSIX shell does
// for a simple command, without running one: blanks separate words, single
// quotes keep everything, double quotes keep everything but \" \\ \$ \`,
// and a backslash outside quotes escapes the next character. Variable
// references ($NAME, ${NAME}) are kept as written. Operators (| & ; < > (
// ) and backquotes or $( ) outside quotes make it fail with
// errShellSyntax, as does an unterminated quote.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errShellSyntax
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			closed := false
		quoted:
			for i++; i < len(s); i++ {
				switch d := s[i]; {
				case d == '"':
					closed = true
					break quoted
				case d == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0:
					i++
					if s[i] != '\n' {
						cur.WriteByte(s[i])
					}
				case d == '`' || (d == '$' && i+1 < len(s) && s[i+1] == '('):
					return nil, errShellSyntax
				default:
					cur.WriteByte(d)
				}
			}
			if !closed {
				return nil, errShellSyntax
			}
		case strings.IndexByte("|&;<>()`", c) >= 0, c == '$' && i+1 < len(s) && s[i+1] == '(':
			return nil, errShellSyntax
		case c == '#' && !inWord:
			i = len(s) // a comment runs to the end
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// joinWords is the inverse of splitWords: words are quoted where needed.
func joinWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsAny(w, " \t\n\r\\'\"|&;<>()`$#*?[]{}~") {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
