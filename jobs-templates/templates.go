package jobtemplates

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
)

// Template names: the files of the embedded set, and of an operator's
// directory that replace them.
const (
	// ServiceTemplate renders a ServiceJob: the run job of a deployment.
	ServiceTemplate = "service.json.tmpl"
	// BuildTemplate renders a BuildJob: the batch job of one build.
	BuildTemplate = "build.json.tmpl"
)

// names lists every template a set holds.
var names = []string{ServiceTemplate, BuildTemplate}

//go:embed templates/*.json.tmpl
var embedded embed.FS

// maxTemplateBytes caps a template file read from an operator's directory.
const maxTemplateBytes = 1 << 20

// Set is a loaded set of job templates. It is safe for concurrent use.
type Set struct {
	templates map[string]*template.Template
	// sources says where each template came from: "embedded" or a path.
	sources map[string]string
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
)

// Default returns the embedded set.
func Default() *Set {
	defaultOnce.Do(func() {
		s, err := load(nil)
		if err != nil {
			panic("jobtemplates: the embedded templates are broken: " + err.Error())
		}
		defaultSet = s
	})
	return defaultSet
}

// Load returns the embedded set with the templates of dir in place of
// those of the same name; an empty dir means the embedded set. A template
// in dir is refused if it does not parse (the error names the file and
// line) or if it does not render the sample jobs into JSON; a *.tmpl file
// of another name is refused as a likely typo. Other files are ignored.
func Load(dir string) (*Set, error) {
	if dir == "" {
		return Default(), nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load job templates: %w", err)
	}
	override := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".tmpl") {
			continue
		}
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("load job templates: %s is not a template svc uses (%s)", filepath.Join(dir, name), strings.Join(names, ", "))
		}
		p := filepath.Join(dir, name)
		b, err := readCapped(p)
		if err != nil {
			return nil, fmt.Errorf("load job templates: %w", err)
		}
		override[name] = string(b)
	}
	s, err := load(func(name string) (string, string, bool) {
		text, ok := override[name]
		return text, filepath.Join(dir, name), ok
	})
	if err != nil {
		return nil, fmt.Errorf("load job templates from %s: %w", dir, err)
	}
	return s, nil
}

func readCapped(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTemplateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTemplateBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxTemplateBytes)
	}
	return b, nil
}

// load parses every template: from override when it has one, else the
// embedded one; then renders the samples with each.
func load(override func(name string) (text, source string, ok bool)) (*Set, error) {
	s := &Set{templates: map[string]*template.Template{}, sources: map[string]string{}}
	for _, name := range names {
		text, source, ok := "", "embedded", false
		if override != nil {
			text, source, ok = override(name)
		}
		if !ok {
			b, err := embedded.ReadFile("templates/" + name)
			if err != nil {
				return nil, err
			}
			text, source = string(b), "embedded"
		}
		t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, err // "template: <name>:<line>: …"
		}
		s.templates[name] = t
		s.sources[name] = source
	}
	for _, name := range names {
		if _, err := s.Render(name, sampleData(name)); err != nil {
			return nil, fmt.Errorf("%s does not render a sample job: %w", name, err)
		}
	}
	return s, nil
}

// Source says where the set's template name came from: "embedded" or the
// file that replaced it.
func (s *Set) Source(name string) string { return s.sources[name] }

// funcs are the functions templates may call.
var funcs = template.FuncMap{
	// json writes a value as JSON: a string as a quoted, escaped JSON
	// string, a struct or map as an object. Every value a template
	// interpolates goes through it, so none can leave its JSON string.
	"json": jsonText,
	// slug makes a string a DNS label's worth of lower-case letters,
	// digits and hyphens.
	"slug": slugify,
}

func jsonText(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Render executes the template name with data and returns the job as
// compact JSON: one object in Nomad's API JSON job format (the value of
// "Job" in PUT /v1/jobs), ready to decode into the Nomad API's Job. Output
// that is not one JSON object is refused, with the line of the rendered
// text at fault.
func (s *Set) Render(name string, data any) ([]byte, error) {
	t, ok := s.templates[name]
	if !ok {
		return nil, fmt.Errorf("render %s: no such template", name)
	}
	var raw bytes.Buffer
	if err := t.Execute(&raw, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	var out bytes.Buffer
	out.Grow(raw.Len())
	if err := json.Compact(&out, raw.Bytes()); err != nil {
		// Compact's syntax errors carry no offset; Unmarshal's do.
		var v json.RawMessage
		if uerr := json.Unmarshal(raw.Bytes(), &v); uerr != nil {
			err = uerr
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(raw.Bytes()[:min(int(se.Offset), raw.Len())], []byte("\n"))
			return nil, fmt.Errorf("render %s: the output is not JSON at its line %d: %w", name, line, err)
		}
		return nil, fmt.Errorf("render %s: the output is not JSON: %w", name, err)
	}
	if out.Len() == 0 || out.Bytes()[0] != '{' {
		return nil, fmt.Errorf("render %s: the output is not a JSON object", name)
	}
	return out.Bytes(), nil
}

// RenderService builds the data of in (ServiceData) and renders the
// service template with it.
func (s *Set) RenderService(in ServiceInput) ([]byte, error) {
	job, err := ServiceData(in)
	if err != nil {
		return nil, err
	}
	return s.Render(ServiceTemplate, job)
}

// RenderBuild builds the data of in (BuildData) and renders the build
// template with it.
func (s *Set) RenderBuild(in BuildInput) ([]byte, error) {
	job, err := BuildData(in)
	if err != nil {
		return nil, err
	}
	return s.Render(BuildTemplate, job)
}
