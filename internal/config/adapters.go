package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Adapter is an adapter declared in the config file's adapters section or
// in SVC_ADAPTERS. It is loaded at startup like an embedded default (never
// written into the replicated store), overrides a stored adapter with the
// same ID, and cannot be changed or deleted through the API. Its kind and
// settings are checked against the kinds this build runs by the adapters
// service, which the config package does not know.
//
// It is listed by GET /api/v1/config; credentials show only where they come
// from, never their values.
type Adapter struct {
	ID       string            `json:"id"`
	Category string            `json:"category"`
	Kind     string            `json:"kind"`
	Settings map[string]string `json:"settings"`
	// Credentials are sorted by name.
	Credentials []Credential `json:"credentials"`
	// Primary: true makes it its category's primary, false keeps it from
	// being one; nil (unset) lets the rule of the adapters service decide.
	Primary *bool  `json:"primary,omitempty"`
	Origin  Origin `json:"origin"`
}

// Credential is one credential of a declared adapter: read at each start
// from a file or from an environment variable. Its value is never listed.
type Credential struct {
	Name string `json:"name"`
	// From is "file" or "env"; Source is the file's path or the variable's
	// name.
	From   string `json:"from"`
	Source string `json:"source"`
	value  string
}

// Value returns the credential as read at startup.
func (c Credential) Value() string { return c.value }

// String, GoString and LogValue say where the credential comes from, so
// that printing or logging a configuration never shows its value.
func (c Credential) String() string { return c.Name + " (" + c.From + " " + c.Source + ")" }

// GoString: see String.
func (c Credential) GoString() string { return c.String() }

// LogValue: see String.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Where a credential comes from.
const (
	CredentialFromFile = "file"
	CredentialFromEnv  = "env"
)

// adaptersEnv is the environment variable that declares adapters.
const adaptersEnv = "SVC_ADAPTERS"

// Limits of the adapters section.
const (
	maxDeclaredAdapters = 64
	maxAdapterFields    = 64
	maxAdapterValue     = 16 << 10 // as the adapters service's settings
	maxAdapterIDBody    = 64
)

// adaptersLabel says where a declared adapter list came from, for errors.
func (l *loader) adaptersLabel(origin Origin) string {
	if origin == OriginEnvironment {
		return adaptersEnv
	}
	return "config file " + l.args.File + ": adapters"
}

// readAdaptersEnv parses SVC_ADAPTERS (YAML or JSON, which is YAML); an
// empty value is unset.
func (l *loader) readAdaptersEnv() {
	v, ok := l.env[adaptersEnv]
	if !ok || strings.TrimSpace(v) == "" {
		return
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(v), &doc); err != nil {
		l.errorf("%s: invalid YAML or JSON: %w", adaptersEnv, err)
		return
	}
	l.envAdaptersSet = true
	if len(doc.Content) == 0 {
		return
	}
	list, errs := parseAdapters(doc.Content[0], OriginEnvironment)
	for _, err := range errs {
		l.errorf("%s%w", adaptersEnv, err)
	}
	l.envAdapters = list
}

// readAdaptersSection parses the file's adapters section.
func (l *loader) readAdaptersSection(n *yaml.Node) {
	list, errs := parseAdapters(n, OriginConfigFile)
	for _, err := range errs {
		l.errs = append(l.errs, fmt.Errorf("config file %s: adapters%w", l.args.File, err))
	}
	l.fileAdapters = list
}

// fixAdapters chooses the declared list (the environment's wins over the
// file's, whole) and reads its credentials. The list that lost is checked
// for its shape only: its credentials are not read.
func (l *loader) fixAdapters() {
	list := l.fileAdapters
	origin := OriginConfigFile
	if l.envAdaptersSet {
		list, origin = l.envAdapters, OriginEnvironment
	}
	if len(list) == 0 {
		return
	}
	env := map[string]string{}
	for _, kv := range l.args.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	label := l.adaptersLabel(origin)
	for i := range list {
		a := &list[i]
		for j := range a.Credentials {
			c := &a.Credentials[j]
			v, err := readCredential(*c, env)
			if err != nil {
				l.errorf("%s (%s): credentials.%s: %w", label, a.ID, keyText(c.Name), err)
				continue
			}
			c.value = v
		}
	}
	l.c.Adapters = list
}

// readCredential reads a credential's value: the file's contents without
// one trailing line break, or the variable's value. Neither may be empty,
// longer than 16 KiB or other than UTF-8 text. No error repeats the value.
func readCredential(c Credential, env map[string]string) (string, error) {
	var v string
	switch c.From {
	case CredentialFromFile:
		data, err := readLimited(c.Source, maxAdapterValue)
		if err != nil {
			return "", fmt.Errorf("cannot read the file %s: %w", c.Source, unwrapPath(err))
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("the file %s is empty", c.Source)
		}
	default:
		val, ok := env[c.Source]
		if !ok || val == "" {
			return "", fmt.Errorf("the environment variable %s is not set or empty", c.Source)
		}
		if len(val) > maxAdapterValue {
			return "", fmt.Errorf("the environment variable %s is longer than %d bytes", c.Source, maxAdapterValue)
		}
		v = val
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("the credential from %s is not UTF-8 text", c.Source)
	}
	return v, nil
}

// parseAdapters reads a list of declared adapters from a YAML node: a
// sequence of mappings with id, category, kind, settings, credentials and
// primary. It reads no file and no variable. Each error names the item
// (and its ID once known) and the key; it begins with the item's index
// ("[2] (adp_x): settings.topic: …"), so that a caller prefixes it with
// where the list came from.
func parseAdapters(n *yaml.Node, origin Origin) ([]Adapter, []error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, []error{errors.New(": expected a list of adapters (e.g. - {id: adp_alerts, category: notification, kind: ntfy, settings: {topic: alerts}})")}
	}
	if len(n.Content) > maxDeclaredAdapters {
		return nil, []error{fmt.Errorf(": %d adapters declared; at most %d are accepted", len(n.Content), maxDeclaredAdapters)}
	}
	var out []Adapter
	var errs []error
	ids := map[string]int{}
	for i, item := range n.Content {
		a, ierrs := parseAdapter(deref(item), origin)
		where := fmt.Sprintf("[%d]", i+1)
		if a.ID != "" {
			where += " (" + a.ID + ")"
		}
		for _, err := range ierrs {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if len(ierrs) > 0 {
			continue
		}
		if first, dup := ids[a.ID]; dup {
			errs = append(errs, fmt.Errorf("%s: id: %s is declared twice (items %d and %d)", where, a.ID, first, i+1))
			continue
		}
		ids[a.ID] = i + 1
		out = append(out, a)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// parseAdapter reads one declared adapter.
func parseAdapter(n *yaml.Node, origin Origin) (Adapter, []error) {
	a := Adapter{Settings: map[string]string{}, Credentials: []Credential{}, Origin: origin}
	if n.Kind != yaml.MappingNode {
		return a, []error{errors.New("expected a mapping with id, category, kind, settings and credentials")}
	}
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			fail("adapter", "line %d: a key must be a plain name", k.Line)
			continue
		}
		key := k.Value
		if seen[key] {
			fail(keyText(key), "set twice")
			continue
		}
		seen[key] = true
		switch key {
		case "id", "category", "kind":
			s, err := scalarText(v, false)
			switch {
			case err != nil:
				fail(key, "%v", err)
			case key == "id":
				if err := checkAdapterID(s); err != nil {
					fail(key, "%v", err)
				} else {
					a.ID = s
				}
			case !isName(s):
				fail(key, "%s is not a %s name (letters, digits, - and _)", quote(s), key)
			case key == "category":
				a.Category = s
			default:
				a.Kind = s
			}
		case "settings":
			parseAdapterSettings(v, a.Settings, fail)
		case "credentials":
			a.Credentials = parseAdapterCredentials(v, origin, fail)
		case "primary":
			var b bool
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
				fail(key, "expected true or false")
			} else {
				a.Primary = &b
			}
		default:
			fail(keyText(key), "unknown key (known keys: id, category, kind, settings, credentials, primary)")
		}
	}
	for _, key := range []string{"id", "category", "kind"} {
		if !seen[key] {
			fail(key, "required")
		}
	}
	for _, c := range a.Credentials {
		if _, dup := a.Settings[c.Name]; dup {
			fail("credentials."+keyText(c.Name), "also given under settings; a credential goes under credentials only")
		}
	}
	return a, errs
}

// parseAdapterSettings reads the settings mapping: names to single values
// (numbers and booleans as written).
func parseAdapterSettings(n *yaml.Node, into map[string]string, fail func(key, format string, args ...any)) {
	for _, e := range namedEntries(n, "settings", "a mapping of the kind's settings (e.g. settings: {topic: alerts})", fail) {
		key, v := "settings."+e.name, e.value
		s, err := scalarText(v, false)
		switch {
		case err != nil:
			fail(key, "%v", err)
		case isNull(v):
			fail(key, "a value is required (leave the setting out for its default)")
		case len(s) > maxAdapterValue || !utf8.ValidString(s):
			fail(key, "must be UTF-8 text of at most %d bytes", maxAdapterValue)
		default:
			into[e.name] = s
		}
	}
}

// named is one entry of a mapping of names.
type named struct {
	name  string
	value *yaml.Node
}

// namedEntries reads a mapping of names (letters, digits, - and _) to
// values under section, reporting what is not one and names given twice.
func namedEntries(n *yaml.Node, section, expected string, fail func(key, format string, args ...any)) []named {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		fail(section, "expected %s", expected)
		return nil
	}
	if len(n.Content)/2 > maxAdapterFields {
		fail(section, "more than %d entries", maxAdapterFields)
		return nil
	}
	var out []named
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || !isName(k.Value) {
			fail(section, "line %d: a name is letters, digits, - and _", k.Line)
			continue
		}
		if seen[k.Value] {
			fail(section+"."+k.Value, "set twice")
			continue
		}
		seen[k.Value] = true
		out = append(out, named{name: k.Value, value: v})
	}
	return out
}

// parseAdapterCredentials reads the credentials mapping: names to {file:
// PATH} or {env: VARIABLE}. A value written in place is refused: it would
// sit in the clear in the config file (or the environment's list).
func parseAdapterCredentials(n *yaml.Node, origin Origin, fail func(key, format string, args ...any)) []Credential {
	out := []Credential{}
	where := "the config file"
	if origin == OriginEnvironment {
		where = adaptersEnv
	}
	for _, e := range namedEntries(n, "credentials", "a mapping of credential names to {file: PATH} or {env: VARIABLE}", fail) {
		key, v := "credentials."+e.name, e.value
		if v.Kind != yaml.MappingNode {
			// Never repeat what was written: it may be the secret.
			fail(key, "a credential's value is not accepted in %s, where it would sit in the clear; give {file: /path/to/file} or {env: VARIABLE} to read it at each start", where)
			continue
		}
		c, ok := credentialRef(v, key, fail)
		if ok {
			c.Name = e.name
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Credential) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// credentialRef reads {file: PATH} or {env: VARIABLE}.
func credentialRef(n *yaml.Node, key string, fail func(key, format string, args ...any)) (Credential, bool) {
	if len(n.Content) != 2 {
		fail(key, "expected exactly one of {file: /path/to/file} or {env: VARIABLE}")
		return Credential{}, false
	}
	k, v := deref(n.Content[0]), deref(n.Content[1])
	s, err := scalarText(v, false)
	if k.Kind != yaml.ScalarNode || err != nil || s == "" {
		fail(key, "expected {file: /path/to/file} or {env: VARIABLE}")
		return Credential{}, false
	}
	switch k.Value {
	case CredentialFromFile:
		if !filepath.IsAbs(s) || strings.ContainsRune(s, 0) || len(s) > 4096 {
			fail(key+".file", "%s is not an absolute path", quote(s))
			return Credential{}, false
		}
		return Credential{From: CredentialFromFile, Source: filepath.Clean(s)}, true
	case CredentialFromEnv:
		if !isEnvName(s) {
			fail(key+".env", "%s is not an environment variable's name (letters, digits and _, not beginning with a digit)", quote(s))
			return Credential{}, false
		}
		return Credential{From: CredentialFromEnv, Source: s}, true
	}
	fail(key, "expected {file: /path/to/file} or {env: VARIABLE}, not %s", keyText(k.Value))
	return Credential{}, false
}

// checkAdapterID accepts the IDs of the API's adapters: adp_ and 1 to 64 of
// A-Z a-z 0-9 _ - (a minted adp_<ULID>, a built-in adp_builtin_<category>,
// or a name chosen for the declaration, such as adp_alerts).
func checkAdapterID(v string) error {
	body, ok := strings.CutPrefix(v, "adp_")
	if !ok || body == "" || len(body) > maxAdapterIDBody || !isName(body) {
		return fmt.Errorf("%s is not an adapter ID (accepted: adp_ and 1 to %d of A-Z a-z 0-9 _ -, e.g. adp_alerts)", quote(v), maxAdapterIDBody)
	}
	return nil
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// isName reports whether v is 1 to 64 of A-Z a-z 0-9 _ -.
func isName(v string) bool {
	return v != "" && len(v) <= 64 && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0
}

// isEnvName reports whether v is a portable environment variable name.
func isEnvName(v string) bool {
	return v != "" && len(v) <= 256 && (v[0] < '0' || v[0] > '9') && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}
