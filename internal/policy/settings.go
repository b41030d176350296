package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/authz"
)

// kind is the type of a setting's value.
type kind int

const (
	kindList kind = iota // []string
	kindEnum             // string from a fixed set
	kindBool             // bool
	kindInt              // int within [lo, hi]
	kindSize             // int64 byte count, >= 0
)

// setting describes one policy setting: its name, the type of its value,
// where it lives in Policy and how a value is checked.
type setting struct {
	name string
	kind kind

	list    func(*Policy) *[]string
	str     func(*Policy) *string
	boolean func(*Policy) *bool
	integer func(*Policy) *int
	size    func(*Policy) *int64

	item      func(string) error // checks one list item
	enum      []string           // accepted values of an enum
	unsetOK   bool               // an enum may be "" (unset)
	lo, hi    int64              // range of an int
	rangeText string             // the range in words, for errors
}

// catalogue lists every setting in the order of the specification. The order
// is the order of Names, Map and error reports.
var catalogue = [...]setting{
	{name: "source_allowlist", kind: kindList, list: func(p *Policy) *[]string { return &p.SourceAllowlist }, item: checkSourcePattern},
	{name: "disabled_verbs", kind: kindList, list: func(p *Policy) *[]string { return &p.DisabledVerbs }, item: checkVerb},
	{name: "agent_disabled_verbs", kind: kindList, list: func(p *Policy) *[]string { return &p.AgentDisabledVerbs }, item: checkVerb},
	{name: "public_sharing", kind: kindEnum, str: func(p *Policy) *string { return &p.PublicSharing }, enum: []string{SharingAllowed, SharingPasscodeOnly, SharingNone}, unsetOK: true},
	{name: "allow_anonymous_grants", kind: kindBool, boolean: func(p *Policy) *bool { return &p.AllowAnonymousGrants }},
	{name: "min_build_isolation", kind: kindEnum, str: func(p *Policy) *string { return &p.MinBuildIsolation }, enum: isolationLevels[:]},
	{name: "min_runtime_isolation", kind: kindEnum, str: func(p *Policy) *string { return &p.MinRuntimeIsolation }, enum: isolationLevels[:]},
	{name: "egress_allowlist", kind: kindList, list: func(p *Policy) *[]string { return &p.EgressAllowlist }, item: checkEgress},
	{name: "require_backup_before_destroy", kind: kindBool, boolean: func(p *Policy) *bool { return &p.RequireBackupBeforeDestroy }},
	{name: "max_token_lifetime_days", kind: kindInt, integer: func(p *Policy) *int { return &p.MaxTokenLifetimeDays }, lo: 0, hi: math.MaxInt, rangeText: "0 or more; 0 means no cap"},
	{name: "max_log_disk_bytes", kind: kindSize, size: func(p *Policy) *int64 { return &p.MaxLogDiskBytes }},
	{name: "disable_ai_screening", kind: kindBool, boolean: func(p *Policy) *bool { return &p.DisableAIScreening }},
	{name: "min_security_score", kind: kindInt, integer: func(p *Policy) *int { return &p.MinSecurityScore }, lo: 0, hi: 100, rangeText: "0 to 100"},
	{name: "insecure_action", kind: kindEnum, str: func(p *Policy) *string { return &p.InsecureAction }, enum: []string{InsecureWarn, InsecureStop}},
	{name: "insecure_grace_hours", kind: kindInt, integer: func(p *Policy) *int { return &p.InsecureGraceHours }, lo: 0, hi: math.MaxInt, rangeText: "0 or more"},
	{name: "ignore_unfixable_findings", kind: kindBool, boolean: func(p *Policy) *bool { return &p.IgnoreUnfixableFindings }},
	{name: "allow_private_webhooks", kind: kindBool, boolean: func(p *Policy) *bool { return &p.AllowPrivateWebhooks }},
}

func lookup(name string) (*setting, bool) {
	for i := range catalogue {
		if catalogue[i].name == name {
			return &catalogue[i], true
		}
	}
	return nil, false
}

// get returns the setting's value in p; a list is a non-nil copy.
func (s *setting) get(p *Policy) any {
	switch s.kind {
	case kindList:
		return cloneList(*s.list(p))
	case kindEnum:
		return *s.str(p)
	case kindBool:
		return *s.boolean(p)
	case kindInt:
		return *s.integer(p)
	default:
		return *s.size(p)
	}
}

// set stores v, which must be of the setting's type (as parseValue returns
// it), in p. A list is copied.
func (s *setting) set(p *Policy, v any) {
	switch s.kind {
	case kindList:
		*s.list(p) = cloneList(v.([]string))
	case kindEnum:
		*s.str(p) = v.(string)
	case kindBool:
		*s.boolean(p) = v.(bool)
	case kindInt:
		*s.integer(p) = v.(int)
	default:
		*s.size(p) = v.(int64)
	}
}

// ParseEnv parses the environment form of a setting's value and returns it
// typed ([]string, string, bool, int or int64 for max_log_disk_bytes) and
// validated.
//
// Lists are comma separated; items are trimmed and empty items dropped, so an
// empty string is an empty list. Booleans are true, false, 1, 0, yes or no in
// any case. Whole numbers are decimal; max_log_disk_bytes also takes sizes
// such as 512MiB, 1GB or 100k. Other values are trimmed of surrounding space.
func ParseEnv(name, raw string) (any, error) {
	s, ok := lookup(name)
	if !ok {
		return nil, &UnknownSettingError{Name: name}
	}
	v, err := s.parseString(raw)
	if err != nil {
		return nil, &SettingError{Setting: name, Err: err}
	}
	return v, nil
}

// ParseYAML parses a setting's value as yaml.v3 decodes it into an any
// (string, int, int64, uint64, float64, bool, []any or nil) and returns it
// typed and validated like ParseEnv.
//
// Lists take a sequence of strings or one comma-separated string, and nil is
// an empty list. Booleans take YAML booleans, 0 and 1, or the spellings of
// ParseEnv. Whole numbers take integers, floats without a fraction, or
// decimal strings. public_sharing takes nil as unset.
func ParseYAML(name string, node any) (any, error) {
	s, ok := lookup(name)
	if !ok {
		return nil, &UnknownSettingError{Name: name}
	}
	return parseValue(s, node)
}

// parseString parses the environment form of a value for s.
func (s *setting) parseString(raw string) (any, error) {
	switch s.kind {
	case kindList:
		return s.checkList(splitList(raw))
	case kindEnum:
		return s.checkEnum(strings.TrimSpace(raw))
	case kindBool:
		return parseBoolWord(raw)
	case kindInt:
		n, err := parseDecimal(raw)
		if err != nil {
			return nil, err
		}
		return s.checkInt(n)
	default:
		return parseSize(raw)
	}
}

// parseValue coerces a decoded value (YAML, JSON or Map's own types) for s
// and validates it. Errors name the setting.
func parseValue(s *setting, raw any) (any, error) {
	v, err := s.coerce(raw)
	if err != nil {
		return nil, &SettingError{Setting: s.name, Err: err}
	}
	return v, nil
}

func (s *setting) coerce(raw any) (any, error) {
	switch s.kind {
	case kindList:
		items, err := toList(raw)
		if err != nil {
			return nil, err
		}
		return s.checkList(items)
	case kindEnum:
		if raw == nil && s.unsetOK {
			return "", nil
		}
		str, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("%s is not a string (%s)", describe(raw), s.acceptedEnum())
		}
		return s.checkEnum(strings.TrimSpace(str))
	case kindBool:
		return toBool(raw)
	case kindInt:
		n, err := toInt64(raw)
		if err != nil {
			return nil, err
		}
		return s.checkInt(n)
	default:
		if str, ok := raw.(string); ok {
			return parseSize(str)
		}
		n, err := toInt64(raw)
		if err != nil {
			return nil, fmt.Errorf("%w (%s)", err, sizeAccepted)
		}
		if n < 0 {
			return nil, fmt.Errorf("%d is negative (%s)", n, sizeAccepted)
		}
		return n, nil
	}
}

func (s *setting) checkList(items []string) ([]string, error) {
	for i, item := range items {
		if err := s.item(item); err != nil {
			return nil, fmt.Errorf("item %d: %w", i+1, err)
		}
	}
	return items, nil
}

func (s *setting) checkEnum(v string) (string, error) {
	if v == "" && s.unsetOK {
		return "", nil
	}
	if slices.Contains(s.enum, v) {
		return v, nil
	}
	return "", fmt.Errorf("%s is not accepted (%s)", quote(v), s.acceptedEnum())
}

func (s *setting) acceptedEnum() string {
	text := "accepted: " + strings.Join(s.enum, ", ")
	if s.unsetOK {
		text += ", or empty for unset"
	}
	return text
}

func (s *setting) checkInt(n int64) (int, error) {
	if n < s.lo || n > s.hi {
		return 0, fmt.Errorf("%d is out of range (%s)", n, s.rangeText)
	}
	return int(n), nil
}

func checkVerb(v string) error {
	if authz.Known(authz.Verb(v)) {
		return nil
	}
	known := make([]string, 0, len(authz.All()))
	for _, k := range authz.All() {
		known = append(known, string(k))
	}
	return fmt.Errorf("%s is not a known verb (known verbs: %s)", quote(v), strings.Join(known, ", "))
}
