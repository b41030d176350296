package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// credFile writes a credential file holding value and returns its path.
func credFile(t *testing.T, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAdaptersFromFile(t *testing.T) {
	tok := credFile(t, canary+"\n")
	file := writeFile(t, `
adapters:
  - id: adp_alerts
    category: notification
    kind: ntfy
    primary: true
    settings:
      topic: svc-alerts
      priority: 4
    credentials:
      token: {file: `+tok+`}
  - id: adp_builtin_backup
    category: backup
    kind: local
    settings: {path: /srv/backups}
    credentials:
      key: {env: BACKUP_KEY}
`)
	c := mustLoad(t, LoadArgs{File: file, Env: []string{"BACKUP_KEY=" + canary + "-2"}})
	yes := true
	want := []Adapter{
		{ID: "adp_alerts", Category: "notification", Kind: "ntfy", Primary: &yes, Origin: OriginConfigFile,
			Settings:    map[string]string{"topic": "svc-alerts", "priority": "4"},
			Credentials: []Credential{{Name: "token", From: "file", Source: tok, value: canary}}},
		{ID: "adp_builtin_backup", Category: "backup", Kind: "local", Origin: OriginConfigFile,
			Settings:    map[string]string{"path": "/srv/backups"},
			Credentials: []Credential{{Name: "key", From: "env", Source: "BACKUP_KEY", value: canary + "-2"}}},
	}
	if diff := cmp.Diff(want, c.Adapters, cmp.AllowUnexported(Credential{})); diff != "" {
		t.Errorf("adapters (-want +got):\n%s", diff)
	}
	// What GET /api/v1/config shows says where each credential comes from,
	// never its value.
	shown, err := json.Marshal(c.Adapters)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(shown), canary) || !strings.Contains(string(shown), `"source":"BACKUP_KEY"`) || !strings.Contains(string(shown), `"source":"`+tok+`"`) {
		t.Errorf("listed adapters: %s", shown)
	}
	assertNoCanary(t, c)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, c.Adapters); strings.Contains(out, canary) {
			t.Errorf("%s of the adapters shows a credential: %s", format, out)
		}
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "adapters", c.Adapters, "credential", c.Adapters[0].Credentials[0])
	if strings.Contains(logged.String(), canary) {
		t.Errorf("logging the adapters shows a credential: %s", logged.String())
	}
}

func TestAdaptersEnvironmentOverFile(t *testing.T) {
	tok := credFile(t, canary)
	// When the environment's list wins, the file's credentials are not
	// read: this one does not exist.
	unread := writeFile(t, "adapters:\n  - {id: adp_file, category: scanner, kind: builtin, credentials: {k: {file: /nonexistent/never-read}}}\n")
	readable := writeFile(t, "adapters:\n  - {id: adp_file, category: scanner, kind: builtin, credentials: {k: {file: "+tok+"}}}\n")
	for _, tt := range []struct {
		name   string
		env    string
		want   []string // IDs
		origin Origin
	}{
		{"unset: the file's", "", []string{"adp_file"}, OriginConfigFile},
		{"blank is unset", "  ", []string{"adp_file"}, OriginConfigFile},
		{"JSON wins, whole", `[{"id":"adp_env","category":"notification","kind":"ntfy","settings":{"topic":"t"},"credentials":{"token":{"file":"` + tok + `"}}}]`, []string{"adp_env"}, OriginEnvironment},
		{"YAML wins, whole", "- {id: adp_env, category: notification, kind: ntfy}\n- {id: adp_env2, category: notification, kind: ntfy}", []string{"adp_env", "adp_env2"}, OriginEnvironment},
		{"an empty list declares none", "[]", nil, OriginEnvironment},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{}
			if tt.env != "" {
				env = append(env, "SVC_ADAPTERS="+tt.env)
			}
			file := unread
			if tt.origin == OriginConfigFile {
				file = readable
			}
			c := mustLoad(t, LoadArgs{File: file, Env: env})
			var got []string
			for _, a := range c.Adapters {
				got = append(got, a.ID)
				if a.Origin != tt.origin {
					t.Errorf("%s: origin %s, want %s", a.ID, a.Origin, tt.origin)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("declared IDs (-want +got):\n%s", diff)
			}
			for _, w := range c.Warnings {
				if strings.Contains(w, "SVC_ADAPTERS") {
					t.Errorf("warning about SVC_ADAPTERS: %s", w)
				}
			}
		})
	}
	// The file's list, overridden, is still checked for its shape (an
	// unreadable value stops the service wherever it is), but its
	// credentials are not read.
	bad := writeFile(t, "adapters:\n  - {id: nope, category: scanner, kind: builtin}\n")
	if _, err := Load(LoadArgs{File: bad, Env: []string{"SVC_ADAPTERS=[]"}}); err == nil || !strings.Contains(err.Error(), "adapters[1]: id:") {
		t.Errorf("a bad file list under SVC_ADAPTERS: %v", err)
	}
}

func TestAdaptersRefused(t *testing.T) {
	empty := credFile(t, "\n")
	tok := credFile(t, canary)
	for _, tt := range []struct {
		name string
		yaml string // the adapters section's items
		env  []string
		want string // after "config file <path>: adapters"
	}{
		{"not a list", "  id: adp_x\n", nil, ": expected a list of adapters"},
		{"item not a mapping", "  - adp_x\n", nil, "[1]: expected a mapping with id, category, kind"},
		{"no id", "  - {category: scanner, kind: builtin}\n", nil, "[1]: id: required"},
		{"no kind", "  - {id: adp_x, category: scanner}\n", nil, "[1] (adp_x): kind: required"},
		{"bad id", "  - {id: alerts, category: scanner, kind: builtin}\n", nil, `[1]: id: "alerts" is not an adapter ID (accepted: adp_ and 1 to 64 of A-Z a-z 0-9 _ -, e.g. adp_alerts)`},
		{"id with a slash", "  - {id: adp_a/b, category: scanner, kind: builtin}\n", nil, `[1]: id: "adp_a/b" is not an adapter ID`},
		{"twice", "  - {id: adp_x, category: scanner, kind: builtin}\n  - {id: adp_x, category: scanner, kind: builtin}\n", nil, "[2] (adp_x): id: adp_x is declared twice (items 1 and 2)"},
		{"bad category", "  - {id: adp_x, category: 'no such', kind: builtin}\n", nil, `[1] (adp_x): category: "no such" is not a category name`},
		{"unknown key", "  - {id: adp_x, category: scanner, kind: builtin, setting: {a: b}}\n", nil, "[1] (adp_x): setting: unknown key (known keys: id, category, kind, settings, credentials, primary)"},
		{"settings not a mapping", "  - {id: adp_x, category: scanner, kind: builtin, settings: [a]}\n", nil, "[1] (adp_x): settings: expected a mapping"},
		{"setting a list", "  - {id: adp_x, category: scanner, kind: builtin, settings: {a: [1]}}\n", nil, "[1] (adp_x): settings.a: expected a single value, not a list"},
		{"setting null", "  - {id: adp_x, category: scanner, kind: builtin, settings: {a: null}}\n", nil, "[1] (adp_x): settings.a: a value is required"},
		{"primary not a boolean", "  - {id: adp_x, category: scanner, kind: builtin, primary: yes please}\n", nil, "[1] (adp_x): primary: expected true or false"},
		{"literal credential", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: " + canary + "}}\n", nil,
			"[1] (adp_x): credentials.token: a credential's value is not accepted in the config file, where it would sit in the clear; give {file: /path/to/file} or {env: VARIABLE} to read it at each start"},
		{"both file and env", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {file: /a, env: B}}}\n", nil, "[1] (adp_x): credentials.token: expected exactly one of"},
		{"neither", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {value: " + canary + "}}}\n", nil, "[1] (adp_x): credentials.token: expected {file: /path/to/file} or {env: VARIABLE}, not value"},
		{"relative file", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {file: token.txt}}}\n", nil, `[1] (adp_x): credentials.token.file: "token.txt" is not an absolute path`},
		{"bad variable name", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {env: 1TOKEN}}}\n", nil, `[1] (adp_x): credentials.token.env: "1TOKEN" is not an environment variable's name`},
		{"credential under settings too", "  - {id: adp_x, category: notification, kind: ntfy, settings: {token: a}, credentials: {token: {env: T}}}\n", []string{"T=x"}, "[1] (adp_x): credentials.token: also given under settings"},
		{"missing file", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {file: /nonexistent/token}}}\n", nil, " (adp_x): credentials.token: cannot read the file /nonexistent/token: no such file or directory"},
		{"empty file", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {file: " + empty + "}}}\n", nil, " (adp_x): credentials.token: the file " + empty + " is empty"},
		{"unset variable", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {env: NTFY_TOKEN}}}\n", nil, " (adp_x): credentials.token: the environment variable NTFY_TOKEN is not set or empty"},
		{"empty variable", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {env: NTFY_TOKEN}}}\n", []string{"NTFY_TOKEN="}, " (adp_x): credentials.token: the environment variable NTFY_TOKEN is not set or empty"},
		{"credential not repeated in errors", "  - {id: adp_x, category: notification, kind: ntfy, credentials: {token: {file: " + tok + "}, other: " + canary + "}}\n", nil, "[1] (adp_x): credentials.other: a credential's value is not accepted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, "adapters:\n"+tt.yaml)
			_, err := Load(LoadArgs{File: file, Env: tt.env})
			if err == nil {
				t.Fatal("Load() succeeded, want an error")
			}
			want := "config file " + file + ": adapters" + tt.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to begin with:\n%s", err, want)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("the error repeats a credential: %v", err)
			}
		})
	}
}

func TestAdaptersEnvironmentRefused(t *testing.T) {
	for _, tt := range []struct{ env, want string }{
		{"{id: adp_x", "SVC_ADAPTERS: invalid YAML or JSON"},
		{`{"id":"adp_x"}`, "SVC_ADAPTERS: expected a list of adapters"},
		{`[{"id":"adp_x","category":"notification","kind":"ntfy","credentials":{"token":"` + canary + `"}}]`,
			"SVC_ADAPTERS[1] (adp_x): credentials.token: a credential's value is not accepted in SVC_ADAPTERS, where it would sit in the clear"},
		{`[{"id":"adp_x","category":"notification","kind":"ntfy","credentials":{"token":{"env":"NOPE"}}}]`,
			"SVC_ADAPTERS (adp_x): credentials.token: the environment variable NOPE is not set or empty"},
	} {
		_, err := Load(LoadArgs{Env: []string{"SVC_ADAPTERS=" + tt.env}})
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), canary) {
			t.Errorf("SVC_ADAPTERS=%s: %v\nwant it to begin with: %s", tt.env, err, tt.want)
		}
	}
}

// FuzzAdaptersSection feeds any text as the adapters section. The parser
// must not panic; what it accepts has well-formed IDs, unique, a category
// and a kind, and credentials only by reference (never a value written in
// place).
func FuzzAdaptersSection(f *testing.F) {
	for _, seed := range []string{
		"- {id: adp_a, category: notification, kind: ntfy, settings: {topic: t}, credentials: {token: {file: /run/t}}}",
		"- {id: adp_a, category: c, kind: k, primary: false}\n- {id: adp_b, category: c, kind: k, credentials: {x: {env: X}}}",
		"- {id: adp_a, category: c, kind: k, credentials: {token: " + canary + "}}",
		"- &a {id: adp_a, category: c, kind: k}\n- *a",
		`[{"id":"adp_a","category":"c","kind":"k","settings":{"n":1,"b":true}}]`,
		"~", "{}", "- [1, 2]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 {
			return
		}
		list, errs := parseAdapters(doc.Content[0], OriginConfigFile)
		if len(errs) > 0 && list != nil {
			t.Fatalf("errors %v with a list", errs)
		}
		seen := map[string]bool{}
		for _, a := range list {
			if checkAdapterID(a.ID) != nil || seen[a.ID] || !isName(a.Category) || !isName(a.Kind) {
				t.Fatalf("accepted %+v", a)
			}
			seen[a.ID] = true
			for _, c := range a.Credentials {
				if c.value != "" || (c.From != CredentialFromFile && c.From != CredentialFromEnv) || c.Source == "" {
					t.Fatalf("accepted credential %+v", c)
				}
				if c.From == CredentialFromFile && !filepath.IsAbs(c.Source) {
					t.Fatalf("accepted a relative credential file %q", c.Source)
				}
			}
		}
	})
}
