package testserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/s3test"
	"github.com/svchost/svc/internal/vaulttest"
)

// TestHarnessesLookWhereTheToolScriptsBuild: each harness looks for its
// tool where the tool's script puts it, at the version the script pins,
// asking the script itself.
func TestHarnessesLookWhereTheToolScriptsBuild(t *testing.T) {
	for _, tool := range []struct {
		script, versionEnv string
		cachePath          func() string
	}{
		{"vault-tool.sh", "SVC_VAULT_VERSION", vaulttest.CachePath},
		{"versitygw-tool.sh", "SVC_VERSITYGW_VERSION", s3test.CachePath},
	} {
		script, err := filepath.Abs("../../scripts/" + tool.script)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct{ name, tools, xdg, version string }{
			{"home", "", "", ""},
			{"XDG cache", "", t.TempDir(), ""},
			{"tools dir", t.TempDir(), t.TempDir(), ""},
			{"version", t.TempDir(), "", "v9.9.9"},
		} {
			t.Run(tool.script+"/"+tt.name, func(t *testing.T) {
				home := t.TempDir()
				t.Setenv("HOME", home)
				t.Setenv("SVC_TOOLS_DIR", tt.tools)
				t.Setenv("XDG_CACHE_HOME", tt.xdg)
				t.Setenv(tool.versionEnv, tt.version)
				want := tool.cachePath()
				if !strings.HasPrefix(want, home+"/") && (tt.tools == "" || !strings.HasPrefix(want, tt.tools+"/")) && (tt.xdg == "" || !strings.HasPrefix(want, tt.xdg+"/")) {
					t.Fatalf("the harness looks at %s, outside this test's directories", want)
				}
				// Without a binary there, the script prints nothing and fails.
				if out, err := exec.Command("bash", script, "--path-if-built").Output(); err == nil || len(out) != 0 {
					t.Fatalf("--path-if-built with no binary: %q, %v", out, err)
				}
				if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command("bash", script, "--path-if-built").Output()
				if err != nil || strings.TrimSpace(string(out)) != want {
					t.Errorf("%s says %q (%v); the harness looks at %q", tool.script, out, err, want)
				}
			})
		}
	}
}
