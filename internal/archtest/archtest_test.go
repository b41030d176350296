package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A pattern names import paths:
//
//	"./x"       the package x of this module, exactly
//	"./x/..."   x and every package below it
//	"a/b"       the external package a/b, exactly
//	"a/b/..."   a/b and every package below it (not a/bc)
//	"*s*"       every path containing s
type pattern = string

// rule forbids the packages selected by from (minus notFrom) to import the
// packages selected by imports (minus exceptImports). Imports are direct
// imports of the package's non-test files; with tests, those of its test
// files (in-package and external) are checked too.
type rule struct {
	name          string
	from          []pattern
	notFrom       []pattern
	imports       []pattern
	exceptImports []pattern
	tests         bool
}

var storeLibs = []pattern{
	"github.com/hashicorp/raft/...",
	"github.com/hashicorp/raft-boltdb/...",
	"go.etcd.io/bbolt/...",
	"github.com/hashicorp/go-hclog/...",
	"github.com/hashicorp/go-memdb/...",
}

// rules is the import policy of the module.
var rules = []rule{
	{
		name:    "only raftstore (and its tests) uses raft, bolt, hclog and memdb",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./raftstore"},
		imports: storeLibs,
		tests:   true,
	},
	{
		name:    "only server and its subpackages use echo",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./server/..."},
		imports: []pattern{"github.com/labstack/echo/..."},
	},
	{
		name:    "only scheduler/nomad (and its fake Nomad) uses the Nomad API",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./scheduler/nomad/..."},
		imports: []pattern{"github.com/hashicorp/nomad/api/..."},
	},
	{
		name:    "only edge/consul (and its fake Consul) uses the Consul API",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./edge/consul/..."},
		imports: []pattern{"github.com/hashicorp/consul/api/..."},
	},
	{
		name:    "only vaultsecrets uses the Vault API",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./vaultsecrets"},
		imports: []pattern{"github.com/hashicorp/vault/api/..."},
	},
	{
		name:    "only the postgres slots adapter uses the PostgreSQL driver",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./slots/postgres"},
		imports: []pattern{"github.com/jackc/..."},
	},
	{
		name:    "only the s3 backup storage adapter uses the S3 client",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./backupstores/s3"},
		imports: []pattern{"github.com/minio/..."},
		tests:   true,
	},
	{
		name:    "backup storage adapters use nothing of the module but adapters, backuprepo, errcode, cacert, netfail, their own helpers and test harnesses",
		from:    []pattern{"./backupstores/..."},
		imports: []pattern{"./..."},
		exceptImports: []pattern{"./internal/adapters", "./internal/backuprepo", "./internal/errcode", "./internal/cacert", "./internal/netfail", "./backupstores/...",
			"./internal/backuprepo/storagetest", "./internal/s3test", "./internal/testserver"},
		tests: true,
	},
	{
		// Its tests run it over the real adapters too.
		name:    "the backup repository uses no storage adapter",
		from:    []pattern{"./internal/backuprepo"},
		imports: []pattern{"./backupstores/..."},
	},
	{
		// The email adapter sends with net/smtp; go-smtp is the real SMTP
		// server its tests talk to, and links into nothing else.
		name:    "only the email adapter's tests use go-smtp",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./notifiers/email"},
		imports: []pattern{"github.com/emersion/..."},
		tests:   true,
	},
	{
		name:    "the email adapter uses go-smtp in its tests only",
		from:    []pattern{"./notifiers/email"},
		imports: []pattern{"github.com/emersion/..."},
	},
	{
		name:    "notification adapters use nothing of the module but adapters, notify, errcode, cacert, netfail and their own helpers",
		from:    []pattern{"./notifiers/..."},
		imports: []pattern{"./..."},
		exceptImports: []pattern{"./internal/adapters", "./internal/notify", "./internal/errcode", "./internal/cacert", "./internal/events",
			"./internal/netfail", "./notifiers/..."},
		tests: true,
	},
	{
		name:    "only detection reads compose files",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./internal/detect"},
		imports: []pattern{"github.com/compose-spec/..."},
	},
	{
		name:    "only the icon package decodes WebP and draws tiles",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./internal/icon"},
		imports: []pattern{"golang.org/x/image/..."},
	},
	{
		name:    "only the process runtime opens pseudo-terminals",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./scheduler/process"},
		imports: []pattern{"github.com/creack/pty/..."},
	},
	{
		// The exec terminal is the API's one websocket: the server answers
		// it, and the API client (api/exec.go) dials it for the CLI and any
		// other client; nothing else speaks it.
		name:    "only the server and the API client speak websocket",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./server/...", "./api"},
		imports: []pattern{"github.com/coder/websocket/..."},
	},
	{
		name:    "only the browser harness drives Chromium",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./internal/browsertest"},
		imports: []pattern{"github.com/chromedp/..."},
		tests:   true,
	},
	{
		name:    "only toolserver uses the MCP SDK",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./toolserver"},
		imports: []pattern{"github.com/modelcontextprotocol/go-sdk/..."},
	},
	{
		name:          "the tool server imports nothing of the module but the public client",
		from:          []pattern{"./toolserver"},
		imports:       []pattern{"./..."},
		exceptImports: []pattern{"./api"},
		tests:         true,
	},
	{
		name:    "only cmd/svc uses cobra",
		from:    []pattern{"./..."},
		notFrom: []pattern{"./cmd/svc"},
		imports: []pattern{"github.com/spf13/cobra/..."},
	},
	{
		name:    "internal packages never use the server, commands or echo",
		from:    []pattern{"./internal/..."},
		imports: []pattern{"./server/...", "./cmd/...", "github.com/labstack/echo/..."},
	},
	{
		name:          "netfail uses nothing of the module but errcode",
		from:          []pattern{"./internal/netfail"},
		imports:       []pattern{"./..."},
		exceptImports: []pattern{"./internal/errcode"},
	},
	{
		// The security scanner is a library over a directory and a spec
		// document: no store, HTTP, scheduler or events (its callers own
		// those); detect is only its tests' source of the samples' specs.
		name:          "the security scanner uses nothing of the module but spec",
		from:          []pattern{"./internal/scan"},
		imports:       []pattern{"./..."},
		exceptImports: []pattern{"./internal/spec"},
	},
	{
		name:          "raftstore uses nothing of internal but errcode",
		from:          []pattern{"./raftstore"},
		imports:       []pattern{"./internal/..."},
		exceptImports: []pattern{"./internal/errcode"},
	},
	{
		name: "pure domain packages start no process and use no database, syscall or vendor library",
		from: []pattern{"./internal/config", "./internal/policy", "./internal/errcode", "./internal/ids",
			"./internal/authz", "./internal/events", "./internal/audit", "./internal/spec"},
		imports: []pattern{"os/exec", "database/sql/...", "syscall",
			"github.com/hashicorp/...", "github.com/labstack/...", "github.com/prometheus/..."},
	},
	{
		name:    "the public client imports nothing of the module",
		from:    []pattern{"./api/..."},
		imports: []pattern{"./..."},
	},
	{
		name:    "the verifier apps import imports nothing of the module",
		from:    []pattern{"./assertion/..."},
		imports: []pattern{"./..."},
	},
	{
		name: "production packages never link fakes or the test agent",
		from: []pattern{"./..."},
		notFrom: []pattern{"*/fake*", "./internal/testagent/...", "./raftstore/raftstoretest",
			"./internal/secrets/secretstest", "./internal/vaulttest", "./internal/nomadtest", "./internal/testserver", "./internal/pgtest", "./internal/browsertest",
			"./scheduler/releasetest", "./notifiers/internal/notifytest", "./internal/backuprepo/storagetest", "./internal/s3test"},
		imports: []pattern{"*/fake*", "./internal/testagent/...", "./raftstore/raftstoretest",
			"./internal/secrets/secretstest", "./internal/vaulttest", "./internal/nomadtest", "./internal/testserver", "./internal/pgtest", "./internal/browsertest",
			"./scheduler/releasetest", "./notifiers/internal/notifytest", "./internal/backuprepo/storagetest", "./internal/s3test"},
	},
}

// bannedNames are package names that say nothing about what a package owns.
var bannedNames = []string{"util", "utils", "common", "types", "models", "helpers", "misc"}

// pkg is what go list -json says of a package, as far as the rules need.
type pkg struct {
	ImportPath   string
	Name         string
	Doc          string
	Dir          string
	GoFiles      []string
	CgoFiles     []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// match reports whether path matches pattern p, with "./" standing for
// the module path mod.
func match(mod string, p pattern, path string) bool {
	if len(p) > 1 && strings.HasPrefix(p, "*") && strings.HasSuffix(p, "*") {
		return strings.Contains(path, p[1:len(p)-1])
	}
	if rest, ok := strings.CutPrefix(p, "./"); ok {
		p = mod + "/" + rest
		if rest == "..." {
			return path == mod || strings.HasPrefix(path, mod+"/")
		}
	}
	if base, ok := strings.CutSuffix(p, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == p
}

func matchAny(mod string, ps []pattern, path string) bool {
	return slices.ContainsFunc(ps, func(p pattern) bool { return match(mod, p, path) })
}

// violations returns every import the rule forbids, one line each, sorted.
func (r rule) violations(mod string, pkgs []pkg) []string {
	var out []string
	check := func(p pkg, imports []string, where string) {
		for _, imp := range imports {
			if matchAny(mod, r.imports, imp) && !matchAny(mod, r.exceptImports, imp) {
				out = append(out, fmt.Sprintf("%s imports %s%s", p.ImportPath, imp, where))
			}
		}
	}
	for _, p := range pkgs {
		if !matchAny(mod, r.from, p.ImportPath) || matchAny(mod, r.notFrom, p.ImportPath) {
			continue
		}
		check(p, p.Imports, "")
		if r.tests {
			check(p, p.TestImports, " (in its tests)")
			check(p, p.XTestImports, " (in its external tests)")
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// docViolations lists packages with non-test Go files and no doc comment.
func docViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue // test-only package: nothing to document
		}
		if strings.TrimSpace(p.Doc) == "" {
			out = append(out, fmt.Sprintf("%s (%s) has no package doc comment; add one, for example in doc.go: // Package %s owns ...", p.ImportPath, p.Dir, p.Name))
		}
	}
	return out
}

// nameViolations lists packages with a banned name. It reads the declared
// name, not the directory: a directory such as jobs-templates cannot be a
// package name and its package is named otherwise.
func nameViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if slices.Contains(bannedNames, p.Name) {
			out = append(out, fmt.Sprintf("%s is named %q; name a package after what it owns", p.ImportPath, p.Name))
		}
	}
	return out
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

type moduleInfo struct {
	Path string
	Dir  string
}

var module = sync.OnceValues(func() (moduleInfo, error) {
	out, err := exec.Command("go", "list", "-m", "-json").Output()
	if err != nil {
		return moduleInfo{}, fmt.Errorf("go list -m -json: %w", err)
	}
	var m moduleInfo
	if err := json.Unmarshal(out, &m); err != nil {
		return moduleInfo{}, fmt.Errorf("decode go list -m: %w", err)
	}
	if m.Path == "" || m.Dir == "" {
		return moduleInfo{}, errors.New("go list -m named no module")
	}
	return m, nil
})

// mainModule returns the module's path and root directory.
func mainModule(t *testing.T) moduleInfo {
	t.Helper()
	m, err := module()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadPackages lists every package of the module with its direct imports.
func loadPackages(t *testing.T) []pkg {
	t.Helper()
	m := mainModule(t)
	out := goCmd(t, m.Dir, "list", "-e", "-json=ImportPath,Name,Doc,Dir,GoFiles,CgoFiles,Imports,TestImports,XTestImports,Error", "./...")
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("package %s cannot be loaded, so its imports cannot be checked: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	// Guard against a vacuous pass: the rules must see the packages they
	// are about.
	for _, want := range []string{"raftstore", "internal/errcode", "internal/archtest"} {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == m.Path+"/"+want }) {
			t.Fatalf("go list ./... did not list %s/%s; the rules would check nothing", m.Path, want)
		}
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	m := mainModule(t)
	pkgs := loadPackages(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			if v := r.violations(m.Path, pkgs); len(v) > 0 {
				t.Errorf("rule %q is broken:\n\t%s", r.name, strings.Join(v, "\n\t"))
			}
		})
	}
}

func TestPackageDocs(t *testing.T) {
	if v := docViolations(loadPackages(t)); len(v) > 0 {
		t.Errorf("every package must have a doc comment saying what it owns:\n\t%s", strings.Join(v, "\n\t"))
	}
}

func TestPackageNames(t *testing.T) {
	if v := nameViolations(loadPackages(t)); len(v) > 0 {
		t.Errorf("grab-bag package names:\n\t%s", strings.Join(v, "\n\t"))
	}
}

// TestRulesCatchViolations runs the checks on made-up packages, so that a
// rule that can never fire (a typo in a pattern, a wrong field) is noticed.
func TestRulesCatchViolations(t *testing.T) {
	const mod = "example.com/m"
	pkgs := []pkg{
		{ImportPath: mod + "/raftstore", Name: "raftstore", Doc: "x", GoFiles: []string{"a.go"},
			Imports:     []string{"github.com/hashicorp/raft", mod + "/internal/errcode", mod + "/internal/ids"},
			TestImports: []string{"github.com/hashicorp/go-memdb"}},
		{ImportPath: mod + "/internal/audit", Name: "audit", GoFiles: []string{"a.go"},
			Imports:      []string{"github.com/hashicorp/raft-boltdb/v2", "github.com/labstack/echo/v4", mod + "/server"},
			XTestImports: []string{"go.etcd.io/bbolt"}},
		{ImportPath: mod + "/server/api", Name: "api", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{"github.com/labstack/echo/v4/middleware", "github.com/spf13/cobra", mod + "/internal/fakeagent"}},
		{ImportPath: mod + "/scheduler/nomad", Name: "nomad", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{"github.com/hashicorp/nomad/api", "github.com/hashicorp/consul/api"}},
		{ImportPath: mod + "/internal/fakeagent", Name: "fakeagent", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{mod + "/internal/testagent"}},
		{ImportPath: mod + "/cmd/svc", Name: "main", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{"github.com/spf13/cobra", "github.com/hashicorp/vault/api", mod + "/internal/testagent"}},
		{ImportPath: mod + "/jobs-templates", Name: "utils", GoFiles: []string{"a.go"}},
		{ImportPath: mod + "/e2e", Name: "e2e", XTestImports: []string{"github.com/hashicorp/raft"}},
		{ImportPath: mod + "/api", Name: "api", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{"net/http", mod + "/internal/errcode"}},
		{ImportPath: mod + "/notifiers/email", Name: "email", Doc: "x", GoFiles: []string{"a.go"},
			Imports:     []string{"github.com/emersion/go-smtp", mod + "/internal/notify", mod + "/notifiers/internal/notifytest"},
			TestImports: []string{"github.com/emersion/go-sasl", mod + "/raftstore"}},
		{ImportPath: mod + "/notifiers/chat", Name: "chat", Doc: "x", GoFiles: []string{"a.go"},
			XTestImports: []string{"github.com/emersion/go-smtp"}},
		{ImportPath: mod + "/backupstores/local", Name: "local", Doc: "x", GoFiles: []string{"a.go"},
			Imports:     []string{"github.com/minio/minio-go/v7", mod + "/raftstore", mod + "/internal/s3test", mod + "/internal/backuprepo"},
			TestImports: []string{mod + "/internal/backuprepo/storagetest", mod + "/internal/s3test", "github.com/minio/minio-go/v7/pkg/credentials"}},
		{ImportPath: mod + "/internal/backuprepo", Name: "backuprepo", Doc: "x", GoFiles: []string{"a.go"},
			Imports: []string{mod + "/backupstores/local"}},
	}
	var got []string
	for _, r := range rules {
		for _, v := range r.violations(mod, pkgs) {
			got = append(got, r.name+": "+strings.TrimPrefix(strings.ReplaceAll(v, mod+"/", ""), mod))
		}
	}
	for _, v := range docViolations(pkgs) {
		got = append(got, "doc: "+strings.ReplaceAll(v[:strings.Index(v, " ")], mod+"/", ""))
	}
	for _, v := range nameViolations(pkgs) {
		got = append(got, "name: "+strings.ReplaceAll(v[:strings.Index(v, " ")], mod+"/", ""))
	}
	want := []string{
		"only raftstore (and its tests) uses raft, bolt, hclog and memdb: e2e imports github.com/hashicorp/raft (in its external tests)",
		"only raftstore (and its tests) uses raft, bolt, hclog and memdb: internal/audit imports github.com/hashicorp/raft-boltdb/v2",
		"only raftstore (and its tests) uses raft, bolt, hclog and memdb: internal/audit imports go.etcd.io/bbolt (in its external tests)",
		"only server and its subpackages use echo: internal/audit imports github.com/labstack/echo/v4",
		"only edge/consul (and its fake Consul) uses the Consul API: scheduler/nomad imports github.com/hashicorp/consul/api",
		"only vaultsecrets uses the Vault API: cmd/svc imports github.com/hashicorp/vault/api",
		"only the s3 backup storage adapter uses the S3 client: backupstores/local imports github.com/minio/minio-go/v7",
		"only the s3 backup storage adapter uses the S3 client: backupstores/local imports github.com/minio/minio-go/v7/pkg/credentials (in its tests)",
		"backup storage adapters use nothing of the module but adapters, backuprepo, errcode, cacert, netfail, their own helpers and test harnesses: backupstores/local imports raftstore",
		"the backup repository uses no storage adapter: internal/backuprepo imports backupstores/local",
		"only the email adapter's tests use go-smtp: notifiers/chat imports github.com/emersion/go-smtp (in its external tests)",
		"the email adapter uses go-smtp in its tests only: notifiers/email imports github.com/emersion/go-smtp",
		"notification adapters use nothing of the module but adapters, notify, errcode, cacert, netfail and their own helpers: notifiers/email imports raftstore (in its tests)",
		"only cmd/svc uses cobra: server/api imports github.com/spf13/cobra",
		"internal packages never use the server, commands or echo: internal/audit imports server",
		"internal packages never use the server, commands or echo: internal/audit imports github.com/labstack/echo/v4",
		"raftstore uses nothing of internal but errcode: raftstore imports internal/ids",
		"pure domain packages start no process and use no database, syscall or vendor library: internal/audit imports github.com/hashicorp/raft-boltdb/v2",
		"pure domain packages start no process and use no database, syscall or vendor library: internal/audit imports github.com/labstack/echo/v4",
		"the public client imports nothing of the module: api imports internal/errcode",
		"production packages never link fakes or the test agent: backupstores/local imports internal/s3test",
		"production packages never link fakes or the test agent: cmd/svc imports internal/testagent",
		"production packages never link fakes or the test agent: notifiers/email imports notifiers/internal/notifytest",
		"production packages never link fakes or the test agent: server/api imports internal/fakeagent",
		"doc: internal/audit",
		"doc: jobs-templates",
		"name: jobs-templates",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations found in the made-up packages (-want +got):\n%s", diff)
	}
}

func TestMatch(t *testing.T) {
	const mod = "example.com/m"
	tests := []struct {
		p    pattern
		path string
		want bool
	}{
		{"github.com/hashicorp/raft/...", "github.com/hashicorp/raft", true},
		{"github.com/hashicorp/raft/...", "github.com/hashicorp/raft/sub", true},
		{"github.com/hashicorp/raft/...", "github.com/hashicorp/raft-boltdb/v2", false},
		{"github.com/labstack/echo/...", "github.com/labstack/echo/v4", true},
		{"github.com/labstack/echo/...", "github.com/labstack/echox", false},
		{"go.etcd.io/bbolt", "go.etcd.io/bbolt", true},
		{"go.etcd.io/bbolt", "go.etcd.io/bbolt/x", false},
		{"./...", mod, true},
		{"./...", mod + "/a/b", true},
		{"./...", "example.com/mx", false},
		{"./server/...", mod + "/server", true},
		{"./server/...", mod + "/server/http", true},
		{"./server/...", mod + "/serverless", false},
		{"./raftstore", mod + "/raftstore", true},
		{"./raftstore", mod + "/raftstore/sub", false},
		{"*/fake*", mod + "/adapters/fake", true},
		{"*/fake*", mod + "/internal/fakeagent", true},
		{"*/fake*", "k8s.io/client-go/kubernetes/fake", true},
		{"*/fake*", mod + "/internal/nofake", false},
	}
	for _, tt := range tests {
		if got := match(mod, tt.p, tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %t; want %t", tt.p, tt.path, got, tt.want)
		}
	}
}

// linkedPackages is the package pattern NOTICE covers: the svc binary, or
// while cmd/svc has no Go files, every non-test package (as scripts/notice.go
// does).
func linkedPackages(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", "{{len .GoFiles}}", "./cmd/svc")
	cmd.Dir = dir
	out, err := cmd.Output()
	if n := strings.TrimSpace(string(out)); err != nil || n == "" || n == "0" {
		t.Logf("./cmd/svc has no Go files; checking the modules of ./... instead")
		return "./..."
	}
	return "./cmd/svc"
}

func TestNoticeListsEveryLinkedModule(t *testing.T) {
	m := mainModule(t)
	notice, err := os.ReadFile(filepath.Join(m.Dir, "NOTICE"))
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s/NOTICE does not exist; generate it with: go run scripts/notice.go > NOTICE", m.Dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{} // module path -> version
	for line := range strings.Lines(string(notice)) {
		if f := strings.Fields(line); len(f) >= 3 {
			listed[f[0]] = f[1]
		}
	}

	pattern := linkedPackages(t, m.Dir)
	out := goCmd(t, m.Dir, "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", pattern)
	var missing []string
	n := 0
	for line := range strings.Lines(string(out)) {
		path, version, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n++
		switch got, ok := listed[path]; {
		case !ok:
			missing = append(missing, path+" "+version+" is not listed")
		case got != version:
			missing = append(missing, fmt.Sprintf("%s is listed at %s; %s links %s", path, got, pattern, version))
		}
	}
	if n == 0 {
		t.Fatalf("go list -deps %s named no third-party module; the test would check nothing", pattern)
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	if len(missing) > 0 {
		t.Errorf("NOTICE is out of date for %s; regenerate it with: go run scripts/notice.go > NOTICE\n\t%s", pattern, strings.Join(missing, "\n\t"))
	}
}

// TestNoticeListsTheConsolesPackages: every npm package the console ships
// (console/package-lock.json, not dev) is in NOTICE at its locked version.
func TestNoticeListsTheConsolesPackages(t *testing.T) {
	m := mainModule(t)
	notice, err := os.ReadFile(filepath.Join(m.Dir, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(m.Dir, "console", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Dev     bool   `json:"dev"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, p := range lock.Packages {
		name, ok := strings.CutPrefix(path, "node_modules/")
		if !ok || p.Dev {
			continue
		}
		n++
		if !strings.Contains(string(notice), "npm:"+name+" "+p.Version+" ") {
			t.Errorf("NOTICE does not list npm:%s %s, which the console ships; regenerate it with: go run scripts/notice.go > NOTICE", name, p.Version)
		}
	}
	if n == 0 {
		t.Error("console/package-lock.json names no package the console ships; the test would check nothing")
	}
}
