package jobtemplates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func embeddedText(t *testing.T, name string) string {
	t.Helper()
	b, err := embedded.ReadFile("templates/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadOverride replaces the service template from an operator's
// directory: the set renders with it, and keeps the embedded build
// template.
func TestLoadOverride(t *testing.T) {
	dir := t.TempDir()
	text := strings.Replace(embeddedText(t, ServiceTemplate), `"Type": "service",`, `"Type": "service", "Priority": 70,`, 1)
	p := writeFile(t, dir, ServiceTemplate, text)
	writeFile(t, dir, "README.md", "not a template: ignored")
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Source(ServiceTemplate); got != p {
		t.Errorf("service template from %q; want %q", got, p)
	}
	if got := set.Source(BuildTemplate); got != "embedded" {
		t.Errorf("build template from %q; want the embedded one", got)
	}
	b, err := set.RenderService(SampleServiceInput())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Type":"service","Priority":70,`) {
		t.Errorf("the override is not what rendered:\n%s", b)
	}
	def, err := Default().RenderService(SampleServiceInput())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(def), "Priority") {
		t.Error("loading an override changed the default set")
	}
}

// TestLoadRefuses refuses a directory whose templates would not give jobs:
// one that does not parse (named with its line), one that does not render
// the samples or renders something other than JSON, a template of a name
// svc does not use, a file too large.
func TestLoadRefuses(t *testing.T) {
	service := embeddedText(t, ServiceTemplate)
	tests := []struct {
		name, file, text string
		want             []string
	}{
		{"does not parse", ServiceTemplate, "{\n  \"ID\": {{ json .ID }},\n  \"Name\": {{ json (.Name }}\n}\n",
			[]string{"service.json.tmpl:3:", "unclosed left paren"}},
		{"unknown function", BuildTemplate, "{\n\n  \"ID\": {{ toJSON .ID }}\n}\n",
			[]string{"build.json.tmpl:3:", `"toJSON" not defined`}},
		{"unknown field", ServiceTemplate, strings.Replace(service, "{{ json .Name }}", "{{ json .Title }}", 1),
			[]string{"service.json.tmpl", "does not render a sample job", "Title"}},
		{"not JSON", ServiceTemplate, strings.Replace(service, `"Name": {{ json .Name }},`, `"Name": {{ .Name }},`, 1),
			[]string{"service.json.tmpl", "not JSON at its line 3"}},
		{"not an object", BuildTemplate, `[{{ json .ID }}]`,
			[]string{"build.json.tmpl", "not a JSON object"}},
		{"a name svc does not use", "servce.json.tmpl", service,
			[]string{"servce.json.tmpl is not a template svc uses"}},
		{"too large", ServiceTemplate, service + strings.Repeat(" ", maxTemplateBytes),
			[]string{"larger than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, tt.file, tt.text)
			set, err := Load(dir)
			if err == nil {
				t.Fatalf("Load = %v, nil error; want it refused", set)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load of a missing directory: nil error")
	}
}

func TestLoadEmptyDirIsDefault(t *testing.T) {
	set, err := Load("")
	if err != nil || set != Default() {
		t.Fatalf("Load(\"\") = %p, %v; want the default set %p", set, err, Default())
	}
	set, err = Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if set.Source(name) != "embedded" {
			t.Errorf("%s from %q in an empty directory", name, set.Source(name))
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	if _, err := Default().Render("nomad.hcl", SampleServiceInput()); err == nil || !strings.Contains(err.Error(), "no such template") {
		t.Errorf("unknown template: %v", err)
	}
	// The build template given a service job's data.
	job, err := ServiceData(SampleServiceInput())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Default().Render(BuildTemplate, job); err == nil {
		t.Error("the build template rendered a service job's data")
	}
}
