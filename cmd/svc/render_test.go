package main

import (
	"bytes"
	"strings"
	"testing"
)

func renderString(t *testing.T, answer string) (string, string) {
	t.Helper()
	var out, hint bytes.Buffer
	if err := render(printer{w: &out}, &hint, []byte(answer)); err != nil {
		t.Fatal(err)
	}
	return out.String(), hint.String()
}

func TestRenderListIsATableInTheAPIsOrder(t *testing.T) {
	out, hint := renderString(t, `{"items":[
		{"name":"web","id":"x1","tags":["a","b"],"nested":{"k":1},"created_at":"2026-01-02T03:04:05Z","note":null},
		{"name":"worker","id":"x2","tags":[],"extra":"late"}],"next_cursor":"c2"}`)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows, got:\n%s", out)
	}
	header := strings.Fields(lines[0])
	want := []string{"NAME", "ID", "TAGS", "NESTED", "K", "CREATED", "AT", "NOTE", "EXTRA"}
	if strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("header %v, want %v (an object's plain fields one level down, the first item's order, then new keys)", header, want)
	}
	if !strings.Contains(lines[1], "a, b") || strings.Contains(lines[1], "{") {
		t.Errorf("row 1 %q: lists of scalars join, objects stay out", lines[1])
	}
	if !strings.HasSuffix(strings.TrimSpace(lines[2]), "late") {
		t.Errorf("row 2 %q lacks its late column", lines[2])
	}
	// Columns align: every row's second column starts where the header's does.
	col := strings.Index(lines[0], "ID")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("column ID not aligned at %d in %q", col, l)
		}
	}
	if !strings.Contains(hint, "--cursor c2") {
		t.Errorf("hint %q does not say how to get the next page", hint)
	}
}

func TestRenderObjectUnwrapsAndFlattens(t *testing.T) {
	out, _ := renderString(t, `{"deployment":{"id":"dep_1","state":"failed","builds":{"web":{"reused":true}},
		"approval_reasons":["policy"],"steps":[{"name":"build","ok":true},{"name":"run","ok":false}],"empty":{}}}`)
	for _, want := range []string{"ID:", "dep_1", "State:", "failed", "Builds web reused:", "true", "Approval reasons:", "policy", "Steps:", "NAME", "build", "run", "Empty:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "deployment") {
		t.Errorf("the wrapping key shows:\n%s", out)
	}
}

func TestRenderEmptyListAndScalars(t *testing.T) {
	if out, _ := renderString(t, `{"items":[],"next_cursor":""}`); strings.TrimSpace(out) != "(none)" {
		t.Errorf("empty list: %q", out)
	}
	if out, _ := renderString(t, `["a","b"]`); out != "a\nb\n" {
		t.Errorf("list of scalars: %q", out)
	}
	if out, _ := renderString(t, `not json`); out != "not json\n" {
		t.Errorf("not JSON is printed as it came: %q", out)
	}
}

// FuzzRender: any answer renders without a panic, and any JSON object
// renders to something.
func FuzzRender(f *testing.F) {
	for _, s := range []string{`{"items":[{"a":1}]}`, `{"a":{"b":[{"c":null}]}}`, `[]`, `{`, `{"items":[1,{"a":2}]}`, `"x"`, `{"a":1} {"b":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var out, hint bytes.Buffer
		if err := render(printer{w: &out}, &hint, []byte(s)); err != nil {
			t.Fatal(err)
		}
	})
}
