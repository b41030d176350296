package password

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		password string
		username string
		want     error
	}{
		{"ok", "correct horse battery", "alice", nil},
		{"exactly 12", "abcdefghijkl", "alice", nil},
		{"11", "abcdefghijk", "alice", ErrTooShort},
		{"empty", "", "alice", ErrTooShort},
		{"12 runes in more bytes", "ééééééééééé€", "alice", nil},
		{"11 runes in 33 bytes", strings.Repeat("€", 11), "alice", ErrTooShort},
		{"256 bytes", strings.Repeat("a", 256), "alice", nil},
		{"257 bytes", strings.Repeat("a", 257), "alice", ErrTooLong},
		{"86 runes in 258 bytes", strings.Repeat("€", 86), "alice", ErrTooLong},
		{"spaces", strings.Repeat(" ", 12), "alice", ErrOnlyWhitespace},
		{"mixed whitespace", " \t\n\r\v\f\u00a0\u2003\u3000   ", "alice", ErrOnlyWhitespace},
		{"spaces around", "   a         ", "alice", nil},
		{"username", "alice.example", "alice.example", ErrSameAsUsername},
		{"username other case", "Alice.Example", "aLICE.eXAMPLE", ErrSameAsUsername},
		{"username padded", " alice.example ", "alice.example", ErrSameAsUsername},
		{"username unicode case", "ÅNGSTRÖMÉÉÉÉ", "ångströméééé", ErrSameAsUsername},
		{"contains username", "alice.example!", "alice.example", nil},
		{"empty username", "correct horse battery", "", nil},
		{"invalid UTF-8", "abcdefghijk\xff", "alice", ErrInvalidUTF8},
		{"truncated rune", "abcdefghijkl\xe2\x82", "alice", ErrInvalidUTF8},
		{"NUL is fine", "abcdef\x00ghijkl", "alice", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.password, tt.username); got != tt.want {
				t.Errorf("Check(%q, %q) = %v, want %v", tt.password, tt.username, got, tt.want)
			}
		})
	}
}

// checkErrors are all the errors Check may return.
var checkErrors = []error{ErrInvalidUTF8, ErrTooLong, ErrTooShort, ErrOnlyWhitespace, ErrSameAsUsername}

func FuzzCheck(f *testing.F) {
	f.Add("correct horse battery", "alice")
	f.Add("abcdefghijk", "")
	f.Add(strings.Repeat(" ", 20), "x")
	f.Add("Alice.Example", "alice.example")
	f.Add("abcdefghijk\xff", "")
	f.Add(strings.Repeat("€", 86), "")
	f.Fuzz(func(t *testing.T, password, username string) {
		err := Check(password, username)
		if err == nil {
			switch {
			case !utf8.ValidString(password):
				t.Errorf("Check(%q) accepted invalid UTF-8", password)
			case len(password) > MaxBytes:
				t.Errorf("Check(%q) accepted %d bytes", password, len(password))
			case utf8.RuneCountInString(password) < MinRunes:
				t.Errorf("Check(%q) accepted %d characters", password, utf8.RuneCountInString(password))
			case strings.TrimFunc(password, unicode.IsSpace) == "":
				t.Errorf("Check(%q) accepted only whitespace", password)
			case strings.EqualFold(password, username):
				t.Errorf("Check(%q, %q) accepted the username", password, username)
			}
			return
		}
		// Only the fixed errors, so the message cannot carry the password.
		known := false
		for _, e := range checkErrors {
			if err == e {
				known = true
			}
		}
		if !known {
			t.Errorf("Check(%q, %q) = %v, not one of the fixed errors", password, username, err)
		}
		if again := Check(password, username); !errors.Is(again, err) {
			t.Errorf("Check is not deterministic: %v then %v", err, again)
		}
	})
}
