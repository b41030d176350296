package spec_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/spec"
)

// TestTheSpecDocumentReferenceIsComplete keeps docs/spec-document.md true:
// every field of the Document type (by its JSON name, at any depth) is
// described there, and its example parses and validates.
func TestTheSpecDocumentReferenceIsComplete(t *testing.T) {
	b, err := os.ReadFile("../../docs/spec-document.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(spec.EnvValue{}) {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/spec-document.md does not describe %s%s", path, name)
			}
			walk(path+name+".", typ.Field(i).Type)
		}
	}
	walk("", reflect.TypeOf(spec.Document{}))
	for _, k := range spec.BuildKinds() {
		if !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("docs/spec-document.md does not name the build kind %s", k)
		}
	}

	example := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(doc)
	if example == nil {
		t.Fatal("docs/spec-document.md has no yaml example")
	}
	d, err := spec.Parse([]byte(example[1]))
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	if err := spec.Validate(d); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
}
