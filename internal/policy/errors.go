package policy

import (
	"fmt"
	"strings"
)

// SettingError reports a bad value for a known setting. Err says what is
// wrong with the value and what is accepted, without naming the setting, so
// that a caller can name it its own way (an environment variable, a key in a
// file); Error names it as a policy setting.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string {
	return "policy setting " + e.Setting + ": " + e.Err.Error()
}

func (e *SettingError) Unwrap() error { return e.Err }

// UnknownSettingError reports a setting name that is not in the catalogue.
type UnknownSettingError struct {
	Name string
}

func (e *UnknownSettingError) Error() string {
	return fmt.Sprintf("unknown policy setting %s (known settings: %s)", quote(e.Name), strings.Join(Names(), ", "))
}
