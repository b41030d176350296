package password

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Password rules.
const (
	MinRunes = 12  // characters
	MaxBytes = 256 // bytes of UTF-8
)

// The errors of Check. Their messages state the rule, are meant to be shown
// to the user, and never include the password.
var (
	ErrInvalidUTF8    = errors.New("password must be valid UTF-8 text")
	ErrTooLong        = errors.New("password must be at most 256 bytes long")
	ErrTooShort       = errors.New("password must be at least 12 characters long")
	ErrOnlyWhitespace = errors.New("password must not consist only of spaces")
	ErrSameAsUsername = errors.New("password must differ from the username")
)

// Check returns nil if password meets the rules for the user username, or
// the error of the first rule it breaks: valid UTF-8, at most MaxBytes bytes,
// at least MinRunes characters, not only whitespace, and not the username
// (ignoring case and surrounding whitespace).
func Check(password, username string) error {
	switch {
	case !utf8.ValidString(password):
		return ErrInvalidUTF8
	case len(password) > MaxBytes:
		return ErrTooLong
	case utf8.RuneCountInString(password) < MinRunes:
		return ErrTooShort
	case strings.TrimFunc(password, unicode.IsSpace) == "":
		return ErrOnlyWhitespace
	case strings.EqualFold(strings.TrimSpace(password), strings.TrimSpace(username)):
		return ErrSameAsUsername
	}
	return nil
}
