package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// filePolicyValue is one entry of the file's policy section, decoded by
// yaml.v3 for policy.ParseYAML.
type filePolicyValue struct {
	name  string
	value any
}

// maxFileSize is the largest config file Load reads.
const maxFileSize = 1 << 20

// readFile reads the config file and records its values. Every problem is
// collected in l.errs; a file that cannot be read or parsed contributes no
// values.
func (l *loader) readFile() {
	if err := l.parseFile(); err != nil {
		l.errs = append(l.errs, err)
	}
}

// parseFile reads and walks the config file. It returns the errors that stop
// the walk (reading, YAML syntax, the shape of the top level); problems with
// keys and values are collected in l.errs.
func (l *loader) parseFile() error {
	path := l.args.File
	data, err := readLimited(path, maxFileSize)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("config file %s: cannot read: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: invalid YAML: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	top := deref(doc.Content[0])
	if isNull(top) {
		return nil
	}
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: the top level must be a mapping of sections (e.g. server: {addr: \":8080\"})", path, top.Line)
	}
	sections := sectionNames()
	for _, kv := range l.pairs(top, "") {
		switch {
		case kv.key == "policy":
			l.readPolicySection(kv.value)
		case kv.key == "adapters":
			l.readAdaptersSection(kv.value)
		case slices.Contains(sections, kv.key):
			l.readSection(kv.key, kv.value)
		default:
			l.fileErrorf(kv.key, "unknown key (known keys: %s)", strings.Join(append(sections, "policy", "adapters"), ", "))
		}
	}
	return nil
}

func (l *loader) fileErrorf(key, format string, a ...any) {
	l.errs = append(l.errs, fmt.Errorf("config file %s: %s: %w", l.args.File, key, fmt.Errorf(format, a...)))
}

// pair is one key of a mapping with its value.
type pair struct {
	key   string // the key's text
	path  string // the full dotted path, for messages
	value *yaml.Node
}

// pairs returns the entries of a mapping, reporting keys given twice. parent
// is the dotted path of the mapping ("" for the top level).
func (l *loader) pairs(m *yaml.Node, parent string) []pair {
	var out []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := deref(m.Content[i])
		p := pair{key: k.Value, path: keyText(k.Value), value: deref(m.Content[i+1])}
		if parent != "" {
			p.path = parent + "." + p.path
		}
		if k.Kind != yaml.ScalarNode {
			where := "top level"
			if parent != "" {
				where = parent
			}
			l.fileErrorf(where, "line %d: a key must be a plain name, not a list or mapping", k.Line)
			continue
		}
		if line, dup := seen[k.Value]; dup {
			l.fileErrorf(p.path, "set twice (lines %d and %d)", line, k.Line)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, p)
	}
	return out
}

// readSection reads one section of startup settings, such as server.
func (l *loader) readSection(section string, n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fileErrorf(section, "expected a mapping of settings (e.g. %s: {%s: …})", section, firstKey(section))
		return
	}
	for _, kv := range l.pairs(n, section) {
		d := defByName(section + "." + kv.key)
		if d == nil {
			l.fileErrorf(kv.path, "unknown key (known keys under %s: %s)", section, strings.Join(keysOf(section), ", "))
			continue
		}
		v, err := scalarText(kv.value, d.list)
		if err != nil {
			l.fileErrorf(kv.path, "%w", err)
			continue
		}
		if v == "" && !d.emptyUnset && isNull(kv.value) {
			l.fileErrorf(kv.path, "a value is required")
			continue
		}
		l.fileSources[d.name] = source{origin: OriginConfigFile, value: v, label: "config file " + l.args.File + ": " + d.name}
	}
}

// readPolicySection collects the policy section's values; fixPolicy parses
// them after the environment is known.
func (l *loader) readPolicySection(n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fileErrorf("policy", "expected a mapping of policy settings (e.g. policy: {public_sharing: none})")
		return
	}
	for _, kv := range l.pairs(n, "policy") {
		var v any
		if err := kv.value.Decode(&v); err != nil {
			l.fileErrorf(kv.path, "%w", err)
			continue
		}
		l.filePolicy = append(l.filePolicy, filePolicyValue{name: kv.key, value: v})
	}
}

// scalarText returns a value's text as written: a scalar's text ("" for a
// null) or, when list is true, the items of a sequence joined by commas.
func scalarText(n *yaml.Node, list bool) (string, error) {
	switch {
	case isNull(n):
		return "", nil
	case n.Kind == yaml.ScalarNode:
		return n.Value, nil
	case n.Kind == yaml.SequenceNode && list:
		items := make([]string, 0, len(n.Content))
		for i, item := range n.Content {
			item = deref(item)
			if item.Kind != yaml.ScalarNode || isNull(item) {
				return "", fmt.Errorf("item %d is not a single value", i+1)
			}
			items = append(items, item.Value)
		}
		return strings.Join(items, ","), nil
	case n.Kind == yaml.SequenceNode:
		return "", errors.New("expected a single value, not a list")
	default:
		return "", errors.New("expected a single value, not a mapping")
	}
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// sectionNames lists the file's sections of startup settings, sorted.
func sectionNames() []string {
	var out []string
	for _, d := range defs {
		s, _, _ := strings.Cut(d.name, ".")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// keysOf lists the keys of a section, in catalogue order.
func keysOf(section string) []string {
	var out []string
	for _, d := range defs {
		if s, k, _ := strings.Cut(d.name, "."); s == section {
			out = append(out, k)
		}
	}
	return out
}

func firstKey(section string) string {
	if k := keysOf(section); len(k) > 0 {
		return k[0]
	}
	return "…"
}

// readLimited reads a whole file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}
