package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/svchost/svc/internal/errcode"
)

// Limits of a spec document.
const (
	MaxDocumentBytes = 256 << 10
	MaxWorkloads     = 32
	MaxVolumes       = 64
	MaxSlots         = 64
	MaxEnvVars       = 256 // per map: the app's, and each workload's
	// maxDepth bounds the nesting of a document; a valid one needs five.
	maxDepth = 32
)

// nameRE is the shape of workload, volume and slot names.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// Parse reads a spec document written as JSON or YAML. A document whose
// first character is "{" is read as JSON (or, failing that, as YAML flow
// style); anything else as YAML. Both are read into plain values first:
// duplicate keys are refused (in an env map, two different values for one
// variable are VALID_ENV_AMBIGUOUS), and so are YAML aliases, merge keys and
// custom tags, so that no document can expand beyond its size. The values
// are then checked against the document's shape and decoded strictly.
//
// Parse checks form and limits, not meaning (see Validate). It returns the
// first problem it meets, as an *errcode.Error with details.field naming
// the path inside the document, such as workloads.web.run.port or
// workloads.web.mounts[0].path.
func Parse(b []byte) (Document, error) {
	if len(b) > MaxDocumentBytes {
		return Document{}, errcode.New(errcode.ValidInvalid, "the spec document exceeds %d bytes", MaxDocumentBytes).
			WithStatus(http.StatusRequestEntityTooLarge).WithDetail("limit_bytes", MaxDocumentBytes)
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(b) {
		return Document{}, errcode.New(errcode.ValidInvalid, "the spec document is not UTF-8 text")
	}
	v, err := readValue(b)
	if err != nil {
		return Document{}, err
	}
	if _, ok := v.(map[string]any); !ok {
		return Document{}, errcode.New(errcode.ValidInvalid, "a spec document is a mapping (an object) with workloads")
	}
	if err := fit("", v, documentType); err != nil {
		return Document{}, err
	}
	d, err := decodeStrict(v)
	if err != nil {
		return Document{}, err
	}
	if err := checkLimits(d); err != nil {
		return Document{}, err
	}
	return d, nil
}

// readValue reads JSON or YAML into plain values: map[string]any, []any,
// string, json.Number, bool and nil.
func readValue(b []byte) (any, error) {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errcode.New(errcode.ValidInvalid, "the spec document is empty")
	}
	if trimmed[0] != '{' {
		return readYAML(b)
	}
	v, err := readJSON(b)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		if y, yerr := readYAML(b); yerr == nil {
			return y, nil
		}
		msg := syn.Error()
		if msg == "" {
			msg = "the document ends too early"
		}
		return nil, errcode.New(errcode.ValidInvalid, "malformed JSON at byte %d: %s", syn.Offset, msg).
			WithDetail("offset", syn.Offset)
	}
	return v, err
}

// readJSON reads one JSON value, refusing duplicate keys and trailing data.
// A syntax error is returned as the *json.SyntaxError.
func readJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := jsonValue(dec, nil)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errcode.New(errcode.ValidInvalid, "unexpected data after the JSON document")
	}
	return v, nil
}

func jsonValue(dec *json.Decoder, path []string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonSyntax(dec, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if len(path) >= maxDepth {
		return nil, errcode.New(errcode.ValidInvalid, "the spec document nests deeper than %d levels", maxDepth)
	}
	switch d {
	case '{':
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, jsonSyntax(dec, err)
			}
			k := kt.(string) // the decoder only returns strings as object keys
			v, err := jsonValue(dec, append(path, k))
			if err != nil {
				return nil, err
			}
			if err := setKey(m, path, k, v); err != nil {
				return nil, err
			}
		}
		_, err = dec.Token()
		return m, jsonSyntax(dec, err)
	default: // '['
		l := []any{}
		for dec.More() {
			v, err := jsonValue(dec, append(path, index(len(l))))
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err = dec.Token()
		return l, jsonSyntax(dec, err)
	}
}

// jsonSyntax turns a tokenizer failure into a *json.SyntaxError (the early
// end of a document included).
func jsonSyntax(dec *json.Decoder, err error) error {
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return syn
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &json.SyntaxError{Offset: dec.InputOffset()}
	}
	return errcode.Wrap(err, errcode.ValidInvalid, "malformed JSON")
}

// setKey adds k to m, refusing a key set twice. In an env map, two equal
// values are one setting; two different ones are ambiguous.
func setKey(m map[string]any, path []string, k string, v any) error {
	old, dup := m[k]
	if !dup {
		m[k] = v
		return nil
	}
	field := joinPath(path, k)
	if !isEnvMap(path) {
		return errcode.Invalid(field, "%s is set twice", field)
	}
	if !sameValue(old, v) {
		return errcode.New(errcode.ValidEnvAmbiguous, "the variable %s is set twice with different values", k).WithDetail("field", field)
	}
	return nil
}

// isEnvMap reports whether path is an env map: env, or workloads.<w>.env.
func isEnvMap(path []string) bool {
	return len(path) == 1 && path[0] == "env" || len(path) == 3 && path[0] == "workloads" && path[2] == "env"
}

// sameValue compares plain values, scalars by their text (PORT: 8080 and
// PORT: "8080" set the same variable).
func sameValue(a, b any) bool {
	text := func(v any) (string, bool) {
		switch v := v.(type) {
		case string:
			return v, true
		case json.Number:
			return string(v), true
		case bool:
			return strconv.FormatBool(v), true
		}
		return "", false
	}
	if x, ok := text(a); ok {
		y, ok := text(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// index is the path segment of a list element.
func index(i int) string { return "[" + strconv.Itoa(i) + "]" }

// joinPath writes a path as details.field names it: workloads.web.mounts[0].path.
func joinPath(path []string, k string) string {
	var b strings.Builder
	for _, p := range append(path[:len(path):len(path)], k) {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// readYAML reads a single YAML document into plain values.
func readYAML(b []byte) (v any, err error) {
	defer func() {
		// The YAML library has panicked on hostile input before; whatever
		// it cannot read is a malformed document, never a crash.
		if r := recover(); r != nil {
			v, err = nil, errcode.New(errcode.ValidInvalid, "malformed YAML")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errcode.New(errcode.ValidInvalid, "the spec document is empty")
		}
		return nil, errcode.New(errcode.ValidInvalid, "malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errcode.New(errcode.ValidInvalid, "the spec must be one YAML document, without a second after ---")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errcode.New(errcode.ValidInvalid, "the spec document is empty")
	}
	return yamlValue(doc.Content[0], nil)
}

func yamlValue(n *yaml.Node, path []string) (any, error) {
	at := func() string {
		if len(path) == 0 {
			return "the document"
		}
		return joinPath(path[:len(path)-1], path[len(path)-1])
	}
	fail := func(format string, args ...any) error {
		e := errcode.New(errcode.ValidInvalid, "line %d: %s", n.Line, fmt.Sprintf(format, args...)).WithDetail("line", n.Line)
		if len(path) > 0 {
			e.WithDetail("field", at())
		}
		return e
	}
	if len(path) >= maxDepth {
		return nil, fail("the spec document nests deeper than %d levels", maxDepth)
	}
	tag := n.ShortTag()
	switch n.Kind {
	case yaml.AliasNode:
		return nil, fail("YAML aliases (*name) are not supported: write the value out")
	case yaml.MappingNode:
		if tag != "!!map" {
			return nil, fail("the YAML tag %s is not supported", n.Tag)
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Kind != yaml.ScalarNode || kn.ShortTag() == "!!merge" {
				return nil, fail("keys must be plain names; merge keys (<<) and complex keys are not supported")
			}
			if t := kn.ShortTag(); t != "!!str" && t != "!!int" && t != "!!bool" && t != "!!float" && t != "!!null" {
				return nil, fail("the YAML tag %s is not supported", kn.Tag)
			}
			v, err := yamlValue(vn, append(path, kn.Value))
			if err != nil {
				return nil, err
			}
			if err := setKey(m, path, kn.Value, v); err != nil {
				return nil, err
			}
		}
		return m, nil
	case yaml.SequenceNode:
		if tag != "!!seq" {
			return nil, fail("the YAML tag %s is not supported", n.Tag)
		}
		l := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(c, append(path, index(i)))
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		return yamlScalar(n, tag, fail)
	}
	return nil, fail("unexpected YAML content")
}

// jsonNumberRE is the grammar of a JSON number.
var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

func yamlScalar(n *yaml.Node, tag string, fail func(string, ...any) error) (any, error) {
	switch tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fail("%q is not true or false", n.Value)
		}
		return b, nil
	case "!!int", "!!float":
		// Numbers keep their text where it is JSON's (VERSION: 1.10 stays
		// "1.10" in an env map); other forms (0x1F, 1_000) are converted.
		if jsonNumberRE.MatchString(n.Value) {
			return json.Number(n.Value), nil
		}
		if tag == "!!int" {
			var i int64
			if err := n.Decode(&i); err == nil {
				return json.Number(strconv.FormatInt(i, 10)), nil
			}
			var u uint64
			if err := n.Decode(&u); err == nil {
				return json.Number(strconv.FormatUint(u, 10)), nil
			}
			return nil, fail("%q is not a number this document can hold", n.Value)
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fail("%q is not a finite number", n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	}
	return nil, fail("the YAML tag %s is not supported", n.Tag)
}

var (
	documentType = reflect.TypeFor[Document]()
	envValueType = reflect.TypeFor[EnvValue]()
	durationType = reflect.TypeFor[Duration]()
)

// fieldsOf maps a struct's JSON names to their types.
var fieldsOf = func() func(reflect.Type) map[string]reflect.Type {
	var cache sync.Map
	return func(t reflect.Type) map[string]reflect.Type {
		if f, ok := cache.Load(t); ok {
			return f.(map[string]reflect.Type)
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		cache.Store(t, fields)
		return fields
	}
}()

func child(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func what(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

// fit checks that the plain value v can be decoded into type t, naming the
// path of the first thing that cannot: unknown fields (names match exactly,
// unlike encoding/json), wrong kinds, numbers out of range, malformed
// environment values and durations. Null leaves a list, map, object or
// pointer unset; a scalar cannot be null.
func fit(path string, v any, t reflect.Type) error {
	switch t {
	case envValueType:
		return fitEnv(path, v)
	case durationType:
		if s, ok := v.(string); ok {
			var d Duration
			if err := d.UnmarshalJSON(strconv.AppendQuote(nil, s)); err != nil {
				return errcode.Invalid(path, "%s: %q is not a duration such as \"10s\"", path, s)
			}
			return nil
		}
		return errcode.Invalid(path, "%s must be a duration such as \"10s\"", path)
	}
	switch t.Kind() {
	case reflect.Pointer:
		// A flag (primary) is true or false where it is written: null is
		// neither, and only leaving the field out means "not said".
		if v == nil && t.Elem().Kind() != reflect.Bool {
			return nil
		}
		return fit(path, v, t.Elem())
	case reflect.Struct, reflect.Map:
		if v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return errcode.Invalid(path, "%s must be a mapping (an object)", what(path))
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = fieldsOf(t)
		}
		for _, k := range sortedKeys(m) {
			ft := t
			if fields != nil {
				var ok bool
				if ft, ok = fields[k]; !ok {
					return errcode.Invalid(child(path, k), "unknown field %s", child(path, k))
				}
			} else {
				ft = t.Elem()
			}
			if err := fit(child(path, k), m[k], ft); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if v == nil {
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return errcode.Invalid(path, "%s must be a list", path)
		}
		for i, e := range l {
			if err := fit(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return errcode.Invalid(path, "%s must be a string", path)
		}
		return nil
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return errcode.Invalid(path, "%s must be true or false", path)
		}
		return nil
	case reflect.Int, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return errcode.Invalid(path, "%s must be a whole number", path)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return errcode.Invalid(path, "%s must be a whole number within range, not %s", path, n)
		}
		return nil
	}
	return errcode.Invalid(path, "%s cannot be read", path)
}

// fitEnv checks an environment value: a string (numbers and booleans are
// taken as their text), {slot, field} or {secret}.
func fitEnv(path string, v any) error {
	switch v := v.(type) {
	case string, json.Number, bool:
		return nil
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if k != "slot" && k != "field" && k != "secret" {
				return errcode.Invalid(child(path, k), "unknown field %s: an environment reference is {slot, field} or {secret}", child(path, k))
			}
			if _, ok := v[k].(string); !ok {
				return errcode.Invalid(child(path, k), "%s must be a string", child(path, k))
			}
		}
		slot, field, secret := v["slot"], v["field"], v["secret"]
		switch {
		case secret != nil && (slot != nil || field != nil), secret == nil && slot == nil:
			return errcode.Invalid(path, "%s: an environment reference is {slot, field} or {secret}", path)
		case secret != nil && secret == "":
			return errcode.Invalid(child(path, "secret"), "%s must name a secret", child(path, "secret"))
		case secret == nil && (slot == "" || field == nil || field == ""):
			return errcode.Invalid(path, "%s: a slot reference names both slot and field", path)
		}
		return nil
	}
	return errcode.Invalid(path, "%s must be a string, {slot, field} or {secret}", path)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeStrict decodes checked plain values into a Document.
func decodeStrict(v any) (Document, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Document{}, errcode.Wrap(err, errcode.ValidInvalid, "the spec document could not be read")
	}
	var d Document
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		e := errcode.Wrap(err, errcode.ValidInvalid, "the spec document could not be read: %s", strings.TrimPrefix(err.Error(), "json: "))
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			e.WithDetail("field", typ.Field)
		}
		return Document{}, e
	}
	d.normalize()
	return d, nil
}

// normalize makes empty maps and lists nil, so that a document and its
// re-encoding (which omits them) are equal.
func (d *Document) normalize() {
	d.Env = nilIfEmpty(d.Env)
	d.Volumes = nilIfEmpty(d.Volumes)
	d.Slots = nilIfEmpty(d.Slots)
	d.Workloads = nilIfEmpty(d.Workloads)
	for name, w := range d.Workloads {
		w.Env = nilIfEmpty(w.Env)
		if len(w.Mounts) == 0 {
			w.Mounts = nil
		}
		if len(w.DependsOn) == 0 {
			w.DependsOn = nil
		}
		if len(w.Run.Command) == 0 {
			w.Run.Command = nil
		}
		d.Workloads[name] = w
	}
}

func nilIfEmpty[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// checkLimits checks the counts and names of a document.
func checkLimits(d Document) error {
	if err := checkNames("workloads", d.Workloads, MaxWorkloads); err != nil {
		return err
	}
	if err := checkNames("volumes", d.Volumes, MaxVolumes); err != nil {
		return err
	}
	if err := checkNames("slots", d.Slots, MaxSlots); err != nil {
		return err
	}
	if len(d.Env) > MaxEnvVars {
		return errcode.Invalid("env", "env sets %d variables; at most %d", len(d.Env), MaxEnvVars)
	}
	for _, name := range sortedKeys(d.Workloads) {
		if n := len(d.Workloads[name].Env); n > MaxEnvVars {
			f := "workloads." + name + ".env"
			return errcode.Invalid(f, "%s sets %d variables; at most %d", f, n, MaxEnvVars)
		}
	}
	return nil
}

func checkNames[V any](section string, m map[string]V, limit int) error {
	if len(m) > limit {
		return errcode.Invalid(section, "%s has %d entries; at most %d", section, len(m), limit)
	}
	for _, name := range sortedKeys(m) {
		if !nameRE.MatchString(name) {
			return errcode.Invalid(section+"."+name, "%q is not a valid name in %s: a lower-case letter, then up to 30 lower-case letters, digits and hyphens", name, section).
				WithRemedy("for example web, worker or db-primary")
		}
	}
	return nil
}
