package nomad

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// KindDeps are what the nomad kind's instances are opened with besides
// their settings.
type KindDeps struct {
	// Builder builds on the controller (the process runtime).
	Builder scheduler.Builder
	// Artifacts opens the artifact store (once per instance).
	Artifacts func() (*Artifacts, error)
	// ArtifactBaseURL is the default of the artifact_url setting: the svc
	// server's address as Nomad clients reach it.
	ArtifactBaseURL string
	// Templates renders jobs; nil means the embedded set.
	Templates *jobtemplates.Set
	// Describe tells the runtime what a job's app is; nil guesses.
	Describe func(ctx context.Context, job scheduler.Job) (AppInfo, error)
	// JobSecrets returns where jobs' slot credentials are written for
	// their templates to read from Vault (Config.JobSecrets): the loaded
	// vault secrets adapter when it is the primary one; nil, or a nil
	// answer, refuses tasks that have such credentials.
	JobSecrets func() JobSecrets
	Logger     *slog.Logger
}

const kindDescription = "Runs each app revision as a Nomad service job rendered from the job templates; builds each workload as a Nomad batch job (or on the controller) whose artifact the run job downloads from svc at a signed URL; secrets reach workloads from Vault through template blocks"

// KindFor declares the nomad runtime adapter kind: settings for the
// cluster, the token as a credential, and instances that are Runtimes.
func KindFor(d KindDeps) adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryRuntime,
		Name:        "nomad",
		Description: kindDescription,
		Settings: []adapters.Setting{
			{Name: "address", Description: "Nomad's HTTP API address", Required: true, Example: "https://nomad.example.com:4646"},
			{Name: "region", Description: "Region of the jobs; empty for the agent's", Example: "global"},
			{Name: "namespace", Description: "Namespace of the jobs; empty for default", Example: "apps"},
			{Name: "datacenters", Description: "Comma-separated datacenters the jobs may run in; empty for all", Example: "dc1,dc2"},
			{Name: "node_pool", Description: "Node pool the jobs run in; empty for Nomad's default", Example: "apps"},
			{Name: "driver", Description: "Task driver: raw_exec (no isolation) or exec (chroot, namespaces and cgroups)", Default: DriverRawExec},
			{Name: "service_provider", Description: "Where workloads register as services: consul or nomad", Default: jobtemplates.ProviderConsul},
			{Name: "cpu_mhz_per_core", Description: "Megahertz one core of the clients is worth, to convert cpu_millis; empty for 2000", Example: "2400"},
			{Name: "ca_cert", Description: "PEM file of the CA that signed Nomad's certificate; empty for the system's roots", Example: "/etc/svc/nomad-ca.pem"},
			{Name: "artifact_url", Description: "svc's address as Nomad clients reach it, for source and build downloads and build uploads; empty for the server's external URL", Example: "https://svc.internal:8443"},
			{Name: "builds", Description: "Where builds run: nomad (a batch job per build; the clients need the toolchains and curl) or controller (on the svc leader)", Default: BuildsOnNomad},
			{Name: "templates_dir", Description: "Directory on every svc server whose service.json.tmpl and/or build.json.tmpl replace the embedded job templates; empty for the embedded ones", Example: "/etc/svc/jobs-templates"},
			{Name: "build_cpu_millis", Description: "CPU a build job asks for, in thousandths of a core", Default: strconv.FormatInt(jobtemplates.DefaultBuildResources.CPUMillis, 10)},
			{Name: "build_memory_mb", Description: "Memory a build job asks for, in MiB", Default: strconv.FormatInt(jobtemplates.DefaultBuildResources.MemoryBytes>>20, 10)},
			{Name: "vault_mount", Description: "KV version 2 mount of the vault secrets adapter", Default: jobtemplates.DefaultVaultMount},
			{Name: "vault_prefix", Description: "Path under the mount where the vault secrets adapter keeps values", Default: jobtemplates.DefaultVaultPrefix},
			{Name: "vault_role", Description: "Vault role workloads log in with (workload identity); empty for the clients' default", Example: "svc-apps"},
			{Name: "vault_audience", Description: "Comma-separated audience of the tasks' Vault identity, for clusters without vault.default_identity; empty for none", Example: "vault.io"},
			{Name: "token", Description: "Nomad ACL token: " + capabilitiesText(), Credential: true},
		},
		Validate: validateKind,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			cfg, err := kindConfig(c, d)
			if err != nil {
				return nil, err
			}
			return New(cfg)
		},
	}
}

func validateKind(settings map[string]string, _ []string) error {
	u, err := url.Parse(settings["address"])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errcode.Invalid("config.address", "address must be an http or https URL such as https://nomad.example.com:4646")
	}
	if a := settings["artifact_url"]; a != "" {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errcode.Invalid("config.artifact_url", "artifact_url must be the http or https URL Nomad clients reach svc at")
		}
	}
	if b := settings["builds"]; b != BuildsOnNomad && b != BuildsOnController {
		return errcode.Invalid("config.builds", "builds must be nomad or controller")
	}
	if d := settings["driver"]; d != DriverRawExec && d != DriverExec {
		return errcode.Invalid("config.driver", "driver must be raw_exec or exec")
	}
	if p := settings["service_provider"]; p != jobtemplates.ProviderConsul && p != jobtemplates.ProviderNomad {
		return errcode.Invalid("config.service_provider", "service_provider must be consul or nomad")
	}
	if dir := settings["templates_dir"]; dir != "" {
		if _, err := jobtemplates.Load(dir); err != nil {
			return errcode.Invalid("config.templates_dir", "%s", err.Error())
		}
	}
	for _, name := range []string{"build_cpu_millis", "build_memory_mb"} {
		if n, err := strconv.ParseInt(settings[name], 10, 64); err != nil || n <= 0 || n > 1<<20 {
			return errcode.Invalid("config."+name, "%s must be a positive whole number", name)
		}
	}
	if m := settings["cpu_mhz_per_core"]; m != "" {
		if n, err := strconv.Atoi(m); err != nil || n <= 0 {
			return errcode.Invalid("config.cpu_mhz_per_core", "cpu_mhz_per_core must be a positive number of megahertz")
		}
	}
	return nil
}

func kindConfig(c adapters.Config, d KindDeps) (Config, error) {
	if d.Artifacts == nil || (d.Builder == nil && c.Settings["builds"] == BuildsOnController) {
		return Config{}, errors.New("nomad runtime: this build of svc has no builder or artifact store for it")
	}
	arts, err := d.Artifacts()
	if err != nil {
		return Config{}, err
	}
	s := c.Settings
	base := s["artifact_url"]
	if base == "" {
		base = d.ArtifactBaseURL
	}
	if base == "" {
		return Config{}, errcode.Invalid("config.artifact_url", "the nomad runtime needs artifact_url (or the server's external URL): the address Nomad clients download builds from")
	}
	var dcs []string
	for dc := range strings.SplitSeq(s["datacenters"], ",") {
		if dc = strings.TrimSpace(dc); dc != "" {
			dcs = append(dcs, dc)
		}
	}
	templates := d.Templates
	if dir := s["templates_dir"]; dir != "" {
		if templates, err = jobtemplates.Load(dir); err != nil {
			return Config{}, err
		}
	}
	mhz, _ := strconv.Atoi(s["cpu_mhz_per_core"])
	buildCPU, _ := strconv.ParseInt(s["build_cpu_millis"], 10, 64)
	buildMem, _ := strconv.ParseInt(s["build_memory_mb"], 10, 64)
	buildRes := jobtemplates.DefaultBuildResources
	if buildCPU > 0 {
		buildRes.CPUMillis = buildCPU
	}
	if buildMem > 0 {
		buildRes.MemoryBytes = buildMem << 20
	}
	var audience []string
	for a := range strings.SplitSeq(s["vault_audience"], ",") {
		if a = strings.TrimSpace(a); a != "" {
			audience = append(audience, a)
		}
	}
	return Config{
		Address: s["address"], Region: s["region"], Namespace: s["namespace"], Datacenters: dcs,
		NodePool: s["node_pool"], Driver: s["driver"], Token: c.Credentials["token"], CACert: s["ca_cert"],
		Builds: s["builds"], BuildResources: &buildRes, Builder: d.Builder, Artifacts: arts, ArtifactBaseURL: base, Templates: templates,
		ServiceProvider: s["service_provider"], CPUMHzPerCore: mhz, Describe: d.Describe, JobSecrets: d.JobSecrets,
		Vault:  VaultConfig{Mount: s["vault_mount"], Prefix: s["vault_prefix"], Role: s["vault_role"], Audience: audience},
		Logger: d.Logger,
	}, nil
}

var _ adapters.Instance = (*Runtime)(nil)

// BuilderInfo is what the capabilities ask of the controller's builder
// (Config.Builder) when builds run there: the build kinds it runs and the
// isolation its builds get. The process runtime answers both.
type BuilderInfo interface {
	BuildKinds() []string
	Isolation() string
}

// Capabilities says what the runtime does, as its configuration makes it,
// asked of the code that decides rather than kept beside it: where builds
// run (build_location: "nomad", a batch job per build, or "controller",
// the svc leader's builder, as the builds setting says), the build kinds
// that run there (those the build template's data accepts for the
// driver, or those the controller's builder runs), the isolation of
// workloads and builds (the driver's: "none" for raw_exec, "sandbox" for
// exec; see Isolation), whether workloads can mount volumes (the service
// template's data refuses mounts on raw_exec), the restart policy a group
// gets (the job template's, with Config's overrides), and resource limits
// (enforced by exec's cgroups; raw_exec promises none). Egress lists are
// never enforced here: a deploy that needs one is refused.
func (r *Runtime) Capabilities() map[string]any {
	levels := []string{policy.IsolationNone}
	if r.Isolation() != policy.IsolationNone {
		levels = append(levels, r.Isolation())
	}
	provider := r.cfg.ServiceProvider
	if provider == "" {
		provider = jobtemplates.ProviderConsul
	}
	location, kinds, buildIsolation := BuildsOnNomad, r.nomadBuildKinds(), r.Isolation()
	if r.cfg.Builds == BuildsOnController {
		location, kinds, buildIsolation = BuildsOnController, []string{}, ""
		if b, ok := r.cfg.Builder.(BuilderInfo); ok {
			kinds, buildIsolation = b.BuildKinds(), b.Isolation()
		}
	}
	volumes := r.mountsVolumes()
	caps := map[string]any{
		"isolation":        r.Isolation(),
		"isolation_levels": slices.Clone(levels),
		"egress_allowlist": false,   // left to the cluster's network: refused, not ignored
		"secrets_from":     "vault", // template blocks read Vault: secrets held elsewhere are refused by the plan
		"driver":           r.cfg.Driver,
		"builds":           kinds,
		"build_location":   location,
		"build_isolation":  buildIsolation,
		"health_checks":    []string{"http", "tcp"},
		"restarts":         true,
		"restart_policy":   r.restartPolicy(),
		"logs":             true,
		"log_streams":      "stdout then stderr",
		"exec":             true,
		"usage":            true,
		"volumes":          volumes,
		"resource_limits":  r.cfg.Driver == DriverExec,
		"service_provider": provider,
		"address":          r.cfg.Address,
		"namespace":        r.namespace(),
	}
	if volumes {
		caps["volume_kind"] = "nomad dynamic host volumes (mkdir plugin)"
	}
	return caps
}

// nomadBuildKinds are the spec's build kinds the build template's data
// accepts for the driver: those a build job runs.
func (r *Runtime) nomadBuildKinds() []string {
	out := []string{}
	for _, k := range spec.BuildKinds() {
		in := jobtemplates.SampleBuildInput()
		in.Driver, in.Isolation = r.cfg.Driver, ""
		in.Build = spec.Build{Kind: k, Context: ".", Command: "true"}
		if _, err := jobtemplates.BuildData(in); errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
			out = append(out, k)
		}
	}
	return out
}

// mountsVolumes says whether the service template's data accepts a
// workload that mounts a volume, with the runtime's driver.
func (r *Runtime) mountsVolumes() bool {
	in := jobtemplates.SampleServiceInput()
	web := in.Job.Workloads[in.Primary]
	if len(web.Mounts) == 0 {
		return false // the sample lost its volume: say nothing that is not checked
	}
	web.Env, web.SecretEnv = nil, nil
	in.Job.Workloads, in.Job.Order = map[string]scheduler.Task{in.Primary: web}, []string{in.Primary}
	in.Artifacts = map[string]jobtemplates.ArtifactSource{in.Primary: in.Artifacts[in.Primary]}
	in.Driver, in.Vault = r.cfg.Driver, jobtemplates.VaultSettings{}
	_, err := jobtemplates.ServiceData(in)
	return err == nil
}

// restartPolicy is the restart block a workload's group gets: the
// template's, rendered for the sample job, with Config's overrides.
func (r *Runtime) restartPolicy() map[string]any {
	out := map[string]any{}
	b, err := r.templates.RenderService(jobtemplates.SampleServiceInput())
	if err != nil {
		return out
	}
	job, err := decodeJob(b)
	if err != nil || len(job.TaskGroups) == 0 || len(job.TaskGroups[0].Tasks) == 0 {
		return out
	}
	tg := job.TaskGroups[0]
	r.override(tg, tg.Tasks[0])
	if p := tg.RestartPolicy; p != nil {
		if p.Attempts != nil {
			out["attempts"] = *p.Attempts
		}
		if p.Interval != nil {
			out["interval"] = p.Interval.String()
		}
		if p.Delay != nil {
			out["delay"] = p.Delay.String()
		}
		if p.Mode != nil {
			out["mode"] = *p.Mode
		}
	}
	return out
}
