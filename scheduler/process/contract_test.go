package process_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/scheduler/runtimetest"
)

func TestContract(t *testing.T) {
	buildEnv := map[string]string{}
	// Share the host's Go build cache so the sample program builds in
	// seconds; the runtime's own default is a cache under its directory.
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" && dir != "off" {
			if _, err := os.Stat(dir); err == nil {
				buildEnv["GOCACHE"] = dir
			}
		}
	}
	runtimetest.Run(t, func(t *testing.T) (scheduler.Builder, scheduler.Runner) {
		rt, err := process.New(process.Config{
			WorkDir:           t.TempDir(),
			BuildEnv:          buildEnv,
			StopGrace:         2 * time.Second,
			StartTimeout:      30 * time.Second,
			SettleTime:        300 * time.Millisecond,
			HealthInterval:    100 * time.Millisecond,
			RestartBackoff:    50 * time.Millisecond,
			MaxRestartBackoff: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("new runtime: %v", err)
		}
		return rt, rt
	})
}
