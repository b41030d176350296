package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/testserver"
)

// TestOnlyTheTestRecipesGetTheToolBinaries: `make run` starts svc serve
// without SVC_VAULT_BIN or SVC_VERSITYGW_BIN, which svc serve does not know
// (it warns "unknown environment variable SVC_VAULT_BIN ignored"), while
// `make test` and `make bench` hand the tests the Vault dev server
// scripts/vault-tool.sh built and the versitygw scripts/versitygw-tool.sh
// built, or the ones the environment names. make -n shows a target's
// recipes without running them; a probe made a prerequisite of the target
// (its recipe marked + so that -n runs it) prints what they would get.
func TestOnlyTheTestRecipesGetTheToolBinaries(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	tools := t.TempDir()
	built := filepath.Join(tools, "vault-v0.0.0-test", "vault")
	builtGW := filepath.Join(tools, "versitygw-v0.0.0-test", "versitygw")
	for _, b := range []string{built, builtGW} {
		if err := os.MkdirAll(filepath.Dir(b), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(b, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	probe := func(target string, env ...string) string {
		t.Helper()
		cmd := exec.Command(makeBin, "-n", "--no-print-directory", "-C", filepath.Join("..", ".."),
			"--eval", target+": svc-env-probe",
			"--eval", `svc-env-probe: ; +@echo "probe SVC_VAULT_BIN=$${SVC_VAULT_BIN-unset} SVC_VERSITYGW_BIN=$${SVC_VERSITYGW_BIN-unset}"`, target)
		cmd.Env = append(testserver.EnvironWithout("SVC_", "MAKEFLAGS", "MFLAGS"), "SVC_TOOLS_DIR="+tools,
			"SVC_VAULT_VERSION=v0.0.0-test", "SVC_VERSITYGW_VERSION=v0.0.0-test")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "probe SVC_VAULT_BIN="); ok {
				return v
			}
		}
		t.Fatalf("make -n %s: the probe did not run:\n%s", target, out)
		return ""
	}
	for _, tc := range []struct {
		target string
		env    []string
		want   string
	}{
		{"run", nil, "unset SVC_VERSITYGW_BIN=unset"},
		{"build", nil, "unset SVC_VERSITYGW_BIN=unset"},
		{"test", nil, built + " SVC_VERSITYGW_BIN=" + builtGW},
		{"bench", nil, built + " SVC_VERSITYGW_BIN=" + builtGW},
		{"test", []string{"SVC_VAULT_BIN=/elsewhere/vault", "SVC_VERSITYGW_BIN=/elsewhere/versitygw"}, "/elsewhere/vault SVC_VERSITYGW_BIN=/elsewhere/versitygw"},
	} {
		if got := probe(tc.target, tc.env...); got != tc.want {
			t.Errorf("make %s (environment %v): its recipes get SVC_VAULT_BIN=%s, want SVC_VAULT_BIN=%s", tc.target, tc.env, got, tc.want)
		}
	}
}
