package adapters

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// Origins of an adapter in GET /adapters: configured through the API (in
// the store), an embedded default, or declared at startup in the config
// file or the environment.
const (
	OriginAPI         = "api"
	OriginDefault     = "default"
	OriginConfigFile  = "config_file"
	OriginEnvironment = "environment"
)

// Declared is an adapter declared at startup (the config file's adapters
// section or SVC_ADAPTERS). It is loaded like an embedded default, never
// written into the store; it overrides a stored adapter with the same ID
// (which comes back when the declaration is removed and the server
// restarts), and cannot be configured or deleted through the API.
type Declared struct {
	ID       string
	Category string
	Kind     string
	Settings map[string]string
	// Credentials are the values read at startup, by name. They are
	// never shown, logged or stored.
	Credentials map[string]string
	// Sources say where each credential is read from ("file /path", "env
	// NAME"): GET /adapters shows them, never the values.
	Sources map[string]string
	// Primary: true makes it its category's primary, false keeps it
	// from being one, nil lets the rule decide (see Load).
	Primary *bool
	// Origin is OriginConfigFile or OriginEnvironment; Source names where
	// it was declared in errors and remedies ("the config file
	// /etc/svc/svc.yaml", "SVC_ADAPTERS").
	Origin string
	Source string
}

// adapter is the declaration as an Adapter (without credentials, which
// are never sealed: they are read again at each start).
func (d Declared) adapter() Adapter {
	return Adapter{ID: d.ID, Category: d.Category, Kind: d.Kind, Settings: maps.Clone(d.Settings)}
}

// CheckDeclared checks declared adapters against kinds as New does, for a
// caller that checks a configuration before it starts anything.
func CheckDeclared(kinds []Kind, decl []Declared) error { return checkDeclared(kinds, decl) }

// checkDeclared checks the declared adapters against the kinds this build
// runs, as Configure checks a request: a known category and kind, a
// built-in kind only under its well-known ID (and a well-known ID only
// with its kind), known settings that are not credentials, known
// credentials, the required ones, and the kind's Validate; at most one
// primary: true per category. Each error names the adapter and the field.
func checkDeclared(kinds []Kind, decl []Declared) error {
	var errs []error
	primary := map[string]string{}
	ids := map[string]bool{}
	for _, d := range decl {
		fail := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: adapter %s: %s: %s", d.Source, d.ID, field, fmt.Sprintf(format, args...)))
		}
		if ids[d.ID] {
			fail("id", "declared twice")
			continue
		}
		ids[d.ID] = true
		if !slices.Contains(Categories(), d.Category) {
			fail("category", "unknown adapter category %q (categories: %v)", d.Category, Categories())
			continue
		}
		k, ok := findKind(kinds, d.Category, d.Kind)
		if !ok {
			fail("kind", "this build has no %s adapter of kind %q (kinds: %v)", d.Category, d.Kind, kindNames(kinds, d.Category))
			continue
		}
		if k.Default && d.ID != k.DefaultID {
			fail("id", "the %s adapter of kind %s is built in and exists once, as %s; declare it with that id", k.Category, k.Name, k.DefaultID)
			continue
		}
		if b, ok := builtinOf(kinds, d.ID); ok && (b.Category != k.Category || b.Name != k.Name) {
			fail("id", "%s is the built-in %s adapter of kind %s; declare another kind under another id", d.ID, b.Category, b.Name)
			continue
		}
		if d.Primary != nil && *d.Primary {
			if other, dup := primary[d.Category]; dup {
				fail("primary", "%s is already the declared primary %s adapter; one per category", other, d.Category)
			}
			primary[d.Category] = d.ID
		}
		for _, name := range slices.Sorted(maps.Keys(d.Settings)) {
			st, ok := k.setting(name)
			switch {
			case !ok:
				fail("settings."+name, "%s/%s has no setting %q (settings: %v)", k.Category, k.Name, name, settingNames(k, false))
			case st.Credential:
				fail("settings."+name, "%q is a credential: declare it under credentials, read from a file or a variable", name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(d.Credentials)) {
			if st, ok := k.setting(name); !ok || !st.Credential {
				fail("credentials."+name, "%s/%s has no credential %q (credentials: %v)", k.Category, k.Name, name, settingNames(k, true))
			}
		}
		a := d.adapter()
		a.Credentials = map[string][]byte{}
		for name := range d.Credentials {
			a.Credentials[name] = nil // present; checks see only names
		}
		if err := checkRequired(k, a); err != nil {
			fail(fieldOf(k, err), "%s", messageOnly(err))
			continue
		}
		if k.Validate != nil {
			if err := k.Validate(withDefaults(k, a.Settings), slices.Sorted(maps.Keys(d.Credentials))); err != nil {
				fail(fieldOf(k, err), "%s", messageOnly(err))
			}
		}
	}
	return errors.Join(errs...)
}

// fieldOf names the field of a declaration an error of k's checks is
// about, from its details.field: settings.x or credentials.x as the
// declaration names them (the API's config.x, or a bare setting name);
// settings when it names none.
func fieldOf(k Kind, err error) string {
	e, ok := errcode.As(err)
	if !ok {
		return "settings"
	}
	f, _ := e.Details["field"].(string)
	f = strings.TrimPrefix(f, "config.")
	st, ok := k.setting(f)
	switch {
	case !ok:
		if f == "" {
			return "settings"
		}
		return f
	case st.Credential:
		return "credentials." + f
	}
	return "settings." + f
}

// messageOnly is an error's message without its code.
func messageOnly(err error) string {
	if e, ok := errcode.As(err); ok {
		return e.Message
	}
	return err.Error()
}

func findKind(kinds []Kind, category, name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Category == category && k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

func builtinOf(kinds []Kind, id string) (Kind, bool) {
	for _, k := range kinds {
		if k.Default && k.DefaultID == id {
			return k, true
		}
	}
	return Kind{}, false
}

func kindNames(kinds []Kind, category string) []string {
	var out []string
	for _, k := range kinds {
		if k.Category == category {
			out = append(out, k.Name)
		}
	}
	sort.Strings(out)
	return out
}

func settingNames(k Kind, credential bool) []string {
	out := []string{}
	for _, st := range k.Settings {
		if st.Credential == credential {
			out = append(out, st.Name)
		}
	}
	return out
}

// declared returns the declaration of id.
func (s *Service) declared(id string) (Declared, bool) {
	for _, d := range s.d.Declared {
		if d.ID == id {
			return d, true
		}
	}
	return Declared{}, false
}

// DeclaredCategory returns the category of the adapter declared at
// startup with that ID.
func (s *Service) DeclaredCategory(id string) (string, bool) {
	d, ok := s.declared(id)
	return d.Category, ok
}

// fixedAtStartup is the refusal of a change to or the deletion of a
// declared adapter through the API.
func fixedAtStartup(d Declared, what string) *errcode.Error {
	return errcode.New(errcode.StateInvalid, "adapter %s is declared in %s and fixed at startup; it cannot be %s through the API", d.ID, d.Source, what).
		WithDetail("adapter_id", d.ID).WithDetail("origin", d.Origin).
		WithRemedy("change or remove it in the config file's adapters section (or SVC_ADAPTERS, which wins over the file), then restart (POST /api/v1/restart reads the config file again; the environment is read only when the process starts)")
}
