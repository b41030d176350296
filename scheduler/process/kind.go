package process

import (
	"context"
	"os/exec"

	"github.com/svchost/svc/internal/adapters"
)

// DefaultID is the well-known ID of the process runtime adapter.
const DefaultID = "adp_builtin_runtime"

// Kind declares the process runtime: the embedded default runtime.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryRuntime,
		Name:        "process",
		Description: "Builds with the host's toolchains and runs each workload as a supervised process group on this machine",
		Default:     true,
		DefaultID:   DefaultID,
		Open: func(context.Context, adapters.Config) (adapters.Instance, error) {
			return runtimeInstance{}, nil
		},
	}
}

type runtimeInstance struct{}

var _ adapters.Instance = runtimeInstance{}

func (runtimeInstance) Check(context.Context) error { return nil }

// Capabilities are read live: whether bubblewrap is on this host decides
// what isolation the runtime can offer.
func (runtimeInstance) Capabilities() map[string]any {
	_, err := exec.LookPath("bwrap")
	return map[string]any{
		"isolation":         "none",
		"sandbox_available": err == nil,
		"builds":            append([]string(nil), buildKinds...),
		"health_checks":     []string{"http", "tcp"},
		"restarts":          true,
		"logs":              true,
		"resource_limits":   false,
	}
}
