package terraform

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/svchost/svc/edge/consul"
	"github.com/svchost/svc/edge/nomadsd"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/vaultsecrets"
)

// secretOutput names outputs that hold a credential: they must be
// sensitive (names ending in _path say where one is, not what).
var secretOutput = regexp.MustCompile(`token|secret|password|role_id|kek|key$`)

// moduleMeta are the arguments of a module block that are not the module's
// variables.
var moduleMeta = []string{"source", "version", "providers", "count", "for_each", "depends_on"}

// tfDir is a module or example: its variables, outputs and module calls.
type tfDir struct {
	path      string
	variables map[string]bool // name: required (no default)
	calls     []moduleCall
	hasTF     bool // a terraform block with required_version and required_providers
}

type moduleCall struct {
	name   string
	source string
	args   []string
	rng    hcl.Range
}

// TestModulesAndExamples loads every module and example with the HCL
// parser and checks what `tofu validate` and `tofu fmt -check` would, as
// far as they go without the providers: see checkDir.
func TestModulesAndExamples(t *testing.T) {
	dirs := tfDirs(t, ".")
	if len(dirs) < 3 {
		t.Fatalf("found %d module and example directories; want modules/hashistack, modules/svc-nomad and examples/local at least", len(dirs))
	}
	loaded := map[string]*tfDir{}
	for _, d := range dirs {
		loaded[d] = checkDir(t, d)
	}
	// Agent configurations the examples ship (nomad-dev.hcl) parse too.
	hclFiles, _ := filepath.Glob(filepath.Join("examples", "*", "*.hcl"))
	for _, name := range hclFiles {
		if _, diags := hclparse.NewParser().ParseHCLFile(name); diags.HasErrors() {
			t.Errorf("%s does not parse: %s", name, diags.Error())
		}
	}
	for _, d := range loaded {
		for _, c := range d.calls {
			checkCall(t, d, c, loaded)
		}
	}
}

// TestCheckFindsDefects plants one defect of each kind in a copy of a
// module and checks that checkDir reports it: the test above can fail.
func TestCheckFindsDefects(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("modules", "hashistack", "outputs.tf"))
	if err != nil {
		t.Fatal(err)
	}
	vars, err := os.ReadFile(filepath.Join("modules", "hashistack", "variables.tf"))
	if err != nil {
		t.Fatal(err)
	}
	versions, err := os.ReadFile(filepath.Join("modules", "hashistack", "versions.tf"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, file, from, to string }{
		{"output not sensitive", "outputs.tf", "  sensitive   = true\n", ""},
		{"output without description", "outputs.tf", `  description = "The KV version 2 mount (the vault adapter's mount, the nomad adapter's vault_mount)."` + "\n", ""},
		{"variable without type", "variables.tf", "  type        = string\n", ""},
		{"not formatted", "variables.tf", "  type        = string\n", "  type = string\n"},
		{"no version constraint", "versions.tf", `      version = ">= 4.2.0, < 6.0.0"` + "\n", ""},
		{"does not parse", "variables.tf", "variable \"nomad_addr\" {", "variable \"nomad_addr\" {{"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string][]byte{"outputs.tf": src, "variables.tf": vars, "versions.tf": versions}
			if !bytes.Contains(files[tc.file], []byte(tc.from)) {
				t.Fatalf("%s does not contain %q any more: update the planted defect", tc.file, tc.from)
			}
			files[tc.file] = bytes.Replace(files[tc.file], []byte(tc.from), []byte(tc.to), 1)
			for name, b := range files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rec := &recorder{}
			checkDir(rec, dir)
			if len(rec.errs) == 0 {
				t.Errorf("checkDir found nothing wrong with the planted defect %q", tc.name)
			}
		})
	}
}

// reporter is the part of testing.T that checkDir uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

var _ reporter = (*testing.T)(nil)

// recorder is a reporter that keeps the errors.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// tfDirs are the directories under root holding .tf files.
func tfDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	// examples/*/* holds the second steps of examples in two steps
	// (examples/aws/stack).
	for _, pattern := range []string{"modules/*", "examples/*", "examples/*/*"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range m {
			if tf, _ := filepath.Glob(filepath.Join(d, "*.tf")); len(tf) > 0 {
				dirs = append(dirs, d)
			}
		}
	}
	sort.Strings(dirs)
	return dirs
}

// checkDir parses every .tf file of a directory and checks that it is
// formatted as hclwrite.Format formats it (what `tofu fmt` does), that
// every variable has a description and a type, that every output has a
// description and is sensitive when it holds a credential, and that there
// is a terraform block with required_version and, for each provider, its
// source and version.
func checkDir(t reporter, dir string) *tfDir {
	t.Helper()
	d := &tfDir{path: dir, variables: map[string]bool{}}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	if len(files) == 0 {
		t.Errorf("%s: no .tf files", dir)
	}
	parser := hclparse.NewParser()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		f, diags := parser.ParseHCLFile(name)
		if diags.HasErrors() {
			t.Errorf("%s does not parse: %s", name, diags.Error())
			continue
		}
		if formatted := hclwrite.Format(src); !bytes.Equal(formatted, src) {
			t.Errorf("%s is not formatted as `tofu fmt` would format it; run tofu fmt -recursive terraform/", name)
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				required := true
				for _, a := range []string{"description", "type"} {
					if _, ok := b.Body.Attributes[a]; !ok {
						t.Errorf("%s: variable %q has no %s", b.DefRange().String(), b.Labels[0], a)
					}
				}
				if _, ok := b.Body.Attributes["default"]; ok {
					required = false
				}
				d.variables[b.Labels[0]] = required
			case "output":
				if _, ok := b.Body.Attributes["description"]; !ok {
					t.Errorf("%s: output %q has no description", b.DefRange().String(), b.Labels[0])
				}
				if secretOutput.MatchString(b.Labels[0]) && !strings.HasSuffix(b.Labels[0], "_path") && !isTrue(b.Body.Attributes["sensitive"]) {
					t.Errorf("%s: output %q holds a credential but is not sensitive = true", b.DefRange().String(), b.Labels[0])
				}
			case "module":
				c := moduleCall{name: b.Labels[0], rng: b.DefRange()}
				if a, ok := b.Body.Attributes["source"]; ok {
					v, diags := a.Expr.Value(nil)
					if !diags.HasErrors() && v.Type() == cty.String {
						c.source = v.AsString()
					}
				}
				for name := range b.Body.Attributes {
					if !slices.Contains(moduleMeta, name) {
						c.args = append(c.args, name)
					}
				}
				d.calls = append(d.calls, c)
			case "terraform":
				checkTerraformBlock(t, name, b)
				d.hasTF = true
			}
		}
	}
	if !d.hasTF {
		t.Errorf("%s: no terraform block (required_version, required_providers)", dir)
	}
	return d
}

func isTrue(a *hclsyntax.Attribute) bool {
	if a == nil {
		return false
	}
	v, diags := a.Expr.Value(nil)
	return !diags.HasErrors() && v.Type() == cty.Bool && v.True()
}

// checkTerraformBlock: required_version, and source and version for each
// provider in required_providers.
func checkTerraformBlock(t reporter, file string, b *hclsyntax.Block) {
	t.Helper()
	if _, ok := b.Body.Attributes["required_version"]; !ok {
		t.Errorf("%s: the terraform block has no required_version", file)
	}
	var providers *hclsyntax.Block
	for _, inner := range b.Body.Blocks {
		if inner.Type == "required_providers" {
			providers = inner
		}
	}
	if providers == nil || len(providers.Body.Attributes) == 0 {
		t.Errorf("%s: the terraform block has no required_providers", file)
		return
	}
	for name, a := range providers.Body.Attributes {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() || !v.Type().IsObjectType() {
			t.Errorf("%s: required_providers.%s is not an object {source, version}", file, name)
			continue
		}
		for _, k := range []string{"source", "version"} {
			if !v.Type().HasAttribute(k) || v.GetAttr(k).IsNull() || v.GetAttr(k).AsString() == "" {
				t.Errorf("%s: required_providers.%s has no %s", file, name, k)
			}
		}
	}
}

// checkCall: a module call points at a module directory of this tree,
// passes only variables the module declares and every one it requires.
func checkCall(t *testing.T, from *tfDir, c moduleCall, loaded map[string]*tfDir) {
	t.Helper()
	target := filepath.Clean(filepath.Join(from.path, c.source))
	m, ok := loaded[target]
	if !ok {
		t.Errorf("%s: module %q: source %q is not a module directory of terraform/ (%s)", c.rng, c.name, c.source, target)
		return
	}
	for _, a := range c.args {
		if _, ok := m.variables[a]; !ok {
			t.Errorf("%s: module %q passes %s, which %s does not declare", c.rng, c.name, a, target)
		}
	}
	for v, required := range m.variables {
		if required && !slices.Contains(c.args, v) {
			t.Errorf("%s: module %q does not pass %s, which %s requires (no default)", c.rng, c.name, v, target)
		}
	}
}

// templateFuncs are the functions the module's templates call, as
// templatefile provides them.
var templateFuncs = map[string]function.Function{
	"indent":     stdlib.IndentFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"length":     stdlib.LengthFunc,
	"join":       stdlib.JoinFunc,
	"formatlist": stdlib.FormatListFunc,
	"concat":     stdlib.ConcatFunc,
}

// templatefileKeys returns, for each templatefile("${path.module}/<file>",
// {…}) call in a module's .tf files, the keys of the object it passes.
func templatefileKeys(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", name, diags.Error())
		}
		hclsyntax.VisitAll(f.Body.(*hclsyntax.Body), func(n hclsyntax.Node) hcl.Diagnostics {
			call, ok := n.(*hclsyntax.FunctionCallExpr)
			if !ok || call.Name != "templatefile" || len(call.Args) != 2 {
				return nil
			}
			obj, ok := call.Args[1].(*hclsyntax.ObjectConsExpr)
			if !ok {
				t.Errorf("%s: templatefile's variables are not an object literal", call.Range())
				return nil
			}
			file := filepath.Base(string(call.Args[0].Range().SliceBytes(src)))
			file = strings.Trim(file, `"`)
			var keys []string
			for _, item := range obj.Items {
				keys = append(keys, hcl.ExprAsKeyword(item.KeyExpr))
			}
			sort.Strings(keys)
			out[file] = keys
			return nil
		})
	}
	return out
}

// renderTemplate renders a templatefile template with vars as OpenTofu
// would, after checking that vars has exactly the keys the module passes
// to it.
func renderTemplate(t *testing.T, name string, vars map[string]cty.Value) string {
	t.Helper()
	passed, ok := templatefileKeys(t, filepath.Dir(name))[filepath.Base(name)]
	if !ok {
		t.Fatalf("no templatefile call in %s renders %s", filepath.Dir(name), filepath.Base(name))
	}
	var keys []string
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, passed) {
		t.Fatalf("the test renders %s with %v; the module passes %v: update the test", name, keys, passed)
	}
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	expr, diags := hclsyntax.ParseTemplate(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s does not parse as a template: %s", name, diags.Error())
	}
	v, diags := expr.Value(&hcl.EvalContext{Variables: vars, Functions: templateFuncs})
	if diags.HasErrors() {
		t.Fatalf("%s does not render: %s", name, diags.Error())
	}
	return v.AsString()
}

// TestSvcNomadTemplates renders the svc-nomad module's config file and
// jobspec templates with representative values, as the module does, for
// each combination of ACLs and service provider: the config file is
// loaded by svc's own config loader (its adapters declared, credentials
// read from the variables the job's templates fill), and the jobspec
// parses as HCL with one group per server, each checked on /readyz, and
// no secret in it.
func TestSvcNomadTemplates(t *testing.T) {
	dir := filepath.Join("modules", "svc-nomad")
	for _, provider := range []string{"consul", "nomad"} {
		for _, acl := range []bool{false, true} {
			name := provider
			if acl {
				name += " with ACLs"
			}
			t.Run(name, func(t *testing.T) {
				cfg := renderTemplate(t, filepath.Join(dir, "svc.yaml.tftpl"), map[string]cty.Value{
					"vault_addr":         cty.StringVal("http://127.0.0.1:8200"),
					"kv_mount":           cty.StringVal("secret"),
					"kv_prefix":          cty.StringVal("svc"),
					"nomad_addr":         cty.StringVal("http://127.0.0.1:4646"),
					"apps_namespace":     cty.StringVal("default"),
					"apps_driver":        cty.StringVal("exec"),
					"apps_role":          cty.StringVal("svc-apps"),
					"service_provider":   cty.StringVal(provider),
					"consul_addr":        cty.StringVal("http://127.0.0.1:8500"),
					"artifact_base":      cty.StringVal("http://10.0.0.1:8080"),
					"nomad_acl_enabled":  cty.BoolVal(acl),
					"consul_acl_enabled": cty.BoolVal(acl),
				})
				file := filepath.Join(t.TempDir(), "svc.yaml")
				if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
				env := []string{"VAULT_TOKEN=hvs.test", "SVCADP_NOMAD_TOKEN=nomad-test", "SVCADP_CONSUL_TOKEN=consul-test"}
				c, err := config.Load(config.LoadArgs{File: file, Env: env})
				if err != nil {
					t.Fatalf("svc does not load the rendered config file: %v\n%s", err, cfg)
				}
				kinds := map[string]string{}
				creds := map[string]int{}
				for _, a := range c.Adapters {
					kinds[a.Category] = a.Kind
					creds[a.Category] = len(a.Credentials)
				}
				if err := adapters.CheckDeclared(declaredKinds(), declared(c)); err != nil {
					t.Errorf("the adapters the config file declares are refused by the kinds svc runs: %v\n%s", err, cfg)
				}
				want := map[string]string{"secrets": "vault", "runtime": "nomad", "routes": provider}
				if fmt.Sprint(kinds) != fmt.Sprint(want) {
					t.Errorf("adapters declared = %v, want %v", kinds, want)
				}
				wantCreds := 0
				if acl {
					wantCreds = 1
				}
				if creds["runtime"] != wantCreds || creds["routes"] != wantCreds || creds["secrets"] != 1 {
					t.Errorf("credentials per category = %v; want the vault token, and with ACLs the Nomad and Consul tokens", creds)
				}

				var list []cty.Value
				for i := range 3 {
					list = append(list, cty.ObjectVal(map[string]cty.Value{
						"index":        cty.NumberIntVal(int64(i)),
						"id":           cty.StringVal(fmt.Sprintf("svc-%d", i+1)),
						"address":      cty.StringVal(fmt.Sprintf("10.0.0.%d", i+1)),
						"http_port":    cty.NumberIntVal(8080),
						"cluster_port": cty.NumberIntVal(8300),
						"volume":       cty.StringVal(fmt.Sprintf("svc-state-%d", i+1)),
						"work_dir":     cty.StringVal("/srv/svc"),
					}))
				}
				servers := cty.TupleVal(list)
				job := renderTemplate(t, filepath.Join(dir, "svc.nomad.hcl.tftpl"), map[string]cty.Value{
					"job_name":           cty.StringVal("svc"),
					"namespace":          cty.StringVal("default"),
					"datacenters":        cty.StringVal(`["*"]`),
					"servers":            servers,
					"peers":              cty.StringVal("svc-1=10.0.0.1:8300,svc-2=10.0.0.2:8300,svc-3=10.0.0.3:8300"),
					"driver":             cty.StringVal("exec"),
					"artifact_url":       cty.StringVal("https://example.com/svc"),
					"artifact_sha256":    cty.StringVal(strings.Repeat("ab", 32)),
					"cpu":                cty.NumberIntVal(1000),
					"memory_mb":          cty.NumberIntVal(1024),
					"vault_role":         cty.StringVal("svc-server"),
					"server_path":        cty.StringVal("secret/data/svc/server"),
					"config":             cty.StringVal(cfg),
					"nomad_acl_enabled":  cty.BoolVal(acl),
					"consul_acl_enabled": cty.BoolVal(acl && provider == "consul"),
				})
				checkJobspec(t, job, 3)
			})
		}
	}
}

// declaredKinds are the kinds of the adapters svc-nomad declares, as
// cmd/svc builds them (their settings, credentials and Validate).
func declaredKinds() []adapters.Kind {
	log := slog.New(slog.DiscardHandler)
	return []adapters.Kind{vaultsecrets.VaultKind(log), nomad.KindFor(nomad.KindDeps{Logger: log}), consul.Kind(log), nomadsd.Kind(log)}
}

// declared converts the loaded config's adapters as cmd/svc does.
func declared(c *config.Config) []adapters.Declared {
	var out []adapters.Declared
	for _, a := range c.Adapters {
		d := adapters.Declared{ID: a.ID, Category: a.Category, Kind: a.Kind, Settings: a.Settings, Primary: a.Primary,
			Credentials: map[string]string{}, Sources: map[string]string{}, Origin: string(a.Origin), Source: "config file " + c.File}
		for _, cr := range a.Credentials {
			d.Credentials[cr.Name] = cr.Value()
			d.Sources[cr.Name] = cr.From + " " + cr.Source
		}
		out = append(out, d)
	}
	return out
}

// checkJobspec parses a rendered jobspec as HCL and checks its shape.
func checkJobspec(t *testing.T, job string, servers int) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(job), "job.nomad.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the rendered jobspec does not parse as HCL: %s\n%s", diags.Error(), job)
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Blocks) != 1 || body.Blocks[0].Type != "job" {
		t.Fatalf("the rendered jobspec has %d top-level blocks; want one job", len(body.Blocks))
	}
	groups := 0
	for _, g := range body.Blocks[0].Body.Blocks {
		if g.Type != "group" {
			continue
		}
		groups++
		if !strings.Contains(string(g.Range().SliceBytes([]byte(job))), `path     = "/readyz"`) {
			t.Errorf("group %s has no /readyz check", g.Labels[0])
		}
	}
	if groups != servers {
		t.Errorf("the rendered jobspec has %d groups; want %d, one per server", groups, servers)
	}
	for _, bad := range []string{"hvs.", "SVC_CLUSTER_SECRET=\"", "nomad-test", "consul-test"} {
		if strings.Contains(job, bad) {
			t.Errorf("the rendered jobspec contains %q: no secret may be in the job", bad)
		}
	}
}

// TestHashistackNomadPolicy checks that the hashistack module gives svc's
// Nomad token exactly the policy the nomad runtime adapter needs
// (nomad.ACLPolicy), which TestContractRealAgentACL runs the runtime's
// contract suite with against a real agent: no capability missing (the
// adapter would fail under ACLs) and none more.
func TestHashistackNomadPolicy(t *testing.T) {
	file := filepath.Join("modules", "hashistack", "main.tf")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var rules hclsyntax.Expression
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "resource" && slices.Equal(b.Labels, []string{"nomad_acl_policy", "svc"}) {
			if a, ok := b.Body.Attributes["rules_hcl"]; ok {
				rules = a.Expr
			}
		}
	}
	if rules == nil {
		t.Fatalf("%s has no resource nomad_acl_policy.svc with rules_hcl", file)
	}
	const ns = "svc-apps"
	locals := map[string]cty.Value{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "locals" {
			if a, ok := b.Body.Attributes["nomad_capabilities"]; ok {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() {
					t.Fatalf("local.nomad_capabilities: %s", diags.Error())
				}
				locals["nomad_capabilities"] = v
			}
		}
	}
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, rawExec := range []bool{false, true} {
		v, diags := rules.Value(&hcl.EvalContext{Functions: templateFuncs, Variables: map[string]cty.Value{
			"var": cty.ObjectVal(map[string]cty.Value{
				"nomad_namespace": cty.StringVal(ns), "nomad_raw_exec": cty.BoolVal(rawExec),
			}),
			"local": cty.ObjectVal(locals),
		}})
		if diags.HasErrors() {
			t.Fatalf("rules_hcl does not evaluate: %s", diags.Error())
		}
		if got, want := words(v.AsString()), words(nomad.ACLPolicy(ns, rawExec)); got != want {
			t.Errorf("the hashistack module's Nomad policy for namespace %s (raw_exec %v) is\n  %s\nwant the nomad adapter's (nomad.ACLPolicy)\n  %s", ns, rawExec, got, want)
		}
	}
}
