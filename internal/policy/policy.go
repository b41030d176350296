// Package policy owns host policy: the catalogue of policy settings, the
// parsing and validation of their values from the environment, from the
// config file and from API bodies, their defaults, and the overlay of
// settings fixed at startup.
//
// It must not touch storage, HTTP, the process environment or the file
// system: callers hand it raw values and it hands back typed, validated ones.
// Where the saved policy lives and how a change reaches it belong elsewhere.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Policy is the host policy. Every field is one setting; the JSON tag is the
// setting's name. A nil list means the same as an empty one and is marshalled
// as [].
type Policy struct {
	SourceAllowlist            []string `json:"source_allowlist"`
	DisabledVerbs              []string `json:"disabled_verbs"`
	AgentDisabledVerbs         []string `json:"agent_disabled_verbs"`
	PublicSharing              string   `json:"public_sharing"`
	AllowAnonymousGrants       bool     `json:"allow_anonymous_grants"`
	MinBuildIsolation          string   `json:"min_build_isolation"`
	MinRuntimeIsolation        string   `json:"min_runtime_isolation"`
	EgressAllowlist            []string `json:"egress_allowlist"`
	RequireBackupBeforeDestroy bool     `json:"require_backup_before_destroy"`
	MaxTokenLifetimeDays       int      `json:"max_token_lifetime_days"`
	MaxLogDiskBytes            int64    `json:"max_log_disk_bytes"`
	DisableAIScreening         bool     `json:"disable_ai_screening"`
	MinSecurityScore           int      `json:"min_security_score"`
	InsecureAction             string   `json:"insecure_action"`
	InsecureGraceHours         int      `json:"insecure_grace_hours"`
	IgnoreUnfixableFindings    bool     `json:"ignore_unfixable_findings"`
	AllowPrivateWebhooks       bool     `json:"allow_private_webhooks"`
}

// Values of public_sharing. The empty string means unset.
const (
	SharingAllowed      = "allowed"
	SharingPasscodeOnly = "passcode_only"
	SharingNone         = "none"
)

// Isolation levels, weakest first.
const (
	IsolationNone      = "none"
	IsolationSandbox   = "sandbox"
	IsolationContainer = "container"
	IsolationVM        = "vm"
)

// Values of insecure_action.
const (
	InsecureWarn = "warn"
	InsecureStop = "stop"
)

// Default returns the policy of a fresh installation.
func Default() Policy {
	return Policy{
		SourceAllowlist:      []string{},
		DisabledVerbs:        []string{},
		AgentDisabledVerbs:   []string{},
		AllowAnonymousGrants: true,
		MinBuildIsolation:    IsolationNone,
		MinRuntimeIsolation:  IsolationNone,
		EgressAllowlist:      []string{},
		InsecureAction:       InsecureWarn,
		InsecureGraceHours:   24,
	}
}

// Names returns the name of every setting, in catalogue order.
func Names() []string {
	out := make([]string, len(catalogue))
	for i, s := range catalogue {
		out[i] = s.name
	}
	return out
}

// Known reports whether name is a policy setting.
func Known(name string) bool {
	_, ok := lookup(name)
	return ok
}

// EffectivePublicSharing returns public_sharing when it is set. When it is
// unset, allow_anonymous_grants false means none and true means allowed.
func (p Policy) EffectivePublicSharing() string {
	switch {
	case p.PublicSharing != "":
		return p.PublicSharing
	case !p.AllowAnonymousGrants:
		return SharingNone
	default:
		return SharingAllowed
	}
}

// isolationLevels lists the isolation levels, weakest first.
var isolationLevels = [...]string{IsolationNone, IsolationSandbox, IsolationContainer, IsolationVM}

// IsolationRank returns the position of an isolation level in the order
// none < sandbox < container < vm, and false for an unknown level.
func IsolationRank(level string) (int, bool) {
	for i, l := range isolationLevels {
		if l == level {
			return i, true
		}
	}
	return 0, false
}

// AtLeast reports whether the isolation level have satisfies the minimum
// want. An unknown level on either side never satisfies: the check fails
// closed.
func AtLeast(have, want string) bool {
	h, ok := IsolationRank(have)
	if !ok {
		return false
	}
	m, ok := IsolationRank(want)
	if !ok {
		return false
	}
	return h >= m
}

// EffectiveIsolation returns an isolation minimum of p (its
// min_build_isolation or min_runtime_isolation) as it applies: raised to
// sandbox while egress_allowlist is set, because an egress list is
// enforced only from an isolated network (the process runtime's sandbox);
// without one the list would be refused at run time or not enforced.
func (p Policy) EffectiveIsolation(min string) string {
	if len(p.EgressAllowlist) > 0 && !AtLeast(min, IsolationSandbox) {
		return IsolationSandbox
	}
	return min
}

// Map returns every setting with its value, for GET /policy. Lists are never
// nil, and they are copies: changing them does not change p.
func (p Policy) Map() map[string]any {
	m := make(map[string]any, len(catalogue))
	for _, s := range catalogue {
		m[s.name] = s.get(&p)
	}
	return m
}

// FromMap builds a policy from a PUT /policy body decoded from JSON (numbers
// as float64 or json.Number) or from the result of Map. Missing settings take
// their defaults; unknown settings and bad values are refused, all of them
// reported together.
func FromMap(m map[string]any) (Policy, error) {
	p := Default()
	var errs []error
	for i := range catalogue {
		s := &catalogue[i]
		raw, ok := m[s.name]
		if !ok {
			continue
		}
		v, err := parseValue(s, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.set(&p, v)
	}
	var unknown []string
	for k := range m {
		if !Known(k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		errs = append(errs, &UnknownSettingError{Name: k})
	}
	if len(errs) > 0 {
		return Policy{}, errors.Join(errs...)
	}
	return p, nil
}

// Validate checks every setting of p with the same rules as the parsers, for
// a policy that did not come through them (for example one read back from
// storage).
func (p Policy) Validate() error {
	var errs []error
	for i := range catalogue {
		s := &catalogue[i]
		if _, err := parseValue(s, s.get(&p)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Clone returns a deep copy of p with nil lists replaced by empty ones.
func (p Policy) Clone() Policy {
	q := p
	q.SourceAllowlist = cloneList(p.SourceAllowlist)
	q.DisabledVerbs = cloneList(p.DisabledVerbs)
	q.AgentDisabledVerbs = cloneList(p.AgentDisabledVerbs)
	q.EgressAllowlist = cloneList(p.EgressAllowlist)
	return q
}

// MarshalJSON encodes p with every list as an array, never null.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy // drops the method set, so no recursion
	b, err := json.Marshal(plain(p.Clone()))
	if err != nil {
		return nil, fmt.Errorf("marshal policy: %w", err)
	}
	return b, nil
}

func cloneList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return slices.Clone(l)
}
