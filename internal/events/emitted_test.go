package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notEmittedYet are the catalogue's events whose features later issues
// bring (none now). Each is emitted by the issue that builds its feature,
// which then takes it off this list (the test below fails until it does).
var notEmittedYet = []string{}

// emission is a call of Emit or New found in the product's code.
type emission struct {
	pos  string
	name string
	// keys are the data map literal's keys; nil when data is nil; known is
	// false when data is not a literal (the check at runtime, in New,
	// still applies).
	keys  []string
	known bool
}

// TestEveryEmittedEventCarriesItsCatalogueFields walks the product's code
// (tests aside) for every event written to the outbox: each names an event
// of the catalogue, with a data literal of exactly the catalogue's fields
// (New refuses anything else at runtime, for data that is not a literal);
// and every event of the catalogue is emitted somewhere, but those whose
// features are still to come.
func TestEveryEmittedEventCarriesItsCatalogueFields(t *testing.T) {
	found := emissions(t, filepath.Join("..", ".."))
	if len(found) < 30 {
		t.Fatalf("found %d emissions; the walk is broken", len(found))
	}
	emitted := map[string]bool{}
	for _, e := range found {
		kind, ok := Lookup(e.name)
		if !ok {
			t.Errorf("%s: %q is not in the catalogue", e.pos, e.name)
			continue
		}
		emitted[e.name] = true
		if !e.known {
			continue
		}
		want := slices.Sorted(slices.Values(kind.Data))
		if want == nil {
			want = []string{}
		}
		got := slices.Sorted(slices.Values(e.keys))
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s carries data %v; the catalogue's fields are %v", e.pos, e.name, got, want)
		}
	}
	for _, k := range Catalogue() {
		later := slices.Contains(notEmittedYet, k.Name)
		switch {
		case !emitted[k.Name] && !later:
			t.Errorf("%s is in the catalogue and never emitted", k.Name)
		case emitted[k.Name] && later:
			t.Errorf("%s is emitted now: take it off notEmittedYet", k.Name)
		}
	}
	t.Logf("%d emissions of %d events; %d events still to come with their features", len(found), len(emitted), len(notEmittedYet))
}

// emissions parses every non-test Go file under root for calls of
// events.Emit and events.New (and Emit and New inside this package).
func emissions(t *testing.T, root string) []emission {
	t.Helper()
	var out []emission
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inEvents := f.Name.Name == "events"
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 7 {
				return true
			}
			var fn string
			switch x := call.Fun.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "events" {
					fn = x.Sel.Name
				}
			case *ast.Ident:
				if inEvents {
					fn = x.Name
				}
			}
			if fn != "Emit" && fn != "New" {
				return true
			}
			e := emission{pos: fset.Position(call.Pos()).String()}
			lit, ok := call.Args[2].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true // a name chosen at runtime (New's own, a variable): New checks it
			}
			e.name, _ = strconv.Unquote(lit.Value)
			e.keys, e.known = keys(call.Args[6])
			out = append(out, e)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keys returns the string keys of a map literal, or none for nil.
func keys(x ast.Expr) ([]string, bool) {
	if id, ok := x.(*ast.Ident); ok && id.Name == "nil" {
		return nil, true
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	set := map[string]bool{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return nil, false
		}
		k, ok := kv.Key.(*ast.BasicLit)
		if !ok || k.Kind != token.STRING {
			return nil, false
		}
		s, _ := strconv.Unquote(k.Value)
		set[s] = true
	}
	return slices.Sorted(maps.Keys(set)), true
}
