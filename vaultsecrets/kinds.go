package vaultsecrets

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
)

// BuiltinID is the well-known ID of the builtin secrets adapter.
const BuiltinID = "adp_builtin_secrets"

var _ adapters.Instance = (*Builtin)(nil)

// BuiltinKind declares the builtin secrets adapter: the embedded default,
// with nothing to configure.
func BuiltinKind(store Store, ring Ring) adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategorySecrets,
		Name:        "builtin",
		Description: "Values sealed with AES-256-GCM under a data key kept in the replicated store, itself wrapped by the key-encryption key in the work dir",
		Default:     true,
		DefaultID:   BuiltinID,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			return NewBuiltin(c.ID, store, ring), nil
		},
	}
}

// Check says whether this node can seal and open values.
func (b *Builtin) Check(context.Context) error { return b.ring.Check() }

// Capabilities of the builtin adapter.
func (b *Builtin) Capabilities() map[string]any {
	return map[string]any{"encryption": "aes-256-gcm", "versions": true, "storage": "replicated store"}
}

// VaultKind declares the vault secrets adapter: KV version 2 under a mount
// and prefix, logging in with a token or with AppRole.
func VaultKind(log *slog.Logger) adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategorySecrets,
		Name:        "vault",
		Description: "HashiCorp Vault KV version 2: values at <mount>/data/<prefix>/apps/<app id>/<key>, each write a new version",
		Settings: []adapters.Setting{
			{Name: "address", Description: "Vault's API address", Required: true, Example: "https://vault.example.com:8200"},
			{Name: "mount", Description: "Path of the KV version 2 secrets engine", Default: "secret"},
			{Name: "prefix", Description: "Path under the mount below which svc keeps values", Default: "svc"},
			{Name: "namespace", Description: "Vault Enterprise namespace; empty for none", Example: "platform/apps"},
			{Name: "approle_mount", Description: "Mount path of the AppRole auth method, when logging in with role_id and secret_id", Default: "approle"},
			{Name: "ca_cert", Description: "PEM file of the CA that signed Vault's certificate; empty for the system's roots", Example: "/etc/svc/vault-ca.pem"},
			{Name: "tls_skip_verify", Description: "Skip verifying Vault's certificate (testing only)", Default: "false"},
			{Name: "token", Description: "A Vault token; renewed in the background while renewable", Credential: true},
			{Name: "role_id", Description: "AppRole role ID (with secret_id, instead of a token)", Credential: true},
			{Name: "secret_id", Description: "AppRole secret ID", Credential: true},
		},
		Validate: validateVault,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			cfg, err := vaultConfig(c, log)
			if err != nil {
				return nil, err
			}
			return &lazyVault{cfg: cfg}, nil
		},
	}
}

func validateVault(settings map[string]string, creds []string) error {
	u, err := url.Parse(settings["address"])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errcode.Invalid("config.address", "address must be an http or https URL such as https://vault.example.com:8200")
	}
	if _, err := strconv.ParseBool(settings["tls_skip_verify"]); err != nil {
		return errcode.Invalid("config.tls_skip_verify", "tls_skip_verify must be true or false")
	}
	has := func(n string) bool { return slices.Contains(creds, n) }
	switch {
	case has("token") && (has("role_id") || has("secret_id")):
		return errcode.Invalid("credentials", "give either token, or role_id and secret_id, not both")
	case has("token"), has("role_id") && has("secret_id"):
		return nil
	default:
		return errcode.Invalid("credentials", "vault needs credentials: token, or role_id and secret_id").
			WithRemedy("send them in credentials; they are stored encrypted and never shown")
	}
}

func vaultConfig(c adapters.Config, log *slog.Logger) (VaultConfig, error) {
	skip, _ := strconv.ParseBool(c.Settings["tls_skip_verify"])
	return VaultConfig{
		Address: c.Settings["address"], Mount: c.Settings["mount"], Prefix: c.Settings["prefix"],
		Namespace: c.Settings["namespace"], AppRoleMount: c.Settings["approle_mount"],
		CACert: c.Settings["ca_cert"], TLSSkipVerify: skip,
		Token: c.Credentials["token"], RoleID: c.Credentials["role_id"], SecretID: c.Credentials["secret_id"],
		Logger: log,
	}, nil
}

// lazyVault connects to Vault on first use and again after a failed
// attempt, so that a Vault that is down when svc starts is used as soon as
// it is back, without a restart.
type lazyVault struct {
	cfg VaultConfig

	mu     sync.Mutex
	v      *Vault
	closed bool
}

var (
	_ secrets.Backend   = (*lazyVault)(nil)
	_ adapters.Instance = (*lazyVault)(nil)
	_ io.Closer         = (*lazyVault)(nil)
)

func (l *lazyVault) get(ctx context.Context) (*Vault, error) {
	l.mu.Lock()
	v, closed := l.v, l.closed
	l.mu.Unlock()
	switch {
	case v != nil:
		return v, nil
	case closed:
		return nil, errcode.New(errcode.AdapterUnavailable, "the vault adapter is closed")
	}
	// Connect without holding the lock, so that callers during an outage
	// each fail on their own deadline instead of queueing behind one.
	v, err := NewVault(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.v != nil || l.closed {
		winner, closed := l.v, l.closed
		_ = v.Close()
		if closed {
			return nil, errcode.New(errcode.AdapterUnavailable, "the vault adapter is closed")
		}
		return winner, nil
	}
	l.v = v
	return v, nil
}

func (l *lazyVault) Put(ctx context.Context, ref secrets.Ref, value string) (secrets.Stored, error) {
	v, err := l.get(ctx)
	if err != nil {
		return secrets.Stored{}, err
	}
	return v.Put(ctx, ref, value)
}

func (l *lazyVault) Get(ctx context.Context, ref secrets.Ref, s secrets.Stored) (string, error) {
	v, err := l.get(ctx)
	if err != nil {
		return "", err
	}
	return v.Get(ctx, ref, s)
}

func (l *lazyVault) Delete(ctx context.Context, ref secrets.Ref) error {
	v, err := l.get(ctx)
	if err != nil {
		return err
	}
	return v.Delete(ctx, ref)
}

func (l *lazyVault) List(ctx context.Context, appID string) ([]secrets.Entry, error) {
	v, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return v.List(ctx, appID)
}

func (l *lazyVault) Check(ctx context.Context) error {
	v, err := l.get(ctx)
	if err != nil {
		return err
	}
	return v.Check(ctx)
}

func (l *lazyVault) Capabilities() map[string]any {
	l.mu.Lock()
	v := l.v
	l.mu.Unlock()
	if v == nil {
		// What the configuration says, so that the answer has the same
		// shape before Vault was reached as after.
		caps := map[string]any{"kv_version": 2, "versions": true}
		if cfg, err := normalize(l.cfg); err == nil {
			caps = capabilitiesOf(cfg.Mount, cfg.Prefix, cfg.Namespace, cfg.RoleID != "")
		}
		caps["connected"] = false
		return caps
	}
	caps := v.Capabilities()
	caps["connected"] = true
	return caps
}

func (l *lazyVault) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.v == nil {
		return nil
	}
	return l.v.Close()
}
