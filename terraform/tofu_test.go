package terraform

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// tofuVersion is the OpenTofu scripts/tofu-tool.sh builds (SVC_TOFU_VERSION
// overrides both).
const tofuVersion = "v1.12.6"

// TestTofuFmt runs `tofu fmt -check -recursive -diff` over terraform/ with
// a real OpenTofu: SVC_TOFU_BIN, else tofu on PATH, else the one
// scripts/tofu-tool.sh cached. Without one it skips, saying how to get
// it; with SVC_REQUIRE_TOFU=1 (CI) it fails instead. TestModulesAndExamples
// checks hclwrite.Format, which tofu fmt applies, everywhere; this checks
// what tofu fmt itself does on top of it.
func TestTofuFmt(t *testing.T) {
	bin, err := testserver.FindTool("SVC_TOFU_BIN", "tofu", testserver.ToolCache("tofu", "SVC_TOFU_VERSION", tofuVersion))
	if err != nil {
		msg := err.Error() + "; build one with `bash scripts/tofu-tool.sh` (OpenTofu from the Go module proxy, built once and cached) and set SVC_TOFU_BIN to the path it prints"
		if os.Getenv("SVC_REQUIRE_TOFU") == "1" {
			t.Fatalf("SVC_REQUIRE_TOFU=1 but %s", msg)
		}
		t.Skipf("tofu fmt -check not run: %s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "fmt", "-check", "-recursive", "-diff", ".")
	// No CLI configuration of the developer's is needed to format.
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s fmt -check -recursive -diff in terraform/: %v; run `%s fmt -recursive terraform` to fix:\n%s", bin, err, bin, out)
	}
}
