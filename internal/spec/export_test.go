package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLooksSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"DB_PASSWORD": true, "client_secret": true, "GITHUB_TOKEN": true, "API_KEY": true, "Aws_Credentials": true,
		"PRIVATE_PEM": true, "KEYCLOAK_URL": true, // conservative: any KEY
		"PORT": false, "LOG_LEVEL": false, "DATABASE_URL": false,
	} {
		if got := LooksSecret(name); got != want {
			t.Errorf("LooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestExportRedactsSecrets(t *testing.T) {
	const known = "hunter2-very-secret"
	d := edit(t, func(d *Document, web, _ *Workload) {
		d.Env["ADMIN_PASSWORD"] = Literal(known)
		web.Env["session_token"] = Literal(known)
		web.Env["GREETING"] = Literal("hello")
	})
	before, _ := json.Marshal(d)
	e := NewExport(ExportApp{Name: "Shop", Slug: "shop"}, &d, 3, []string{"API_KEY", "STRIPE_KEY"})
	after, _ := json.Marshal(d)
	if string(before) != string(after) {
		t.Fatal("exporting changed the document")
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), known) {
		t.Fatalf("the export carries a secret value: %s", b)
	}
	y, err := MarshalYAML(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), known) {
		t.Fatalf("the YAML export carries a secret value: %s", y)
	}
	web := e.Spec.Workloads["web"]
	checks := map[string]bool{
		"app env redacted":         e.Spec.Env["ADMIN_PASSWORD"] == Literal(Redacted),
		"workload env redacted":    web.Env["session_token"] == Literal(Redacted),
		"plain values kept":        web.Env["GREETING"] == Literal("hello") && e.Spec.Env["LOG_LEVEL"] == Literal("info"),
		"secret references kept":   web.Env["API_KEY"] == EnvValue{Secret: "API_KEY"},
		"slot references kept":     web.Env["DATABASE_URL"] == EnvValue{Slot: "db", Field: "url"},
		"secrets listed by key":    cmp.Equal(e.Secrets, []ExportSecret{{"API_KEY", Redacted}, {"STRIPE_KEY", Redacted}}),
		"app and revision":         e.App == ExportApp{Name: "Shop", Slug: "shop"} && *e.Revision == 3,
		"everything else the same": cmp.Equal(e.Spec.Workloads["worker"], d.Workloads["worker"]) && cmp.Equal(e.Spec.Volumes, d.Volumes),
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: %s", what, b)
		}
	}
}

func TestExportWithoutARevision(t *testing.T) {
	b, _ := json.Marshal(NewExport(ExportApp{Name: "New", Slug: "new"}, nil, 0, nil))
	if string(b) != `{"app":{"name":"New","slug":"new"},"spec":null,"secrets":[],"revision":null}` {
		t.Errorf("export = %s", b)
	}
}

// The YAML export reads back: its spec section is a document Parse takes.
func TestMarshalYAMLReadsBack(t *testing.T) {
	d := edit(t, func(d *Document, _, _ *Workload) {
		d.Env["VERSION"] = Literal("1.10")
		d.Env["ENABLED"] = Literal("true")
		d.Env["EMPTY"] = Literal("")
		d.Env["MULTI"] = Literal("line one\nline two: yes")
	})
	y, err := MarshalYAML(NewExport(ExportApp{Name: "A", Slug: "a"}, &d, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	doc := specSection(t, y)
	if diff := cmp.Diff(d, doc); diff != "" {
		t.Errorf("read back (-want +got):\n%s\n%s", diff, y)
	}
	if !strings.HasPrefix(string(y), "app:\n  name: A\n") {
		t.Errorf("field order not kept:\n%s", y)
	}
}

// specSection takes the spec section of an exported YAML document and
// parses it as a document of its own.
func specSection(t *testing.T, y []byte) Document {
	t.Helper()
	v, err := readYAML(y)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v.(map[string]any)["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, string(b))
}
