package vaultsecrets

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
)

// VaultConfig configures the vault secrets adapter. Exactly one way to
// authenticate is set: Token, or RoleID and SecretID (AppRole).
//
// Only these fields configure the adapter: Vault's own VAULT_* environment
// variables (VAULT_ADDR, VAULT_TOKEN, VAULT_NAMESPACE, VAULT_SKIP_VERIFY, …)
// in svc's environment are ignored.
type VaultConfig struct {
	// Address is Vault's API address, for example https://vault.example.com:8200.
	Address string
	// Mount is the path of the KV version 2 secrets engine; default "secret".
	Mount string
	// Prefix is the path under the mount below which svc keeps values,
	// at <prefix>/apps/<app id>/<key>; default "svc".
	Prefix string
	// Namespace is the Vault Enterprise namespace; empty for none.
	Namespace string

	// Token is a Vault token. A renewable token is renewed in the
	// background until its max TTL; then svc needs a new one.
	Token string
	// RoleID and SecretID log in with AppRole; the token they yield is
	// renewed in the background and, when it can be renewed no longer,
	// replaced by logging in again.
	RoleID   string
	SecretID string
	// AppRoleMount is the AppRole auth method's mount path; default "approle".
	AppRoleMount string

	// CACert is the path of a PEM file with the CA that signed Vault's
	// certificate; empty for the system's roots.
	CACert string
	// TLSSkipVerify turns off verification of Vault's certificate (for
	// testing only).
	TLSSkipVerify bool

	// Timeout bounds one request to Vault; default 30s.
	Timeout time.Duration
	// MaxRetries is how often a request that could not reach Vault or got
	// a 5xx answer is retried; 0 means the client's default (2), a negative
	// number means no retries.
	MaxRetries int

	// Logger receives renewal and re-login events; never a token, a
	// secret ID or a value. Nil discards them.
	Logger *slog.Logger
}

// Defaults of VaultConfig.
const (
	DefaultVaultMount    = "secret"
	DefaultVaultPrefix   = "svc"
	DefaultAppRoleMount  = "approle"
	defaultVaultTimeout  = 30 * time.Second
	defaultVaultRetries  = 2
	vaultListParallelism = 8
	// valueField is the one field of a KV entry that holds the value.
	valueField = "value"
)

// Vault keeps secret values in a Vault KV version 2 secrets engine, one
// entry per secret at <mount>/data/<prefix>/apps/<app id>/<key>, the value
// in its field "value". Vault numbers the versions; svc's rows record the
// version each write made.
type Vault struct {
	mount, prefix, namespace string
	address                  string // redacted, for messages
	approleMount             string
	roleID, secretID         string
	log                      *slog.Logger

	client *api.Client
	login  *api.Client // AppRole only: the same settings, never a token
	// renewer renews tokens (each request names its token) without
	// retrying.
	renewer *api.Client

	authMu sync.Mutex // serialises logins; guards auth
	auth   api.SecretAuth
	// relogged wakes the renewal loop when a request logged in again.
	relogged chan struct{}

	// bg is cancelled by Close; done closes when the renewal has stopped.
	bg        context.Context
	closeBG   context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ secrets.Backend = (*Vault)(nil)
	_ instance        = (*Vault)(nil)
)

// instance is what the adapter registry asks of a live adapter (health and
// capabilities) and how it releases one, restated here so that this package
// stays independent of the registry.
type instance interface {
	Check(ctx context.Context) error
	Capabilities() map[string]any
	io.Closer
}

var (
	// pathSegment is what a mount, prefix or AppRole mount segment may be.
	pathSegment = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	// appIDRE is what an app ID must look like before it becomes a path
	// segment: IDs are <prefix>_<ULID>, so this never refuses a real one.
	appIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// NewVault returns the vault secrets adapter: it validates the
// configuration, logs in (AppRole) or looks the token up, checks that the
// mount is a KV version 2 engine the credentials can use, and starts
// renewing the token in the background. Close stops the renewal.
func NewVault(ctx context.Context, cfg VaultConfig) (*Vault, error) {
	cfg, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	v := &Vault{
		mount:        cfg.Mount,
		prefix:       cfg.Prefix,
		namespace:    cfg.Namespace,
		address:      redactAddress(cfg.Address),
		approleMount: cfg.AppRoleMount,
		roleID:       cfg.RoleID,
		secretID:     cfg.SecretID,
		log:          cfg.Logger,
		relogged:     make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	if v.client, err = newAPIClient(cfg); err != nil {
		return nil, err
	}
	noRetries := cfg
	noRetries.MaxRetries = 0
	if v.renewer, err = newAPIClient(noRetries); err != nil {
		return nil, err
	}
	if v.approle() {
		if v.login, err = newAPIClient(cfg); err != nil {
			return nil, err
		}
		if err := v.logIn(ctx); err != nil {
			return nil, err
		}
	} else {
		v.client.SetToken(cfg.Token)
		if err := v.lookUpToken(ctx, cfg.Token); err != nil {
			return nil, err
		}
	}
	if err := v.checkMount(ctx); err != nil {
		if v.approle() { // the token logged in for is of no use: end it
			_ = v.client.Auth().Token().RevokeSelfWithContext(ctx, "")
		}
		return nil, err
	}
	v.bg, v.closeBG = context.WithCancel(context.Background())
	go v.renew()
	return v, nil
}

// normalize applies defaults and validates a configuration.
func normalize(cfg VaultConfig) (VaultConfig, error) {
	cfg.Address = strings.TrimSpace(cfg.Address)
	cfg.Mount = strings.Trim(strings.TrimSpace(cfg.Mount), "/")
	cfg.Prefix = strings.Trim(strings.TrimSpace(cfg.Prefix), "/")
	cfg.Namespace = strings.Trim(strings.TrimSpace(cfg.Namespace), "/")
	cfg.AppRoleMount = strings.Trim(strings.TrimSpace(cfg.AppRoleMount), "/")
	if cfg.Mount == "" {
		cfg.Mount = DefaultVaultMount
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultVaultPrefix
	}
	if cfg.AppRoleMount == "" {
		cfg.AppRoleMount = DefaultAppRoleMount
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultVaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = defaultVaultRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("adapter", "vault")

	u, err := url.Parse(cfg.Address)
	if cfg.Address == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, errcode.Invalid("address", "the vault address must be an http or https URL").
			WithRemedy("for example https://vault.example.com:8200")
	}
	if !validPath(cfg.Mount) {
		return cfg, errcode.Invalid("mount", "the vault mount must be a path of letters, digits, '.', '_' and '-' segments").
			WithRemedy("for example %s", DefaultVaultMount)
	}
	if !validPath(cfg.Prefix) {
		return cfg, errcode.Invalid("prefix", "the vault prefix must be a path of letters, digits, '.', '_' and '-' segments").
			WithRemedy("for example %s or teams/platform/svc", DefaultVaultPrefix)
	}
	if cfg.Namespace != "" && !validPath(cfg.Namespace) {
		return cfg, errcode.Invalid("namespace", "the vault namespace must be a path of letters, digits, '.', '_' and '-' segments").
			WithRemedy("for example admin/team-a, or leave it empty outside Vault Enterprise")
	}
	if !validPath(cfg.AppRoleMount) {
		return cfg, errcode.Invalid("approle_mount", "the AppRole mount must be a path of letters, digits, '.', '_' and '-' segments").
			WithRemedy("for example %s", DefaultAppRoleMount)
	}
	token := cfg.Token != ""
	approle := cfg.RoleID != "" || cfg.SecretID != ""
	switch {
	case token && approle:
		return cfg, errcode.Invalid("token", "set either a vault token or an AppRole role_id and secret_id, not both")
	case !token && !approle:
		return cfg, errcode.Invalid("token", "the vault adapter needs a token, or an AppRole role_id and secret_id").
			WithRemedy("AppRole is preferred for servers: vault write auth/approle/role/svc token_policies=svc, then read its role-id and create a secret-id")
	case approle && (cfg.RoleID == "" || cfg.SecretID == ""):
		return cfg, errcode.Invalid("secret_id", "AppRole needs both a role_id and a secret_id")
	}
	return cfg, nil
}

func validPath(p string) bool {
	if p == "" {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if !pathSegment.MatchString(seg) || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func redactAddress(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "the configured address"
	}
	return u.Redacted()
}

// newAPIClient builds a Vault API client from the configuration alone, with
// no token. It does not start from api.DefaultConfig, which reads VAULT_*
// environment variables: none of them may change where the adapter
// connects, whom it trusts (VAULT_SKIP_VERIFY, VAULT_CACERT) or as whom it
// acts (VAULT_TOKEN, VAULT_NAMESPACE, cleared below).
func newAPIClient(cfg VaultConfig) (*api.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	transport.TLSHandshakeTimeout = 10 * time.Second
	c := &api.Config{
		Address: cfg.Address,
		HttpClient: &http.Client{
			Transport: transport,
			// Vault's client follows a redirect itself (to the active
			// node), refusing a downgrade from https.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Timeout:    cfg.Timeout,
		MaxRetries: cfg.MaxRetries,
	}
	if cfg.CACert != "" || cfg.TLSSkipVerify {
		if err := c.ConfigureTLS(&api.TLSConfig{CACert: cfg.CACert, Insecure: cfg.TLSSkipVerify}); err != nil {
			return nil, errcode.Wrap(err, errcode.ValidInvalid, "the vault CA certificate %s could not be loaded", cfg.CACert).
				WithDetail("field", "ca_cert").
				WithRemedy("point ca_cert at a readable PEM file holding the CA that signed vault's certificate")
		}
	}
	client, err := api.NewClient(c)
	if err != nil {
		return nil, errcode.Wrap(err, errcode.AdapterFailed, "the vault client could not be set up").
			WithRemedy("check the adapter's address, and the VAULT_* environment variables of the svc process (Vault's client reads them and refuses malformed ones)")
	}
	client.ClearToken()
	if cfg.Namespace != "" {
		client.SetNamespace(cfg.Namespace)
	} else {
		client.ClearNamespace()
	}
	return client, nil
}

func (v *Vault) approle() bool { return v.roleID != "" }

// rel is a secret's path below the mount.
func (v *Vault) rel(ref secrets.Ref) string {
	return v.prefix + "/apps/" + ref.AppID + "/" + ref.Key
}

func (v *Vault) dataPath(ref secrets.Ref) string { return v.mount + "/data/" + v.rel(ref) }
func (v *Vault) metaPath(ref secrets.Ref) string { return v.mount + "/metadata/" + v.rel(ref) }

// policyPath names, for remedies, the paths the credentials' policy must
// cover: kind is "data" or "metadata".
func (v *Vault) policyPath(kind string) string {
	return v.mount + "/" + kind + "/" + v.prefix + "/apps/*"
}

// checkRef refuses an app ID or key that is not one path segment, so that
// no reference can reach outside its app's folder.
func checkRef(ref secrets.Ref) error {
	if !appIDRE.MatchString(ref.AppID) {
		return errcode.Invalid("app_id", "%q is not an app ID", ref.AppID)
	}
	return secrets.CheckKey(ref.Key)
}

// Put writes the value as a new version of the secret's KV entry and
// returns the version Vault gave it, with Vault's time of that version.
func (v *Vault) Put(ctx context.Context, ref secrets.Ref, value string) (secrets.Stored, error) {
	if err := checkRef(ref); err != nil {
		return secrets.Stored{}, err
	}
	o := v.op(fmt.Sprintf("writing secret %s", ref.Key), "create and update on "+v.policyPath("data"))
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().WriteWithContext(ctx, v.dataPath(ref),
			map[string]any{"data": map[string]any{valueField: value}})
		return err
	})
	if err != nil {
		return secrets.Stored{}, v.translate(o, err)
	}
	if sec == nil {
		return secrets.Stored{}, errcode.New(errcode.AdapterFailed, "vault answered %s with no version", o.what).
			WithRemedy("check that the mount %s is a KV version 2 secrets engine", v.mount)
	}
	version, ok := int64Of(sec.Data["version"])
	if !ok || version < 1 {
		return secrets.Stored{}, errcode.New(errcode.AdapterFailed, "vault answered %s without a version number", o.what).
			WithRemedy("check that the mount %s is a KV version 2 secrets engine", v.mount)
	}
	// Vault's own time of the version orders concurrent writes (an
	// unreadable one leaves them unordered).
	created, _ := sec.Data["created_time"].(string)
	at, _ := time.Parse(time.RFC3339Nano, created)
	return secrets.Stored{Version: version, At: at}, nil
}

// Get reads the value of the version the secret's row names (the latest
// without one): a version written by a change whose row was never written
// is not served.
func (v *Vault) Get(ctx context.Context, ref secrets.Ref, st secrets.Stored) (string, error) {
	if err := checkRef(ref); err != nil {
		return "", err
	}
	o := v.op(fmt.Sprintf("reading secret %s", ref.Key), "read on "+v.policyPath("data"))
	var query map[string][]string
	if st.Version > 0 {
		query = map[string][]string{"version": {strconv.FormatInt(st.Version, 10)}}
	}
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().ReadWithDataWithContext(ctx, v.dataPath(ref), query)
		return err
	})
	if err != nil {
		return "", v.translate(o, err)
	}
	notFound := errcode.New(errcode.NotFound, "vault holds no secret %s for app %s", ref.Key, ref.AppID).
		WithRemedy("set the secret again; it may have been deleted in vault directly, at %s", v.dataPath(ref))
	if sec == nil || sec.Data == nil {
		return "", notFound
	}
	data, _ := sec.Data["data"].(map[string]any)
	if data == nil { // the version was deleted or destroyed
		return "", notFound
	}
	value, ok := data[valueField].(string)
	if !ok {
		return "", errcode.New(errcode.AdapterFailed, "vault's entry for secret %s has no text field %q", ref.Key, valueField).
			WithRemedy("the entry at %s was not written by svc; set the secret again through svc", v.dataPath(ref))
	}
	return value, nil
}

// Delete removes the secret's metadata and with it every version; a secret
// that is not there is no error.
func (v *Vault) Delete(ctx context.Context, ref secrets.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	o := v.op(fmt.Sprintf("deleting secret %s", ref.Key), "delete on "+v.policyPath("metadata"))
	err := v.do(ctx, func() error {
		_, err := v.client.Logical().DeleteWithContext(ctx, v.metaPath(ref))
		return err
	})
	if err != nil && statusOf(err) != 404 {
		return v.translate(o, err)
	}
	return nil
}

// List names the app's secrets with their current versions and the time
// each was last written, from their metadata; never values.
func (v *Vault) List(ctx context.Context, appID string) ([]secrets.Entry, error) {
	if !appIDRE.MatchString(appID) {
		return nil, errcode.Invalid("app_id", "%q is not an app ID", appID)
	}
	o := v.op(fmt.Sprintf("listing the secrets of app %s", appID), "list on "+v.policyPath("metadata"))
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().ListWithContext(ctx, v.mount+"/metadata/"+v.prefix+"/apps/"+appID)
		return err
	})
	if err != nil {
		return nil, v.translate(o, err)
	}
	var keys []string
	if sec != nil {
		raw, _ := sec.Data["keys"].([]any)
		for _, k := range raw {
			if s, ok := k.(string); ok && !strings.HasSuffix(s, "/") && secrets.CheckKey(s) == nil {
				keys = append(keys, s)
			}
		}
	}
	slices.Sort(keys)

	entries := make([]*secrets.Entry, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, vaultListParallelism)
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			entries[i], errs[i] = v.metadata(ctx, secrets.Ref{AppID: appID, Key: key})
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	out := make([]secrets.Entry, 0, len(keys))
	for _, e := range entries {
		if e != nil { // deleted between the listing and its metadata read
			out = append(out, *e)
		}
	}
	return out, nil
}

// firstError returns the first non-nil error.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// metadata reads one secret's current version and update time; nil when
// the secret is gone.
func (v *Vault) metadata(ctx context.Context, ref secrets.Ref) (*secrets.Entry, error) {
	o := v.op(fmt.Sprintf("reading the metadata of secret %s", ref.Key), "read on "+v.policyPath("metadata"))
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().ReadWithContext(ctx, v.metaPath(ref))
		return err
	})
	if err != nil {
		return nil, v.translate(o, err)
	}
	if sec == nil || sec.Data == nil {
		return nil, nil
	}
	version, ok := int64Of(sec.Data["current_version"])
	if !ok {
		return nil, errcode.New(errcode.AdapterFailed, "vault answered %s without a current version", o.what).
			WithRemedy("check that the mount %s is a KV version 2 secrets engine", v.mount)
	}
	e := &secrets.Entry{Key: ref.Key, Version: version}
	if s, ok := sec.Data["updated_time"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			e.UpdatedAt = t.UTC()
		}
	}
	return e, nil
}

// Check says whether the adapter works now: its token is valid and the
// mount is a KV version 2 engine the token can use.
func (v *Vault) Check(ctx context.Context) error {
	o := v.op("looking up its own token", "read on auth/token/lookup-self (the default policy grants it)")
	err := v.do(ctx, func() error {
		_, err := v.client.Auth().Token().LookupSelfWithContext(ctx)
		return err
	})
	if err != nil {
		return v.tokenError(v.translate(o, err))
	}
	return v.checkMount(ctx)
}

// tokenError adds to an error of the token's own lookup what to do about
// the token.
func (v *Vault) tokenError(err error) error {
	if s := statusOf(err); s != 401 && s != 403 {
		return err
	}
	if e, ok := errcode.As(err); ok {
		if v.approle() {
			e.Remedy = "the AppRole token was refused; check the role still exists and its token policies include the default policy (auth/token/lookup-self)"
		} else {
			e.Remedy = "the token is expired, revoked or lacks the default policy; configure the adapter with a new token"
		}
	}
	return err
}

// checkMount verifies that the mount is a KV version 2 engine, through the
// preflight endpoint Vault's own CLI uses (any token with a capability
// under the mount may read it).
func (v *Vault) checkMount(ctx context.Context) error {
	o := v.op(fmt.Sprintf("describing the mount %s", v.mount), "read, create or list on "+v.policyPath("data"))
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+v.mount)
		return err
	})
	if err != nil {
		return v.translate(o, err)
	}
	if sec == nil || sec.Data == nil {
		return errcode.New(errcode.AdapterFailed, "vault has no secrets engine mounted at %s", v.mount).
			WithRemedy("enable one with: vault secrets enable -path=%s kv-v2 (or set the adapter's mount, and namespace, to where it is)", v.mount)
	}
	typ, _ := sec.Data["type"].(string)
	version := ""
	if opts, ok := sec.Data["options"].(map[string]any); ok {
		version, _ = opts["version"].(string)
	}
	if typ != "kv" || version != "2" {
		return errcode.New(errcode.AdapterFailed, "the secrets engine at %s is not KV version 2 (type %q, version %q)", v.mount, typ, version).
			WithRemedy("point the adapter at a kv-v2 mount, or upgrade a KV version 1 mount with: vault kv enable-versioning %s", v.mount)
	}
	return nil
}

// Capabilities describes the adapter.
func (v *Vault) Capabilities() map[string]any {
	return capabilitiesOf(v.mount, v.prefix, v.namespace, v.approle())
}

// capabilitiesOf describes an adapter of a (normalized) configuration:
// what it says before it has connected and after.
func capabilitiesOf(mount, prefix, namespace string, approle bool) map[string]any {
	auth := "token"
	if approle {
		auth = "approle"
	}
	c := map[string]any{
		"kv_version": 2,
		"versions":   true,
		"mount":      mount,
		"prefix":     prefix,
		"auth":       auth,
	}
	if namespace != "" {
		c["namespace"] = namespace
	}
	return c
}

// Close stops the token's renewal and, for AppRole, revokes the token this
// adapter logged in for. A configured token is never revoked: it is not
// the adapter's to end.
func (v *Vault) Close() error {
	v.closeOnce.Do(func() {
		v.closeBG()
		<-v.done
		if v.approle() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			v.authMu.Lock()
			defer v.authMu.Unlock()
			if err := v.client.Auth().Token().RevokeSelfWithContext(ctx, ""); err != nil {
				v.log.Debug("vault: revoking the AppRole token on close failed; it expires with its TTL",
					"error", errcode.MessageOf(v.translate(v.op("revoking its token", "update on auth/token/revoke-self"), err)))
			}
			v.client.ClearToken()
		}
	})
	return nil
}

// int64Of reads a JSON number as Vault's client decodes it.
func int64Of(x any) (int64, bool) {
	switch n := x.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == float64(int64(n))
	case int64:
		return n, true
	case int:
		return int64(n), true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// VaultPolicy returns the Vault policy, in HCL, that the adapter's token
// (or AppRole's token policies) needs for a mount and prefix: writing,
// reading, listing and deleting secrets, and jobs' sealed variables, under
// <prefix>/apps/, nothing else.
// Empty arguments take the defaults. Looking up and renewing its own token
// come with Vault's default policy.
func VaultPolicy(mount, prefix string) string {
	mount = strings.Trim(mount, "/")
	prefix = strings.Trim(prefix, "/")
	if mount == "" {
		mount = DefaultVaultMount
	}
	if prefix == "" {
		prefix = DefaultVaultPrefix
	}
	return fmt.Sprintf(`# svc secrets adapter: values of apps' secrets
path "%[1]s/data/%[2]s/apps/*" {
  capabilities = ["create", "read", "update"]
}

# versions and update times (list), removing every version (delete)
path "%[1]s/metadata/%[2]s/apps/*" {
  capabilities = ["read", "list", "delete"]
}
`, mount, prefix)
}
