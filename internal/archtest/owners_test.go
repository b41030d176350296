package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeMethods are the methods of raftstore.Table that build an operation
// writing to the table (or, for Sweep, write it).
var writeMethods = []string{"Insert", "Put", "PutIf", "Delete", "DeleteIf", "Sweep"}

// tableRef is a store table: the package that declares it and its variable.
type tableRef struct{ pkg, name string }

// tableDecls finds the package-level variables of type *raftstore.Table[T]
// a file declares (var X = &raftstore.Table[T]{…}).
func tableDecls(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if isTableLiteral(v) && i < len(vs.Names) {
					names = append(names, vs.Names[i].Name)
				}
			}
		}
	}
	return names
}

func isTableLiteral(e ast.Expr) bool {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return false
	}
	cl, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return false
	}
	ix, ok := cl.Type.(*ast.IndexExpr)
	if !ok {
		return false
	}
	sel, ok := ix.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Table" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "raftstore"
}

// parsedFile is one non-test Go file of the module.
type parsedFile struct {
	pkg  string // import path of its package
	name string // file path, for messages
	f    *ast.File
}

func parseModule(t *testing.T, mod string, pkgs []pkg) []parsedFile {
	t.Helper()
	fset := token.NewFileSet()
	var files []parsedFile
	for _, p := range pkgs {
		for _, name := range p.GoFiles {
			full := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, full, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", full, err)
			}
			rel := strings.TrimPrefix(p.ImportPath, mod+"/") + "/" + name
			files = append(files, parsedFile{pkg: p.ImportPath, name: rel, f: f})
		}
	}
	return files
}

// ownershipViolations lists every call in files that builds a write to a
// table declared by another package: pkg.Table.Insert(…) and the like, and
// Retain(ctx, pkg.Table, …).
func ownershipViolations(files []parsedFile) (out []string, tables int) {
	owners := map[tableRef]bool{}
	for _, pf := range files {
		for _, n := range tableDecls(pf.f) {
			owners[tableRef{pf.pkg, n}] = true
		}
	}
	for _, pf := range files {
		imports := map[string]string{} // local name -> import path
		for _, is := range pf.f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			local := path.Base(p)
			if is.Name != nil {
				local = is.Name.Name
			}
			imports[local] = p
		}
		// foreign resolves pkg.Name to a table of another package.
		foreign := func(e ast.Expr) (tableRef, bool) {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return tableRef{}, false
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return tableRef{}, false
			}
			ref := tableRef{imports[id.Name], sel.Sel.Name}
			return ref, ref.pkg != "" && ref.pkg != pf.pkg && owners[ref]
		}
		ast.Inspect(pf.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if ref, ok := foreign(sel.X); ok && slices.Contains(writeMethods, sel.Sel.Name) {
				out = append(out, fmt.Sprintf("%s writes %s.%s (%s)", pf.name, path.Base(ref.pkg), ref.name, sel.Sel.Name))
			}
			if sel.Sel.Name == "Retain" {
				for _, a := range call.Args {
					if ref, ok := foreign(a); ok {
						out = append(out, fmt.Sprintf("%s writes %s.%s (Retain)", pf.name, path.Base(ref.pkg), ref.name))
					}
				}
			}
			return true
		})
	}
	slices.Sort(out)
	return slices.Compact(out), len(owners)
}

// TestTableOwnership checks that only the package declaring a table builds
// operations that write it; others call the owner's op builders
// (audit.Record, events.Emit, apps.TransitionOps, …), so that a rule added
// to a table's one writer cannot be missed by another.
func TestTableOwnership(t *testing.T) {
	m := mainModule(t)
	got, tables := ownershipViolations(parseModule(t, m.Path, loadPackages(t)))
	if tables < 20 {
		t.Fatalf("found %d table declarations; the check would see too little", tables)
	}
	if len(got) > 0 {
		t.Errorf("packages write tables they do not own; call the owning package's op builders instead:\n\t%s", strings.Join(got, "\n\t"))
	}
}

// TestOwnershipCheckCatchesViolations runs the check on made-up files.
func TestOwnershipCheckCatchesViolations(t *testing.T) {
	src := map[string]string{
		"m/apps": `package apps
import "m/raftstore"
var Apps = &raftstore.Table[App]{Name: "apps"}
func ok() { _ = Apps.Put(nil) }`,
		"m/spec": `package spec
import (
	"m/apps"
	store "m/raftstore"
)
var (
	Heads = &store.Table[Head]{}
	Revisions = &raftstore.Table[Rev]{}
)
func bad(s S) {
	_ = apps.Apps.PutIf(nil, 1)
	_ = apps.Apps.Check("a", 1)
	_, _ = apps.Apps.Get(nil, "a")
	s.Retain(nil, apps.Apps, "x")
	_ = Revisions.Insert(nil)
}`,
	}
	fset := token.NewFileSet()
	var files []parsedFile
	for p, s := range src {
		f, err := parser.ParseFile(fset, p+".go", s, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, parsedFile{pkg: p, name: p + "/x.go", f: f})
	}
	got, tables := ownershipViolations(files)
	want := []string{"m/spec/x.go writes apps.Apps (PutIf)", "m/spec/x.go writes apps.Apps (Retain)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || tables != 2 {
		t.Errorf("violations = %q (%d tables), want %q (2 tables)", got, tables, want)
	}
}

// applyDeclarations lists the interfaces outside raftstore that declare the
// store's raw Apply(ctx, ops ...raftstore.Op): a service writes through
// Update (read, build, apply, build again on a conflict), never by hand.
func applyDeclarations(files []parsedFile, storePkg string) []string {
	var out []string
	for _, pf := range files {
		if pf.pkg == storePkg {
			continue
		}
		ast.Inspect(pf.f, func(n ast.Node) bool {
			it, ok := n.(*ast.InterfaceType)
			if !ok {
				return true
			}
			for _, m := range it.Methods.List {
				ft, ok := m.Type.(*ast.FuncType)
				if !ok || len(m.Names) != 1 || m.Names[0].Name != "Apply" || ft.Params == nil {
					continue
				}
				for _, p := range ft.Params.List {
					if el, ok := p.Type.(*ast.Ellipsis); ok {
						if sel, ok := el.Elt.(*ast.SelectorExpr); ok && sel.Sel.Name == "Op" {
							out = append(out, pf.name+" declares Apply(ctx, ...raftstore.Op)")
						}
					}
				}
			}
			return true
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestServicesWriteThroughUpdate(t *testing.T) {
	m := mainModule(t)
	got := applyDeclarations(parseModule(t, m.Path, loadPackages(t)), m.Path+"/raftstore")
	if len(got) > 0 {
		t.Errorf("services write with the store's Update, not Apply; declare Update(ctx, raftstore.Build) instead:\n\t%s", strings.Join(got, "\n\t"))
	}
}
