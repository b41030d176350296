package terraform

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"gopkg.in/yaml.v3"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/config"
)

// literalSecret is a secret written in place rather than read at run time
// ($(vault kv get …)).
var literalSecret = regexp.MustCompile(`(SVC_CLUSTER_SECRET|SVC_ADMIN_PASSWORD|VAULT_TOKEN|SVCADP_NOMAD_TOKEN|SVCADP_CONSUL_TOKEN|CONSUL_HTTP_TOKEN|NOMAD_TOKEN)=[^$\s]|hvs\.|"root_token"|-----BEGIN |(agent|token) += "[^%]`)

// cloudConfig is the part of a cloud-config document the aws example
// writes: files and the commands that run them.
type cloudConfig struct {
	WriteFiles []struct {
		Path        string `yaml:"path"`
		Permissions string `yaml:"permissions"`
		Content     string `yaml:"content"`
	} `yaml:"write_files"`
	Runcmd [][]string `yaml:"runcmd"`
}

// TestAWSCloudInit renders examples/aws's cloud-init template as main.tf
// does, for the first VM (which initialises Vault) and another, for 3 and
// 5 servers, and checks what the VM would run: the document is YAML with
// the #cloud-config header; svc's config file loads with svc's own config
// loader (with the secrets run.sh puts in svc's environment) as this node
// of the cluster, with adapters the kinds svc runs accept; the Consul,
// Nomad and Vault configurations parse as HCL and join every server; the
// shell scripts pass sh -n; the binary is checked against its SHA-256;
// svc's unit starts run.sh, which starts svc with that config file; only
// the first VM bootstraps Vault and Consul's and Nomad's ACLs, every VM
// gives its agents their tokens before svc starts, and svc's config file
// reads its Nomad and Consul tokens from the environment; nothing secret
// is in the user data.
func TestAWSCloudInit(t *testing.T) {
	dir := filepath.Join("examples", "aws")
	const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, count := range []int{3, 5} {
		for _, index := range []int{0, 1} {
			t.Run(fmt.Sprintf("%d servers, VM %d", count, index+1), func(t *testing.T) {
				var ips, peers []cty.Value
				for i := range count {
					ip := fmt.Sprintf("10.42.%d.%d", i%3, 10+i/3)
					ips = append(ips, cty.StringVal(ip))
					peers = append(peers, cty.StringVal(fmt.Sprintf("svc-%d=%s:7000", i+1, ip)))
				}
				nodeID := fmt.Sprintf("svc-%d", index+1)
				ip := ips[index].AsString()
				doc := renderTemplate(t, filepath.Join(dir, "cloud-init.yaml.tftpl"), map[string]cty.Value{
					"index":             cty.NumberIntVal(int64(index)),
					"node_id":           cty.StringVal(nodeID),
					"private_ip":        cty.StringVal(ip),
					"server_ips":        cty.TupleVal(ips),
					"peers":             cty.TupleVal(peers),
					"region":            cty.StringVal("eu-central-1"),
					"kms_key_id":        cty.StringVal("1234abcd-12ab-34cd-56ef-1234567890ab"),
					"node_role_arn":     cty.StringVal("arn:aws:iam::123456789012:role/svc-node"),
					"nomad_version":     cty.StringVal("1.9.7-1"),
					"consul_version":    cty.StringVal("1.20.5-1"),
					"vault_version":     cty.StringVal("1.18.5-1"),
					"svc_url":           cty.StringVal("https://example.com/svc-linux-amd64"),
					"svc_sha256":        cty.StringVal(sha),
					"svc_http_port":     cty.NumberIntVal(8080),
					"svc_cluster_port":  cty.NumberIntVal(7000),
					"hashicorp_key_fpr": cty.StringVal("798AEC654E5C15428C8E42EEAA16FCBCA621E701"),
				})
				if !strings.HasPrefix(doc, "#cloud-config\n") {
					t.Fatalf("the rendered user data does not begin with #cloud-config:\n%s", doc)
				}
				var cc cloudConfig
				if err := yaml.Unmarshal([]byte(doc), &cc); err != nil {
					t.Fatalf("the rendered user data is not YAML: %v\n%s", err, doc)
				}
				files := map[string]string{}
				for _, f := range cc.WriteFiles {
					files[f.Path] = f.Content
				}

				// svc's config file, loaded as svc serve loads it.
				cfgFile := filepath.Join(t.TempDir(), "svc.yaml")
				if err := os.WriteFile(cfgFile, []byte(files["/etc/svc/svc.yaml"]), 0o600); err != nil {
					t.Fatal(err)
				}
				env := []string{"SVC_CLUSTER_SECRET=" + strings.Repeat("ab", 32), "SVC_ADMIN_PASSWORD=Correct-Horse-Battery-9", "VAULT_TOKEN=hvs.test",
					"SVCADP_NOMAD_TOKEN=11111111-2222-3333-4444-555555555555", "SVCADP_CONSUL_TOKEN=66666666-7777-8888-9999-000000000000"}
				c, err := config.Load(config.LoadArgs{File: cfgFile, Env: env})
				if err != nil {
					t.Fatalf("svc does not load the config file cloud-init writes: %v\n%s", err, files["/etc/svc/svc.yaml"])
				}
				if c.Cluster.NodeID != nodeID || c.Cluster.RaftAddr != ip+":7000" || len(c.Cluster.Peers) != count {
					t.Errorf("cluster = node %q, raft %q, %d peers; want %q, %q, %d", c.Cluster.NodeID, c.Cluster.RaftAddr, len(c.Cluster.Peers), nodeID, ip+":7000", count)
				}
				if c.Server.Addr != ":8080" || c.Server.WorkDir != "/var/lib/svc" {
					t.Errorf("server = addr %q, work dir %q; want :8080, /var/lib/svc", c.Server.Addr, c.Server.WorkDir)
				}
				if len(c.Warnings) > 0 {
					t.Errorf("svc warns about the config file: %v", c.Warnings)
				}
				if err := adapters.CheckDeclared(declaredKinds(), declared(c)); err != nil {
					t.Errorf("the adapters the config file declares are refused by the kinds svc runs: %v", err)
				}
				kinds := map[string]string{}
				for _, a := range c.Adapters {
					kinds[a.Category] = a.Kind
				}
				if want := map[string]string{"secrets": "vault", "runtime": "nomad", "routes": "consul"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
					t.Errorf("adapters declared = %v, want %v", kinds, want)
				}

				// The stack's configurations.
				for _, name := range []string{"consul", "nomad", "vault"} {
					path := "/etc/svc-bootstrap/" + name + ".hcl"
					src, ok := files[path]
					if !ok {
						t.Errorf("no %s", path)
						continue
					}
					if _, diags := hclparse.NewParser().ParseHCL([]byte(src), path); diags.HasErrors() {
						t.Errorf("%s does not parse as HCL: %s\n%s", path, diags.Error(), src)
					}
					for _, other := range ips {
						if !strings.Contains(src, other.AsString()) {
							t.Errorf("%s does not join %s", path, other.AsString())
						}
					}
					if expect := fmt.Sprintf("bootstrap_expect = %d\n", count); name != "vault" && !strings.Contains(src, expect) {
						t.Errorf("%s does not say %q", path, strings.TrimSpace(expect))
					}
				}

				// ACLs: Consul denies by default, Nomad's are on, and the apps'
				// services log in with their workload identities.
				for path, want := range map[string][]string{
					"/etc/svc-bootstrap/consul.hcl": {`default_policy           = "deny"`, "enabled                  = true"},
					"/etc/svc-bootstrap/nomad.hcl":  {"acl {\n  enabled = true\n}", `service_auth_method = "nomad-workloads"`, `aud = ["consul.io"]`},
				} {
					for _, w := range want {
						if !strings.Contains(files[path], w) {
							t.Errorf("%s does not contain %q", path, w)
						}
					}
				}

				// The scripts, the unit and the install.
				scripts := []string{"/usr/local/lib/svc/install.sh", "/usr/local/lib/svc/run.sh", "/usr/local/lib/svc/node-tokens.sh"}
				for _, name := range []string{"bootstrap-vault.sh", "bootstrap-acls.sh"} {
					_, ok := files["/usr/local/lib/svc/"+name]
					if ok != (index == 0) {
						t.Errorf("%s written: %v; want it on the first VM only", name, ok)
					}
					if ok {
						scripts = append(scripts, "/usr/local/lib/svc/"+name)
					}
				}
				bootstraps := index == 0
				for _, s := range scripts {
					if !strings.HasPrefix(files[s], "#!/bin/sh\n") {
						t.Errorf("%s is missing or has no #!/bin/sh line", s)
						continue
					}
					checkShell(t, s, files[s])
				}
				install := files["/usr/local/lib/svc/install.sh"]
				for _, want := range []string{"echo '" + sha + "  /tmp/svc' | sha256sum -c -", "nomad=1.9.7-1", "consul=1.20.5-1", "vault=1.18.5-1", "systemctl enable --now svc"} {
					if !strings.Contains(install, want) {
						t.Errorf("install.sh does not contain %q", want)
					}
				}
				if strings.Contains(install, "bootstrap-vault.sh") != bootstraps || strings.Contains(install, "bootstrap-acls.sh") != bootstraps {
					t.Errorf("install.sh runs bootstrap-vault.sh and bootstrap-acls.sh: %v; want on the first VM only", !bootstraps)
				}
				// In order: the agents get their tokens before svc starts.
				if i, j := strings.Index(install, "/usr/local/lib/svc/node-tokens.sh"), strings.Index(install, "systemctl enable --now svc"); i < 0 || j < i {
					t.Errorf("install.sh does not run node-tokens.sh before it starts svc")
				}
				run := files["/usr/local/lib/svc/run.sh"]
				for _, want := range []string{"export SVCADP_NOMAD_TOKEN SVCADP_CONSUL_TOKEN", "tokens=secret/svc/server/tokens"} {
					if !strings.Contains(run, want) {
						t.Errorf("run.sh does not contain %q", want)
					}
				}
				if !strings.Contains(files["/etc/systemd/system/svc.service"], "ExecStart=/usr/local/lib/svc/run.sh\n") {
					t.Errorf("svc.service does not start run.sh:\n%s", files["/etc/systemd/system/svc.service"])
				}
				if !strings.Contains(files["/usr/local/lib/svc/run.sh"], "exec /usr/local/bin/svc serve --config /etc/svc/svc.yaml\n") {
					t.Errorf("run.sh does not start svc serve with /etc/svc/svc.yaml")
				}
				if len(cc.Runcmd) != 1 || !slices.Equal(cc.Runcmd[0], []string{"/bin/sh", "/usr/local/lib/svc/install.sh"}) {
					t.Errorf("runcmd = %v; want install.sh run", cc.Runcmd)
				}
				if m := literalSecret.FindString(doc); m != "" {
					t.Errorf("the user data contains %q: it is in Terraform's state, no secret may be in it", m)
				}
			})
		}
	}
}

// checkShell runs sh -n on a script, when there is a sh.
func checkShell(t *testing.T, name, script string) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		return
	}
	cmd := exec.Command(sh, "-n")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: sh -n: %v: %s\n%s", name, err, out, script)
	}
}

// TestAWSFirewall checks examples/aws's security group rules: an ingress
// rule either admits the cluster's own members (referenced_security_group_id)
// or sources its CIDRs from var.api_cidrs, and those open only svc's API
// port and the apps' ports; nothing is open to 0.0.0.0/0 but egress.
func TestAWSFirewall(t *testing.T) {
	name := filepath.Join("examples", "aws", "main.tf")
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	text := func(a *hclsyntax.Attribute) string {
		if a == nil {
			return ""
		}
		return string(a.Expr.Range().SliceBytes(src))
	}
	public := map[string]string{}
	internal := 0
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "resource" || len(b.Labels) != 2 {
			continue
		}
		attrs := b.Body.Attributes
		switch b.Labels[0] {
		case "aws_vpc_security_group_ingress_rule":
			switch {
			case attrs["referenced_security_group_id"] != nil:
				internal++
			case strings.Contains(text(attrs["for_each"]), "var.api_cidrs") && text(attrs["cidr_ipv4"]) == "each.value":
				public[b.Labels[1]] = text(attrs["from_port"]) + "-" + text(attrs["to_port"])
			default:
				t.Errorf("%s: ingress rule %q admits neither the cluster's members nor var.api_cidrs", b.DefRange(), b.Labels[1])
			}
		case "aws_security_group_rule", "aws_security_group":
			for _, inner := range b.Body.Blocks {
				if inner.Type == "ingress" {
					t.Errorf("%s: an inline ingress rule; use aws_vpc_security_group_ingress_rule", inner.DefRange())
				}
			}
		}
	}
	want := map[string]string{"api": "var.svc_http_port-var.svc_http_port", "apps": "9000-9019"}
	if fmt.Sprint(public) != fmt.Sprint(want) {
		t.Errorf("rules open to api_cidrs = %v; want %v", public, want)
	}
	if internal != 1 {
		t.Errorf("%d ingress rules between members; want one (for_each over local.internal_rules)", internal)
	}
}
