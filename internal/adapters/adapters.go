// Package adapters owns the installation's pluggable backends: the
// categories, the kinds this build can run (each declaring its settings and
// opening live instances), the configured adapters in the replicated store
// (settings in the clear, credentials sealed by the keyring), which
// configuration each server loaded at its start (so that a change shows as
// pending until a restart), and the periodic health checks that emit
// adapter.unhealthy and adapter.recovered.
//
// The embedded defaults (builtin secrets, the process runtime, in-process
// routes, local accounts) are kinds like any other, present under
// well-known IDs until configured otherwise.
//
// It must not import an adapter implementation: kinds are handed to it by
// cmd/svc, and each consumer type-asserts the instances it needs. It never
// returns or logs a credential's value.
package adapters

import (
	"context"
	"time"

	"github.com/svchost/svc/raftstore"
)

// Categories of adapters.
const (
	CategoryRuntime      = "runtime"
	CategoryRoutes       = "routes"
	CategorySecrets      = "secrets"
	CategoryIdentity     = "identity"
	CategorySlots        = "slots"
	CategoryNotification = "notification"
	CategoryBackup       = "backup"
	CategoryScanner      = "scanner"
)

// Categories lists every category in display order.
func Categories() []string {
	return []string{CategoryRuntime, CategoryRoutes, CategorySecrets, CategoryIdentity, CategorySlots, CategoryNotification, CategoryBackup, CategoryScanner}
}

// Setting is one setting a kind takes.
type Setting struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Credential settings are write-only: stored sealed, never shown.
	Credential bool   `json:"credential"`
	Required   bool   `json:"required"`
	Default    string `json:"default,omitempty"`
	Example    string `json:"example,omitempty"`
}

// Instance is a live adapter.
type Instance interface {
	// Check says whether the adapter works now; it must not block longer
	// than ctx allows.
	Check(ctx context.Context) error
	// Capabilities describes what the adapter can do, read live (for
	// example a runtime's isolation level).
	Capabilities() map[string]any
}

// Config is what an instance is opened with: settings with defaults
// applied, and credentials opened.
type Config struct {
	ID          string
	Settings    map[string]string
	Credentials map[string]string
}

// Kind is an adapter kind this build can run.
type Kind struct {
	Category    string    `json:"category"`
	Name        string    `json:"kind"`
	Description string    `json:"description"`
	Settings    []Setting `json:"settings"`
	// Default marks the embedded default of its category, present under
	// DefaultID until configured otherwise.
	Default   bool   `json:"default"`
	DefaultID string `json:"-"`
	// Validate, if set, checks a configuration beyond required-ness (for
	// example that an address is a URL, or that one of two ways to log in
	// has its credentials); it sees settings with defaults applied and the
	// names of the credentials that are set, never their values.
	Validate func(settings map[string]string, credentials []string) error `json:"-"`
	// Open makes a live instance.
	Open func(ctx context.Context, c Config) (Instance, error) `json:"-"`
}

func (k Kind) setting(name string) (Setting, bool) {
	for _, s := range k.Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Adapter is a configured adapter as the store keeps it.
type Adapter struct {
	ID       string            `json:"id"`
	Category string            `json:"category"`
	Kind     string            `json:"kind"`
	Settings map[string]string `json:"settings"`
	// Credentials are sealed by the keyring, by setting name.
	Credentials map[string][]byte `json:"credentials,omitempty"`
	// Revision counts configurations; a server that loaded an older one
	// has a restart pending.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Health is the last health an adapter's checks recorded.
type Health struct {
	ID      string    `json:"id"` // the adapter's ID
	Healthy bool      `json:"healthy"`
	Reason  string    `json:"reason,omitempty"`
	Since   time.Time `json:"since"`
}

// The tables.
var (
	Adapters = &raftstore.Table[Adapter]{
		Name: "adapters",
		ID:   func(a *Adapter) string { return a.ID },
		Indexes: []raftstore.Index[Adapter]{
			{Name: "category", Key: func(a *Adapter) (string, bool) { return a.Category, true }},
		},
	}
	Healths = &raftstore.Table[Health]{
		Name: "adapter_health",
		ID:   func(h *Health) string { return h.ID },
	}
)

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Adapters, Healths} }
