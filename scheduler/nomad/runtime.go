package nomad

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/cacert"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// Drivers the runtime runs workloads with.
const (
	DriverRawExec = "raw_exec"
	DriverExec    = "exec"
)

// Config configures a Nomad runtime.
type Config struct {
	// Address is Nomad's HTTP API, e.g. https://nomad.example.com:4646.
	// Required.
	Address string
	// Region and Namespace of the jobs; empty means the agent's region
	// and "default".
	Region    string
	Namespace string
	// Datacenters the jobs may run in; empty means all ("*").
	Datacenters []string
	// NodePool the jobs run in; empty means Nomad's default pool.
	NodePool string
	// Driver runs the workloads: raw_exec (the default) or exec.
	Driver string
	// Token is the ACL token (X-Nomad-Token); empty without ACLs.
	Token string
	// CACert is a PEM file of the CA that signed Nomad's certificate;
	// empty means the system's roots.
	CACert string

	// Builds says where builds run: BuildsOnNomad (the default) runs
	// each as a Nomad batch job, BuildsOnController on this server with
	// Builder.
	Builds string
	// Builder builds workloads on the controller (the process runtime's
	// builder). Required for BuildsOnController.
	Builder scheduler.Builder
	// BuildTimeout bounds a build whose request sets none; 0 means
	// DefaultBuildTimeout.
	BuildTimeout time.Duration
	// BuildResources are a build job's; nil means
	// jobtemplates.DefaultBuildResources.
	BuildResources *spec.Resources
	// BuildEnv is added to a build job's environment (toolchain caches,
	// proxies); never a secret: it is part of the job.
	BuildEnv map[string]string
	// Artifacts is the store builds are packed into and served from.
	// Required.
	Artifacts *Artifacts
	// ArtifactBaseURL is the svc server's address as Nomad clients reach
	// it (the artifact handler is mounted there at ArtifactPath).
	// Required.
	ArtifactBaseURL string

	// Vault is where workloads read their secrets (SecretEnv) from.
	Vault VaultConfig
	// JobSecrets returns where a job's sealed variables (SealedEnv: a
	// filled slot's credentials) are written before the job is
	// registered, for its template to read them from Vault under Vault's
	// mount and prefix. It is asked at each run, so that it may name a
	// secrets adapter loaded after the runtime. Nil, or a nil answer,
	// means nowhere: a task with such a variable is refused
	// (PLAN_CAPABILITY_UNSUPPORTED) rather than carry it in the job.
	JobSecrets func() JobSecrets
	// Templates renders the jobs; nil means jobtemplates.Default().
	Templates *jobtemplates.Set
	// ServiceProvider registers the workloads' services: "consul" (the
	// default) or "nomad" (Nomad's own service discovery, whose checks
	// Status reads back).
	ServiceProvider string
	// CPUMHzPerCore converts thousandths of a core into Nomad's MHz; 0
	// means jobtemplates.DefaultCPUMHzPerCore.
	CPUMHzPerCore int
	// Describe tells the runtime what a job's app is (its slug, primary
	// workload, spec revision); nil, or an empty field, falls back to the
	// app ID as the slug and defaultPrimary's guess.
	Describe func(ctx context.Context, job scheduler.Job) (AppInfo, error)
	// StaticServer is the command that serves a static artifact (Nomad
	// has no file server of its own), run in the artifact's directory
	// with Nomad's interpolation; nil means python3's http.server on
	// ${NOMAD_IP_http}:${NOMAD_PORT_http}.
	StaticServer []string

	// StartTimeout bounds how long Run (and Restart) waits for a workload
	// to be ready when the context carries no start timeout
	// (scheduler.WithStartTimeout: the scheduler passes its
	// runtime.start_timeout); 0 means 5 minutes.
	StartTimeout time.Duration
	// LogCapBytes is how much of a workload's output Logs returns when
	// its task sets no cap; 0 means 1 MiB.
	LogCapBytes int64

	// Overrides of the templates' timings, for tests and operators; 0
	// keeps the template's. RestartAttempts, RestartInterval and
	// RestartDelay are each group's restart block (a negative attempts
	// means none); MinHealthyTime and HealthyDeadline its update block;
	// KillTimeout each task's grace between SIGTERM and SIGKILL.
	RestartAttempts int
	RestartInterval time.Duration
	RestartDelay    time.Duration
	MinHealthyTime  time.Duration
	HealthyDeadline time.Duration
	KillTimeout     time.Duration

	// Logger receives the runtime's diagnostics (never a secret value);
	// nil discards them.
	Logger *slog.Logger
}

// VaultConfig says where the secrets adapter keeps an app's secrets and
// how tasks log in to Vault (jobtemplates.VaultSettings): the value of
// secret <key> of app <id> is field "value" of
// <Mount>/data/<Prefix>/apps/<id>/<key>.
type VaultConfig struct {
	// Mount and Prefix as the vault secrets adapter has them; "secret"
	// and "svc" when empty.
	Mount  string
	Prefix string
	// Role is the Vault role the task's workload identity logs in with;
	// empty means the Nomad client's default.
	Role string
	// Namespace (Vault Enterprise) and Cluster (Nomad's Vault cluster).
	Namespace string
	Cluster   string
	// Audience, when set, has each task that reads secrets declare its
	// Vault identity with it (clusters without vault.default_identity).
	Audience []string
}

// Runtime is the Nomad runtime: it runs each build as a Nomad batch job
// and each job as a Nomad service job.
type Runtime struct {
	cfg       Config
	client    *api.Client
	http      *http.Client
	tls       *tls.Config
	log       *slog.Logger
	templates *jobtemplates.Set

	mu  sync.Mutex
	ids map[string]string // scheduler job ID -> Nomad job ID
}

var (
	_ scheduler.Runtime        = (*Runtime)(nil)
	_ scheduler.Builder        = (*Runtime)(nil)
	_ scheduler.Runner         = (*Runtime)(nil)
	_ scheduler.LogReader      = (*Runtime)(nil)
	_ scheduler.UsageReader    = (*Runtime)(nil)
	_ scheduler.HostReader     = (*Runtime)(nil)
	_ scheduler.Execer         = (*Runtime)(nil)
	_ scheduler.Discarder      = (*Runtime)(nil)
	_ scheduler.Pruner         = (*Runtime)(nil)
	_ scheduler.ArtifactKeeper = (*Runtime)(nil)
	_ scheduler.BuildCanceler  = (*Runtime)(nil)
	_ scheduler.VolumeCopier   = (*Runtime)(nil)
)

// New returns a Nomad runtime after checking its configuration. It does
// not contact Nomad (Check does).
func New(cfg Config) (*Runtime, error) {
	u, err := url.Parse(cfg.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("nomad runtime: the address must be an http or https URL such as https://nomad.example.com:4646")
	}
	switch cfg.Driver {
	case "":
		cfg.Driver = DriverRawExec
	case DriverRawExec, DriverExec:
	default:
		return nil, fmt.Errorf("nomad runtime: driver %q is raw_exec or exec", cfg.Driver)
	}
	switch cfg.Builds {
	case "":
		cfg.Builds = BuildsOnNomad
	case BuildsOnNomad:
	case BuildsOnController:
		if cfg.Builder == nil {
			return nil, errors.New("nomad runtime: builds on the controller need a builder")
		}
	default:
		return nil, fmt.Errorf("nomad runtime: builds %q is nomad or controller", cfg.Builds)
	}
	if cfg.BuildTimeout <= 0 {
		cfg.BuildTimeout = DefaultBuildTimeout
	}
	if cfg.Artifacts == nil {
		return nil, errors.New("nomad runtime: an artifact store is required")
	}
	if b, err := url.Parse(cfg.ArtifactBaseURL); err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
		return nil, errors.New("nomad runtime: the artifact URL must be the http or https address Nomad clients reach svc at")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 5 * time.Minute
	}
	if cfg.LogCapBytes <= 0 {
		cfg.LogCapBytes = 1 << 20
	}
	switch cfg.ServiceProvider {
	case "", jobtemplates.ProviderConsul, jobtemplates.ProviderNomad:
	default:
		return nil, fmt.Errorf("nomad runtime: service provider %q is consul or nomad", cfg.ServiceProvider)
	}
	if cfg.StaticServer == nil {
		cfg.StaticServer = []string{"python3", "-m", "http.server", "--bind", "${NOMAD_IP_http}", "${NOMAD_PORT_http}"}
	}
	templates := cfg.Templates
	if templates == nil {
		templates = jobtemplates.Default()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pool, err := cacert.Pool(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("nomad runtime: %w", err)
		}
		tlsConf.RootCAs = pool
	}
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: transport}
	client, err := api.NewClient(&api.Config{
		Address: cfg.Address, Region: cfg.Region, Namespace: cfg.Namespace, SecretID: cfg.Token, HttpClient: hc,
	})
	if err != nil {
		return nil, fmt.Errorf("nomad runtime: %w", err)
	}
	return &Runtime{cfg: cfg, client: client, http: hc, tls: tlsConf, log: log, templates: templates, ids: map[string]string{}}, nil
}

// Isolation is the isolation level of the runtime's driver (a policy
// level): raw_exec runs workloads as the Nomad client's user with no
// isolation ("none"); exec runs them in a chroot of host directories with
// their own PID and IPC namespaces and cgroup limits, on the host's kernel
// and network, which is what the process runtime's bubblewrap sandbox
// offers too ("sandbox"), not an image-based container.
func (r *Runtime) Isolation() string {
	if r.cfg.Driver == DriverExec {
		return policy.IsolationSandbox
	}
	return policy.IsolationNone
}

// Check says whether Nomad answers and has a leader.
func (r *Runtime) Check(ctx context.Context) error {
	var leader string
	if _, err := r.client.Raw().Query("/v1/status/leader", &leader, r.query(ctx)); err != nil {
		return r.translate(err, "read its leader", "the leader")
	}
	if leader == "" {
		return r.translate(errors.New("no leader"), "read its leader", "the leader")
	}
	return nil
}

// query returns query options bound to ctx.
func (r *Runtime) query(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{}).WithContext(ctx)
}

func (r *Runtime) write(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}
