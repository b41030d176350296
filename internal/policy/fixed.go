package policy

import (
	"fmt"
	"slices"
)

// Origins of a setting fixed at startup.
const (
	OriginEnvironment = "environment"
	OriginConfigFile  = "config_file"
)

// Fixed holds the settings fixed at startup: each one overrides the saved
// policy, cannot be changed through the API while fixed, and is never written
// into the saved policy. The zero value holds none. A Fixed is filled once at
// startup and only read afterwards; it is not safe to Set concurrently with
// other use.
type Fixed struct {
	entries map[string]FixedEntry
}

// FixedEntry is one fixed setting, as GET /config lists it.
type FixedEntry struct {
	Name   string `json:"name"`
	Value  any    `json:"value"`
	Origin string `json:"origin"`
}

// Set fixes a setting. value is checked and converted like ParseYAML does,
// so it may be a typed value from ParseEnv or ParseYAML or a raw decoded one.
// origin is OriginEnvironment or OriginConfigFile. Setting a name again
// replaces the earlier value and origin.
func (f *Fixed) Set(name string, value any, origin string) error {
	s, ok := lookup(name)
	if !ok {
		return &UnknownSettingError{Name: name}
	}
	if origin != OriginEnvironment && origin != OriginConfigFile {
		return fmt.Errorf("fix policy setting %s: origin %s is not accepted (accepted: %s, %s)", name, quote(origin), OriginEnvironment, OriginConfigFile)
	}
	v, err := parseValue(s, value)
	if err != nil {
		return err
	}
	if f.entries == nil {
		f.entries = make(map[string]FixedEntry)
	}
	f.entries[name] = FixedEntry{Name: name, Value: v, Origin: origin}
	return nil
}

// Names returns the names of the fixed settings, in catalogue order.
func (f Fixed) Names() []string {
	out := []string{}
	for _, s := range catalogue {
		if _, ok := f.entries[s.name]; ok {
			out = append(out, s.name)
		}
	}
	return out
}

// Has reports whether the setting name is fixed.
func (f Fixed) Has(name string) bool {
	_, ok := f.entries[name]
	return ok
}

// Get returns the fixed entry of a setting and whether it is fixed.
func (f Fixed) Get(name string) (FixedEntry, bool) {
	e, ok := f.entries[name]
	if !ok {
		return FixedEntry{}, false
	}
	return copyEntry(e), true
}

// Len returns how many settings are fixed.
func (f Fixed) Len() int { return len(f.entries) }

// Apply returns a copy of p in which every fixed setting has its fixed value.
func (f Fixed) Apply(p Policy) Policy {
	q := p.Clone()
	for i := range catalogue {
		if e, ok := f.entries[catalogue[i].name]; ok {
			catalogue[i].set(&q, e.Value)
		}
	}
	return q
}

// Entries returns the fixed settings in catalogue order; the slice is never
// nil and its values are copies.
func (f Fixed) Entries() []FixedEntry {
	out := []FixedEntry{}
	for _, s := range catalogue {
		if e, ok := f.entries[s.name]; ok {
			out = append(out, copyEntry(e))
		}
	}
	return out
}

func copyEntry(e FixedEntry) FixedEntry {
	if l, ok := e.Value.([]string); ok {
		e.Value = slices.Clone(l)
	}
	return e
}
