package jobtemplates

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// ServiceInput is what the Nomad runtime knows when it runs a job: the
// scheduler's job, the app and deployment it belongs to, and how its
// cluster runs workloads.
type ServiceInput struct {
	// AppID is the app's ID (app_<ULID>): it names the app's Vault folder
	// and host volumes.
	AppID string
	// AppSlug names the job and the services (svc-<slug>).
	AppSlug string
	// AppName is the job's Name (what Nomad's UI and `nomad job status`
	// show beside the ID); empty means the slug.
	AppName string
	// SpecID and SpecRevision name the spec revision the job runs (the
	// job's meta); empty and 0 leave them out.
	SpecID       string
	SpecRevision uint64
	// DeploymentID is the deployment the job runs; empty means Job.ID (the
	// scheduler names a job after its deployment). It names the job's
	// entries of slot credentials in Vault (VaultJobEnvPath).
	DeploymentID string
	Job          scheduler.Job
	// Primary is the workload the edge routes to (spec.Document.Primary);
	// empty with a single workload means that one.
	Primary string
	// Artifacts says, per workload, where its task downloads the built tree
	// from (a short-lived signed URL to the svc servers). Every workload
	// needs one.
	Artifacts map[string]ArtifactSource
	// StaticCommand serves a static workload (a static artifact and no
	// command): it runs in the directory of the downloaded files with PORT
	// set and must serve those files over HTTP on PORT, at every
	// interface. It is the operator's (for example svc's own static file
	// server, at an absolute path on the clients), so Nomad's interpolation
	// applies to it, unlike to an app's command. Needed only when the job
	// has a static workload.
	StaticCommand []string
	// Datacenters default to ["*"]; Region, Namespace and NodePool empty
	// leave Nomad's defaults.
	Datacenters []string
	Region      string
	Namespace   string
	NodePool    string
	// Driver is DriverRawExec or DriverExec. raw_exec runs at isolation
	// "none" and mounts no volumes; exec (a chroot, namespaces and cgroups)
	// counts as "sandbox".
	Driver string
	// NetworkMode is NetworkHost (the default: the workload listens on its
	// dynamic port on the node) or NetworkBridge (each group has its own
	// network namespace and the dynamic port maps to the spec's run.port).
	NetworkMode string
	// ServiceProvider is ProviderConsul (the default) or ProviderNomad
	// (Nomad's own service discovery).
	ServiceProvider string
	// Vault says where the app's secrets are and how tasks reach Vault.
	Vault VaultSettings
	// CPUMHzPerCore converts cpu_millis into Nomad's MHz (see CPUMHz); 0
	// means DefaultCPUMHzPerCore. Pass the clients' cpu.frequency when
	// they agree on one.
	CPUMHzPerCore int
}

// ArtifactSource is where a task downloads a tree from, with Nomad's
// artifact block (go-getter).
type ArtifactSource struct {
	URL string
	// Archive is go-getter's "archive" option ("tar.gz", "zip", …): what
	// the download is, when the URL does not end in it. Empty lets
	// go-getter tell from the URL.
	Archive string
	// Checksum is go-getter's "checksum" option ("sha256:<hex>"); empty for
	// none.
	Checksum string
}

// VaultSettings say where svc's vault secrets adapter keeps an app's
// secrets, <Mount>/data/<Prefix>/apps/<app id>/<key> with the value in the
// field "value", and its jobs' sealed variables,
// <Mount>/data/<Prefix>/apps/<app id>/job-env/<deployment id>/<workload>
// with one field per variable (vaultsecrets), and how a task logs in to
// Vault (Nomad's workload identity): its policy must let it read both.
type VaultSettings struct {
	// Mount is the KV version 2 engine's path; empty means "secret".
	Mount string
	// Prefix is the path under the mount; empty means "svc".
	Prefix string
	// Role is the Vault role the task's workload identity logs in with;
	// empty leaves Nomad's default (the client's vault.create_from_role).
	Role string
	// Namespace is the Vault Enterprise namespace; Cluster the Nomad
	// Vault cluster name (empty: "default").
	Namespace string
	Cluster   string
	// Audience, when set, has each task that reads secrets declare its
	// Vault identity (vault_<cluster>) with this audience, for clusters
	// without a vault.default_identity; IdentityTTL is its lifetime (0:
	// one hour).
	Audience    []string
	IdentityTTL time.Duration
}

// Defaults of VaultSettings: those of vaultsecrets.VaultConfig.
const (
	DefaultVaultMount  = "secret"
	DefaultVaultPrefix = "svc"
)

// VaultSecretPath is the path consul-template's secret function reads an
// app's secret from: the KV version 2 data path of vaultsecrets' entry.
func VaultSecretPath(mount, prefix, appID, key string) string {
	return mount + "/data/" + prefix + "/apps/" + appID + "/" + key
}

// JobEnvFolder is the folder, in an app's, where vaultsecrets keeps its
// jobs' sealed variables (vaultsecrets.JobEnvFolder). Its '-' keeps it
// apart from every secret's key, which is an environment variable name.
const JobEnvFolder = "job-env"

// VaultJobEnvPath is the path consul-template's secret function reads a
// workload's sealed variables from (Task.SealedEnv: a filled slot's
// credentials, which never go into a job): the KV version 2 data path of
// the entry the Nomad runtime has vaultsecrets write for the job (the
// deployment) and workload before it registers the job, one field per
// variable.
func VaultJobEnvPath(mount, prefix, appID, jobID, workload string) string {
	return mount + "/data/" + prefix + "/apps/" + appID + "/" + JobEnvFolder + "/" + jobID + "/" + workload
}

// SealedVars are the variables of a task's SealedEnv that its Env sets, by
// name: those the secrets template reads from the job's entry in Vault,
// and whose values the runtime writes there first.
func SealedVars(t scheduler.Task) []string {
	var out []string
	for name, sealed := range t.SealedEnv {
		if _, set := t.Env[name]; sealed && set {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ServiceJob is the data of the service template: the run job of one
// deployment, one group per workload, in start order.
type ServiceJob struct {
	ID          string
	Name        string
	Region      string
	Namespace   string
	NodePool    string
	Datacenters []string
	Meta        map[string]string
	Update      UpdateStrategy
	Groups      []Group
}

// The service job's policies: svc's, shaped after the process runtime.
var (
	// ServiceUpdate tracks a deployment's health by its checks; svc, not
	// Nomad, decides what to do with a failed one (no auto revert). A new
	// version of the app's job starts each changed group as a canary
	// beside the running allocation, which keeps serving until svc
	// promotes the canaries (the new release is recorded) or reverts the
	// job to the version it ran (the deploy failed); no auto promotion.
	ServiceUpdate = UpdateStrategy{
		Stagger:          30 * time.Second,
		MaxParallel:      1,
		HealthCheck:      "checks",
		MinHealthyTime:   5 * time.Second,
		HealthyDeadline:  3 * time.Minute,
		ProgressDeadline: 5 * time.Minute,
		Canary:           1,
	}
	// ServiceRestart is the process runtime's restart policy: three
	// restarts within two minutes, then the workload is dead.
	ServiceRestart = RestartPolicy{Attempts: 3, Interval: 2 * time.Minute, Delay: 5 * time.Second, Mode: "fail"}
	// ServiceReschedule turns rescheduling off: a dead workload stays dead
	// until svc's reconciler acts (it retries on its own backoff and gives
	// up). Nomad still replaces allocations lost with their node.
	ServiceReschedule = ReschedulePolicy{Attempts: 0, Unlimited: false}
)

// Task and check timings.
const (
	// shutdownDelay is how long a stopping workload keeps serving after it
	// left the service catalog, so the edge stops routing to it first.
	shutdownDelay = 2 * time.Second
	// killTimeout is the grace between SIGTERM and SIGKILL (the process
	// runtime's StopGrace).
	killTimeout = 10 * time.Second
	// Health checks: the process runtime's defaults, within Nomad's
	// minimum of one second.
	checkInterval = 10 * time.Second
	checkTimeout  = 2 * time.Second
	minCheck      = time.Second
	// vaultIdentityTTL is the default lifetime of a task's Vault identity.
	vaultIdentityTTL = time.Hour
)

// Where a task finds its files, relative to its directory.
const (
	// artifactDest is where the built tree lands; tasks run in it.
	artifactDest = "local/"
	// workDir is the working directory of a run task: the built tree.
	workDir = "${NOMAD_TASK_DIR}"
	// secretsEnvFile is the env file the secrets template renders.
	secretsEnvFile = "secrets/app.env"
	// venvDir is a Python build's virtualenv in the artifact (the process
	// runtime's).
	venvDir = ".venv"
	// defaultPath is the PATH of an exec task whose environment sets none
	// (an exec task gets none of the client's environment).
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// Meta keys.
const (
	MetaManagedBy    = "managed_by"
	MetaAppID        = "app_id"
	MetaAppSlug      = "app_slug"
	MetaSpecID       = "spec_id"
	MetaSpecRevision = "spec_revision"
	MetaDeploymentID = "deployment_id"
	MetaStartOrder   = "start_order"
	MetaWorkload     = "workload"
	MetaPrimary      = "primary"
	MetaBuildID      = "build_id"
	// MetaPreviousDeployment is the deployment the app's job ran before
	// this version (set by the Nomad runtime when it updates the job): its
	// allocations keep serving until the new version's canaries are
	// promoted.
	MetaPreviousDeployment = "previous_deployment_id"
	// ManagedBy is the value of MetaManagedBy on every job svc renders.
	ManagedBy = "svc"
)

// Service tags: every service carries TagSvc and the app's, slug's,
// deployment's and workload's tags; the primary also TagPrimary.
const (
	TagSvc        = "svc"
	TagPrimary    = "svc-primary"
	TagApp        = "svc-app="
	TagSlug       = "svc-slug="
	TagDeployment = "svc-deployment="
	TagWorkload   = "svc-workload="
)

var (
	// appIDRE is what an app ID must be to become a Vault path and a host
	// volume's name segment (vaultsecrets' rule).
	appIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// envNameRE is an environment variable's name (and a secret's key).
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// pathSegmentRE is a segment of a Vault mount or prefix
	// (vaultsecrets' rule).
	pathSegmentRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// ServiceData builds the service template's data from what the Nomad
// runtime knows. It is pure: the same input gives the same job. It fails
// with PLAN_CAPABILITY_UNSUPPORTED when the driver cannot give a workload
// what it needs (its isolation level, its volumes), and with a plain
// error when the input is incomplete.
func ServiceData(in ServiceInput) (ServiceJob, error) {
	fail := func(format string, args ...any) (ServiceJob, error) {
		return ServiceJob{}, fmt.Errorf("service job: "+format, args...)
	}
	if !appIDRE.MatchString(in.AppID) {
		return fail("%q is not an app ID", in.AppID)
	}
	slug := slugify(in.AppSlug)
	if slug == "" {
		return fail("the app slug %q has no letter or digit", in.AppSlug)
	}
	depID := in.DeploymentID
	if depID == "" {
		depID = in.Job.ID
	}
	if idPart(depID, "dep_") == "" {
		return fail("no deployment ID")
	}
	if len(in.Job.Workloads) == 0 {
		return fail("the job has no workload")
	}
	if err := checkDriver(in.Driver); err != nil {
		return ServiceJob{}, err
	}
	mode := in.NetworkMode
	switch mode {
	case "":
		mode = NetworkHost
	case NetworkHost, NetworkBridge:
	default:
		return fail("network mode %q is not %s or %s", mode, NetworkHost, NetworkBridge)
	}
	provider := in.ServiceProvider
	switch provider {
	case "":
		provider = ProviderConsul
	case ProviderConsul, ProviderNomad:
	default:
		return fail("service provider %q is not %s or %s", provider, ProviderConsul, ProviderNomad)
	}
	if in.CPUMHzPerCore < 0 {
		return fail("CPU MHz per core %d is negative", in.CPUMHzPerCore)
	}
	primary := in.Primary
	if primary == "" && len(in.Job.Workloads) == 1 {
		for name := range in.Job.Workloads {
			primary = name
		}
	}
	if _, ok := in.Job.Workloads[primary]; !ok {
		return fail("the primary workload %q is not one of the job's", primary)
	}
	vault, err := in.Vault.normalize()
	if err != nil {
		return ServiceJob{}, err
	}

	order := startOrder(in.Job)
	name := strings.TrimSpace(in.AppName)
	if name == "" {
		name = slug
	}
	job := ServiceJob{
		ID: AppJobID(slug), Name: name,
		Region: in.Region, Namespace: in.Namespace, NodePool: in.NodePool,
		Datacenters: datacenters(in.Datacenters),
		Meta: map[string]string{
			MetaManagedBy:    ManagedBy,
			MetaAppID:        in.AppID,
			MetaAppSlug:      in.AppSlug,
			MetaDeploymentID: depID,
			MetaStartOrder:   strings.Join(order, ","),
		},
		Update: ServiceUpdate,
	}
	if in.SpecID != "" {
		job.Meta[MetaSpecID] = in.SpecID
	}
	if in.SpecRevision != 0 {
		job.Meta[MetaSpecRevision] = strconv.FormatUint(in.SpecRevision, 10)
	}
	w := workloadRenderer{in: in, slug: slug, depID: depID, primary: primary, mode: mode, provider: provider, vault: vault}
	for _, name := range order {
		g, err := w.group(name, in.Job.Workloads[name])
		if err != nil {
			return ServiceJob{}, fmt.Errorf("service job: workload %s: %w", name, err)
		}
		job.Groups = append(job.Groups, g)
	}
	return job, nil
}

// startOrder is the job's start order with the workloads it leaves out
// after it, by name (the scheduler's rule). Nomad starts a job's groups
// together; the order is kept in the groups' order and the job's meta.
func startOrder(job scheduler.Job) []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range job.Order {
		if _, ok := job.Workloads[name]; ok && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(job.Workloads)) {
		if !seen[name] {
			out = append(out, name)
		}
	}
	return out
}

func datacenters(dcs []string) []string {
	if len(dcs) == 0 {
		return []string{"*"}
	}
	return slices.Clone(dcs)
}

func checkDriver(driver string) error {
	switch driver {
	case DriverRawExec, DriverExec:
		return nil
	}
	return fmt.Errorf("driver %q is not %s or %s", driver, DriverRawExec, DriverExec)
}

// driverIsolation is the isolation level a driver gives (policy levels).
func driverIsolation(driver string) string {
	if driver == DriverExec {
		return policy.IsolationSandbox
	}
	return policy.IsolationNone
}

// checkIsolation refuses a task that needs more isolation than the driver
// gives.
func checkIsolation(driver, want string) error {
	if want == "" || policy.AtLeast(driverIsolation(driver), want) {
		return nil
	}
	return errcode.New(errcode.PlanCapabilityUnsupp, "the Nomad driver %s runs at isolation %q, below the %q asked for", driver, driverIsolation(driver), want).
		WithDetail("driver", driver).WithDetail("isolation", want).
		WithRemedy("configure the Nomad runtime with the exec driver, or lower the isolation the app or host policy asks for")
}

func (v VaultSettings) normalize() (VaultSettings, error) {
	v.Mount = strings.Trim(strings.TrimSpace(v.Mount), "/")
	v.Prefix = strings.Trim(strings.TrimSpace(v.Prefix), "/")
	if v.Mount == "" {
		v.Mount = DefaultVaultMount
	}
	if v.Prefix == "" {
		v.Prefix = DefaultVaultPrefix
	}
	if !vaultPath(v.Mount) || !vaultPath(v.Prefix) {
		return v, fmt.Errorf("service job: the vault mount %q and prefix %q must be paths of letters, digits, '.', '_' and '-' segments", v.Mount, v.Prefix)
	}
	if v.IdentityTTL == 0 {
		v.IdentityTTL = vaultIdentityTTL
	}
	return v, nil
}

func vaultPath(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if !pathSegmentRE.MatchString(seg) || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// workloadRenderer makes the group of each workload of one job.
type workloadRenderer struct {
	in       ServiceInput
	slug     string
	depID    string
	primary  string
	mode     string
	provider string
	vault    VaultSettings
}

func (w workloadRenderer) group(name string, t scheduler.Task) (Group, error) {
	in := w.in
	if err := checkIsolation(in.Driver, t.Isolation); err != nil {
		return Group{}, err
	}
	src, ok := in.Artifacts[name]
	if !ok || src.URL == "" {
		return Group{}, fmt.Errorf("no artifact URL")
	}
	task := Task{
		Name:        name,
		Driver:      in.Driver,
		Artifacts:   []Artifact{artifact(src, artifactDest)},
		KillTimeout: killTimeout,
	}
	switch {
	case len(t.Command) > 0 && t.Artifact.Kind == spec.BuildPython && !strings.Contains(t.Command[0], "/"):
		// Nomad looks a bare program up on the client's PATH (raw_exec)
		// or in the chroot's bin directories (exec), never on the task's:
		// env finds python in the virtualenv, first on the task's PATH.
		task.Config = TaskConfig{Command: "/usr/bin/env", Args: hclLiterals(t.Command), WorkDir: workDir}
	case len(t.Command) > 0:
		task.Config = TaskConfig{Command: hclLiteral(t.Command[0]), Args: hclLiterals(t.Command[1:]), WorkDir: workDir}
	case t.Artifact.Kind == spec.BuildStatic && len(in.StaticCommand) > 0:
		task.Config = TaskConfig{Command: in.StaticCommand[0], Args: slices.Clone(in.StaticCommand[1:]), WorkDir: workDir}
	case t.Artifact.Kind == spec.BuildStatic:
		return Group{}, fmt.Errorf("a static workload needs the runtime's static command")
	default:
		return Group{}, fmt.Errorf("no command")
	}
	if task.Config.Args == nil {
		task.Config.Args = []string{}
	}

	task.Env = w.env(t)
	secrets, err := w.secrets(name, t)
	if err != nil {
		return Group{}, err
	}
	if secrets != nil {
		task.Templates = []Template{*secrets}
		task.Vault = &Vault{Role: w.vault.Role, Namespace: w.vault.Namespace, Cluster: w.vault.Cluster, ChangeMode: "noop", Env: false, DisableFile: true}
		if len(w.vault.Audience) > 0 {
			cluster := w.vault.Cluster
			if cluster == "" {
				cluster = "default"
			}
			task.Identities = []WorkloadIdentity{{Name: "vault_" + cluster, Audience: slices.Clone(w.vault.Audience), TTL: w.vault.IdentityTTL}}
		}
	}

	g := Group{
		Name:          name,
		Meta:          map[string]string{MetaWorkload: name},
		Restart:       ServiceRestart,
		Reschedule:    ServiceReschedule,
		ShutdownDelay: shutdownDelay,
	}
	if name == w.primary {
		g.Meta[MetaPrimary] = "true"
	}
	task.Resources, g.EphemeralDisk, task.LogConfig = resources(t.Resources, t.LogCapBytes, in.CPUMHzPerCore)

	if len(t.Mounts) > 0 {
		if in.Driver == DriverRawExec {
			return Group{}, errcode.New(errcode.PlanCapabilityUnsupp, "the Nomad driver raw_exec cannot mount volumes").
				WithDetail("driver", in.Driver).
				WithRemedy("configure the Nomad runtime with the exec driver to run apps with volumes")
		}
		seen := map[string]bool{}
		for _, m := range t.Mounts {
			if !seen[m.Volume] {
				seen[m.Volume] = true
				g.Volumes = append(g.Volumes, VolumeRequest{Name: m.Volume, Type: "host", Source: VolumeSource(in.AppID, m.Volume)})
			}
			dest := m.Path
			if !path.IsAbs(dest) { // relative to the working directory, as the process runtime has it
				dest = artifactDest + dest
			}
			task.VolumeMounts = append(task.VolumeMounts, VolumeMount{Volume: m.Volume, Destination: dest})
		}
		slices.SortStableFunc(g.Volumes, func(a, b VolumeRequest) int { return strings.Compare(a.Name, b.Name) })
	}

	if !t.NoPort {
		port := Port{Label: PortLabel}
		if w.mode == NetworkBridge {
			port.To = t.AppPort
		}
		net := &NetworkResource{Mode: w.mode}
		if t.Port > 0 {
			port.Value = t.Port
			net.ReservedPorts = []Port{port}
		} else {
			net.DynamicPorts = []Port{port}
		}
		g.Network = net
		g.Services = []ServiceRegistration{w.service(name, t)}
	}
	g.Task = task
	return g, nil
}

// env is the task's environment: the workload's, without the variables
// that carry secrets or a slot's credentials (a template delivers those),
// with PORT from the dynamic port, and for a Python build its virtualenv
// first on PATH.
func (w workloadRenderer) env(t scheduler.Task) map[string]string {
	env := make(map[string]string, len(t.Env)+2)
	for k, v := range t.Env {
		// Secrets and slot credentials arrive through the Vault template:
		// their values never go into a job.
		if _, secret := t.SecretEnv[k]; !secret && !t.SealedEnv[k] {
			env[k] = v
		}
	}
	if !t.NoPort {
		env["PORT"] = "${NOMAD_PORT_" + PortLabel + "}"
	}
	base, hasPath := env["PATH"]
	if !hasPath && w.in.Driver == DriverExec {
		base, hasPath = defaultPath, true
	}
	if t.Artifact.Kind == spec.BuildPython {
		if !hasPath {
			base = "${PATH}" // raw_exec: the client's PATH
		}
		env["VIRTUAL_ENV"] = workDir + "/" + venvDir
		env["PATH"] = workDir + "/" + venvDir + "/bin:" + base
	} else if hasPath {
		env["PATH"] = base
	}
	return env
}

// secrets is the template that reads the task's secrets and sealed
// variables from Vault into its environment, or nil when it has neither:
// a secret from its app's entry (field "value"), a sealed variable from
// the job's entry for the workload (its own field), which the runtime
// writes before it registers the job. Each line is NAME=<the value as a
// JSON string>, which Nomad's env file parser reads back exactly
// (newlines and quotes included).
func (w workloadRenderer) secrets(workload string, t scheduler.Task) (*Template, error) {
	sealed := SealedVars(t)
	if len(t.SecretEnv) == 0 && len(sealed) == 0 {
		return nil, nil
	}
	lines := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(t.SecretEnv)) {
		key := t.SecretEnv[name]
		if !envNameRE.MatchString(name) {
			return nil, fmt.Errorf("the secret variable %q is not an environment variable name", name)
		}
		if !envNameRE.MatchString(key) {
			return nil, fmt.Errorf("%q is not a secret's key", key)
		}
		lines[name] = fmt.Sprintf("%s={{ with secret %q }}{{ .Data.data.value | toJSON }}{{ end }}\n",
			name, VaultSecretPath(w.vault.Mount, w.vault.Prefix, w.in.AppID, key))
	}
	if len(sealed) > 0 {
		if !appIDRE.MatchString(w.depID) || !appIDRE.MatchString(workload) {
			return nil, fmt.Errorf("the deployment ID %q and workload %q must be letters, digits, '_' and '-' to name the Vault entry of its slot credentials", w.depID, workload)
		}
		path := VaultJobEnvPath(w.vault.Mount, w.vault.Prefix, w.in.AppID, w.depID, workload)
		for _, name := range sealed {
			if !envNameRE.MatchString(name) {
				return nil, fmt.Errorf("the slot variable %q is not an environment variable name", name)
			}
			if _, dup := lines[name]; dup {
				return nil, fmt.Errorf("the variable %s is both a secret and a slot credential", name)
			}
			lines[name] = fmt.Sprintf("%s={{ with secret %q }}{{ .Data.data.%s | toJSON }}{{ end }}\n", name, path, name)
		}
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(lines)) {
		b.WriteString(lines[name])
	}
	return &Template{
		EmbeddedTmpl: b.String(),
		DestPath:     secretsEnvFile,
		// svc deploys again when a bound secret changes; Nomad must not
		// restart the workload behind its back.
		ChangeMode:    "noop",
		Envvars:       true,
		Perms:         "0400",
		ErrMissingKey: true,
	}, nil
}

// service is the registration of a serving workload, with its check.
func (w workloadRenderer) service(name string, t scheduler.Task) ServiceRegistration {
	primary := name == w.primary
	s := ServiceRegistration{
		Name:      ServiceName(w.slug, name, primary),
		Provider:  w.provider,
		PortLabel: PortLabel,
		Tags:      []string{TagSvc, TagApp + w.in.AppID, TagSlug + w.slug, TagDeployment + w.depID, TagWorkload + name},
		Meta: map[string]string{
			MetaAppID:        w.in.AppID,
			MetaAppSlug:      w.in.AppSlug,
			MetaDeploymentID: w.depID,
			MetaWorkload:     name,
		},
	}
	if primary {
		s.Tags = append(s.Tags, TagPrimary)
		s.Meta[MetaPrimary] = "true"
	}
	check := ServiceCheck{Name: "health", Type: "tcp", PortLabel: PortLabel, Interval: checkInterval, Timeout: checkTimeout}
	if h := t.Health; h != nil {
		check.Type, check.Path = "http", h.Path
		if h.Interval > 0 {
			check.Interval = max(time.Duration(h.Interval), minCheck)
		}
		if h.Timeout > 0 {
			check.Timeout = max(time.Duration(h.Timeout), minCheck)
		}
	}
	s.Checks = []ServiceCheck{check}
	return s
}

// artifact is the artifact block that downloads src into dest.
func artifact(src ArtifactSource, dest string) Artifact {
	a := Artifact{GetterSource: src.URL, GetterMode: "any", RelativeDest: dest}
	if src.Archive != "" || src.Checksum != "" {
		a.GetterOptions = map[string]string{}
		if src.Archive != "" {
			a.GetterOptions["archive"] = src.Archive
		}
		if src.Checksum != "" {
			a.GetterOptions["checksum"] = src.Checksum
		}
	}
	return a
}

// resources converts a workload's limits: CPU and memory into the task's
// resources (nil when the spec sets neither: Nomad's defaults), disk into
// the group's ephemeral disk, and the log cap into two rotated files that
// fit below that disk, as Nomad requires.
func resources(r *spec.Resources, logCap int64, mhzPerCore int) (*Resources, *EphemeralDisk, *LogConfig) {
	var res *Resources
	var disk *EphemeralDisk
	if r != nil {
		if cpu, mem := CPUMHz(r.CPUMillis, mhzPerCore), MemoryMB(r.MemoryBytes); cpu > 0 || mem > 0 {
			res = &Resources{CPU: cpu, MemoryMB: mem}
		}
		if r.DiskBytes > 0 {
			disk = &EphemeralDisk{SizeMB: int(ceilDiv(r.DiskBytes, mib))}
		}
	}
	if logCap <= 0 {
		return res, disk, nil
	}
	logs := &LogConfig{MaxFiles: 2, MaxFileSizeMB: max(int(logCap/2/mib), 1)}
	diskMB := nomadDefaultDiskMB
	if disk != nil {
		diskMB = disk.SizeMB
	}
	if logs.MaxFiles*logs.MaxFileSizeMB >= diskMB {
		logs.MaxFileSizeMB = max((diskMB-1)/logs.MaxFiles, 1)
	}
	if logs.MaxFiles*logs.MaxFileSizeMB >= diskMB { // a disk of 1 or 2 MB
		disk = &EphemeralDisk{SizeMB: logs.MaxFiles*logs.MaxFileSizeMB + 1}
	}
	return res, disk, logs
}
