package identity

import (
	"context"

	"github.com/svchost/svc/internal/adapters"
)

// LocalID is the well-known ID of the local accounts adapter.
const LocalID = "adp_builtin_identity"

// LocalKind declares local accounts (usernames and Argon2id password
// hashes in the replicated store): the embedded default identity adapter.
func LocalKind() adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryIdentity,
		Name:        "local",
		Description: "Accounts kept in the replicated store, signing in with a username and password",
		Default:     true,
		DefaultID:   LocalID,
		Open: func(context.Context, adapters.Config) (adapters.Instance, error) {
			return localInstance{}, nil
		},
	}
}

type localInstance struct{}

var _ adapters.Instance = localInstance{}

func (localInstance) Check(context.Context) error { return nil }

func (localInstance) Capabilities() map[string]any {
	return map[string]any{"passwords": "argon2id", "groups": true}
}
