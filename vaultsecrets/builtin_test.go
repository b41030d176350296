package vaultsecrets_test

import (
	"testing"
	"time"

	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/secrets/secretstest"
	"github.com/svchost/svc/vaultsecrets"
)

func TestBuiltinPassesTheSecretsContract(t *testing.T) {
	secretstest.Run(t, func(t *testing.T, env secretstest.Env) (string, secrets.Backend) {
		return "adp_builtin_secrets", vaultsecrets.NewBuiltin("adp_builtin_secrets", env.Store, env.Ring)
	})
}

// BenchmarkBuiltinPutValue sets a secret (a replicated write with its audit
// entry and event) and reads it back (an audited read) through the service.
func BenchmarkBuiltinPutValue(b *testing.B) {
	env := secretstest.NewEnv(b)
	id := vaultsecrets.BuiltinID
	backend := vaultsecrets.NewBuiltin(id, env.Store, env.Ring)
	svc := secrets.NewService(secrets.Deps{Store: env.Store, Now: func() time.Time { return time.Now().UTC() },
		Backends: func() (map[string]secrets.Backend, string) { return map[string]secrets.Backend{id: backend}, id }})
	appID := secretstest.App(b, env, "bench")
	ctx := secretstest.Ctx
	ref := secrets.Ref{AppID: appID, Key: "BENCH"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Put(ctx, ref, "bench-value"); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Value(ctx, ref); err != nil {
			b.Fatal(err)
		}
	}
}
