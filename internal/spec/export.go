package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Redacted stands in for every value an export leaves out.
const Redacted = "<redacted>"

// secretWords are the parts of a variable name that mark its literal value
// as secret in an export.
var secretWords = []string{"PASSWORD", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "PRIVATE"}

// LooksSecret reports whether a variable's name says its value is secret
// (it contains PASSWORD, SECRET, TOKEN, KEY, CREDENTIAL or PRIVATE, in any
// case).
func LooksSecret(name string) bool {
	upper := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}

// ExportApp names the exported app.
type ExportApp struct {
	Name string `json:"name"`
	Slug string `json:"slug"`
}

// ExportSecret is a secret as an export lists it: its key, never its value.
type ExportSecret struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Export is an app's configuration as a document (GET /export): the app,
// its spec (the pinned revision, or the latest when none is pinned; null
// when it has none) with secret-looking literal values redacted, its
// secrets by key with their values redacted, and the revision exported.
type Export struct {
	App      ExportApp      `json:"app"`
	Spec     *Document      `json:"spec"`
	Secrets  []ExportSecret `json:"secrets"`
	Revision *uint64        `json:"revision"`
}

// NewExport builds an export. It copies what it redacts: d is not changed.
func NewExport(app ExportApp, d *Document, revision uint64, secretKeys []string) Export {
	e := Export{App: app, Secrets: make([]ExportSecret, 0, len(secretKeys))}
	for _, k := range secretKeys {
		e.Secrets = append(e.Secrets, ExportSecret{Key: k, Value: Redacted})
	}
	if d == nil {
		return e
	}
	r := *d
	r.Env = redact(d.Env)
	r.Workloads = make(map[string]Workload, len(d.Workloads))
	for name, w := range d.Workloads {
		w.Env = redact(w.Env)
		r.Workloads[name] = w
	}
	r.normalize()
	e.Spec, e.Revision = &r, &revision
	return e
}

// redact returns a copy of env with the literal values of secret-looking
// names replaced; references to secrets and slots are names, and stay.
func redact(env map[string]EnvValue) map[string]EnvValue {
	if env == nil {
		return nil
	}
	out := make(map[string]EnvValue, len(env))
	for k, v := range env {
		if v.Kind() == "literal" && LooksSecret(k) {
			v = Literal(Redacted)
		}
		out[k] = v
	}
	return out
}

// MarshalYAML writes v (anything that encodes as JSON: a Document, an
// Export) as YAML, keeping the JSON form's field order and string values
// (a string that looks like a number stays quoted), so that Parse reads a
// document back as it was.
func MarshalYAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode as json: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := yamlNode(dec)
	if err != nil {
		return nil, fmt.Errorf("convert to yaml: %w", err)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("encode as yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode as yaml: %w", err)
	}
	return out.Bytes(), nil
}

// yamlNode reads one JSON value from dec as a YAML node, keeping key order.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)})
			}
			c, err := yamlNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, errors.New("unexpected json token")
}
