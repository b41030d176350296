package jobtemplates

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// The blocks below are the leaves of a job, written by the templates with
// json: their Go field names (or JSON tags) are the field names of Nomad's
// API types (github.com/hashicorp/nomad/api), which this package must not
// import. Durations are time.Duration, which JSON writes as nanoseconds,
// as Nomad's API types read them.

// UpdateStrategy is a service job's update block (api.UpdateStrategy).
type UpdateStrategy struct {
	Stagger          time.Duration
	MaxParallel      int
	HealthCheck      string
	MinHealthyTime   time.Duration
	HealthyDeadline  time.Duration
	ProgressDeadline time.Duration
	AutoRevert       bool
	AutoPromote      bool
	Canary           int
}

// RestartPolicy is a group's restart block (api.RestartPolicy).
type RestartPolicy struct {
	Attempts int
	Interval time.Duration
	Delay    time.Duration
	Mode     string
}

// ReschedulePolicy is a group's reschedule block (api.ReschedulePolicy).
// Attempts 0 without Unlimited turns rescheduling off.
type ReschedulePolicy struct {
	Attempts      int
	Interval      time.Duration `json:",omitempty"`
	Delay         time.Duration `json:",omitempty"`
	DelayFunction string        `json:",omitempty"`
	MaxDelay      time.Duration `json:",omitempty"`
	Unlimited     bool
}

// EphemeralDisk is a group's ephemeral_disk block (api.EphemeralDisk).
type EphemeralDisk struct {
	SizeMB int
}

// NetworkResource is a group's network block (api.NetworkResource).
type NetworkResource struct {
	Mode          string
	DynamicPorts  []Port `json:",omitempty"`
	ReservedPorts []Port `json:",omitempty"`
}

// Port is a port of a network block (api.Port): Value is a static port,
// To the port inside the group's network namespace (bridge mode).
type Port struct {
	Label string
	Value int `json:",omitempty"`
	To    int `json:",omitempty"`
}

// VolumeRequest is a group's volume block (api.VolumeRequest).
type VolumeRequest struct {
	Name     string
	Type     string
	Source   string
	ReadOnly bool
}

// ServiceRegistration is a group's service block (api.Service): how a
// workload registers in Consul (or Nomad's service discovery).
type ServiceRegistration struct {
	Name      string
	Provider  string
	PortLabel string
	Tags      []string
	Meta      map[string]string
	Checks    []ServiceCheck
}

// ServiceCheck is a service's check block (api.ServiceCheck).
type ServiceCheck struct {
	Name      string
	Type      string
	Path      string `json:",omitempty"`
	PortLabel string
	Interval  time.Duration
	Timeout   time.Duration
}

// TaskConfig is the driver configuration of an exec or raw_exec task.
// Nomad evaluates its strings as HCL templates (NOMAD_TASK_DIR and the
// like); Command and Args hold the app's values escaped so that they reach
// the program as they are (see hclLiteral), WorkDir an interpolation.
type TaskConfig struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	WorkDir string   `json:"work_dir,omitempty"`
}

// Artifact is a task's artifact block (api.TaskArtifact).
type Artifact struct {
	GetterSource  string
	GetterOptions map[string]string `json:",omitempty"`
	GetterMode    string
	RelativeDest  string
}

// Template is a task's template block (api.Template).
type Template struct {
	EmbeddedTmpl  string
	DestPath      string
	ChangeMode    string
	Envvars       bool
	Perms         string
	ErrMissingKey bool
}

// Vault is a task's vault block (api.Vault).
type Vault struct {
	Role        string `json:",omitempty"`
	Namespace   string `json:",omitempty"`
	Cluster     string `json:",omitempty"`
	ChangeMode  string
	Env         bool
	DisableFile bool
}

// WorkloadIdentity is one of a task's identity blocks
// (api.WorkloadIdentity).
type WorkloadIdentity struct {
	Name     string
	Audience []string
	TTL      time.Duration `json:",omitempty"`
}

// Resources is a task's resources block (api.Resources); 0 leaves Nomad's
// default.
type Resources struct {
	CPU      int `json:",omitempty"`
	MemoryMB int `json:",omitempty"`
}

// VolumeMount is a task's volume_mount block (api.VolumeMount).
type VolumeMount struct {
	Volume      string
	Destination string
	ReadOnly    bool
}

// LogConfig is a task's logs block (api.LogConfig).
type LogConfig struct {
	MaxFiles      int
	MaxFileSizeMB int
}

// Task is the one task of a group.
type Task struct {
	Name   string
	Driver string
	Config TaskConfig
	// Env never holds a secret's value: secrets arrive through Templates.
	Env          map[string]string
	Artifacts    []Artifact
	Templates    []Template
	Vault        *Vault
	Identities   []WorkloadIdentity
	Resources    *Resources
	VolumeMounts []VolumeMount
	LogConfig    *LogConfig
	KillTimeout  time.Duration
}

// Group is one task group: one workload (or the build) and its task.
type Group struct {
	Name          string
	Meta          map[string]string
	Restart       RestartPolicy
	Reschedule    ReschedulePolicy
	ShutdownDelay time.Duration
	// MaxRunDuration bounds a batch group's run (a build's timeout); 0 for
	// none.
	MaxRunDuration time.Duration
	EphemeralDisk  *EphemeralDisk
	// Network is nil for a workload that serves nothing.
	Network  *NetworkResource
	Volumes  []VolumeRequest
	Services []ServiceRegistration
	Task     Task
}

// Drivers a job may use.
const (
	DriverRawExec = "raw_exec"
	DriverExec    = "exec"
)

// Network modes of a group.
const (
	NetworkHost   = "host"
	NetworkBridge = "bridge"
)

// Service providers.
const (
	ProviderConsul = "consul"
	ProviderNomad  = "nomad"
)

// PortLabel is the label of the port every serving workload gets; the
// task finds its number in NOMAD_PORT_http, and svc gives it as PORT.
const PortLabel = "http"

// DefaultCPUMHzPerCore converts a spec's cpu_millis into Nomad's CPU
// megahertz when the runtime does not say what a core of its nodes is
// worth: a 2 GHz core, so 1000 millis (one core) asks for 2000 MHz.
const DefaultCPUMHzPerCore = 2000

// nomadDefaultDiskMB is Nomad's ephemeral disk size when a group sets none;
// a task's logs must fit below it.
const nomadDefaultDiskMB = 300

// Nomad's minimums for a task's resources.
const (
	minCPUMHz   = 1
	minMemoryMB = 10
)

const mib = 1 << 20

// CPUMHz converts thousandths of a core into Nomad's CPU megahertz, rounded
// up, with mhzPerCore megahertz to a core (0 means
// DefaultCPUMHzPerCore). 0 millis is 0: Nomad's default.
func CPUMHz(millis int64, mhzPerCore int) int {
	if millis <= 0 {
		return 0
	}
	if mhzPerCore <= 0 {
		mhzPerCore = DefaultCPUMHzPerCore
	}
	return max(int(ceilDiv(millis*int64(mhzPerCore), 1000)), minCPUMHz)
}

// CPUMillis converts Nomad's CPU megahertz (as allocation stats report
// them) back into thousandths of a core, with CPUMHz's factor.
func CPUMillis(mhz float64, mhzPerCore int) int64 {
	if mhzPerCore <= 0 {
		mhzPerCore = DefaultCPUMHzPerCore
	}
	return int64(mhz*1000/float64(mhzPerCore) + 0.5)
}

// MemoryMB converts bytes into Nomad's memory megabytes (MiB), rounded up
// and at least Nomad's minimum; 0 bytes is 0: Nomad's default.
func MemoryMB(bytes int64) int {
	if bytes <= 0 {
		return 0
	}
	return max(int(ceilDiv(bytes, mib)), minMemoryMB)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// VolumeSource is the name of the Nomad host volume holding an app's
// volume: the same for every job of the app, so a new deployment mounts
// the data of the previous one. The Nomad runtime creates (or an operator
// declares) host volumes under this name.
func VolumeSource(appID, volume string) string {
	return "svc-" + appID + "-" + volume
}

// AppJobID is the ID of the Nomad job running an app: svc-<slug>. One
// job per app, updated in place by every deployment (each a new version
// of it, tagged with the deployment's ID), so that Nomad's job history,
// `nomad job revert` and its UI follow the app. A rename of the slug
// starts a new job; the old one is stopped like a previous deployment's.
func AppJobID(slug string) string {
	return "svc-" + slugify(slug)
}

// DeploymentJobID is the ID (and name) of the Nomad job an earlier svc
// ran each deployment as: svc-<slug>-<deployment>, where <deployment> is
// the deployment ID without its "dep_" prefix, in lower case. svc no
// longer registers such jobs; the Nomad runtime still finds them (by their
// meta) and stops them once the app's own job serves.
func DeploymentJobID(slug, deploymentID string) string {
	return "svc-" + slugify(slug) + "-" + idPart(deploymentID, "dep_")
}

// BuildJobID is the ID (and name) of the Nomad batch job running a build:
// svc-<slug>-build-<build ID>, the build ID without a "dep_" prefix, in
// lower case.
func BuildJobID(slug, buildID string) string {
	return "svc-" + slugify(slug) + "-build-" + idPart(buildID, "dep_")
}

// idPart is an ID made fit for a Nomad job ID: its prefix dropped, lower
// case, anything but letters, digits, '-' and '_' turned into '-'.
func idPart(id, prefix string) string {
	id = strings.ToLower(strings.TrimPrefix(id, prefix))
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, id)
}

// slugify turns s into lower-case ASCII letters and digits with single
// inner hyphens (an app slug is already one, and stays as it is).
func slugify(s string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
			continue
		}
		hyphen = true
	}
	return b.String()
}

// maxServiceName is Nomad's limit on a service's name (an RFC 1123 label).
const maxServiceName = 63

// ServiceName is the Consul (or Nomad) service a workload registers as:
// svc-<slug> for the app's primary workload, svc-<slug>-<workload> for
// another serving one. A workload name that is not already a DNS label is
// made one and followed by a hash of it; a name longer than Nomad's 63
// characters is cut and ends in a hash of the whole, so names stay unique.
func ServiceName(slug, workload string, primary bool) string {
	name := "svc-" + slugify(slug)
	if !primary {
		w := slugify(workload)
		if w != workload { // made fit: keep it apart from the workload named w
			w = strings.TrimPrefix(w+"-"+shortHash(workload), "-")
		}
		name += "-" + w
	}
	if len(name) <= maxServiceName {
		return name
	}
	return strings.TrimRight(name[:maxServiceName-9], "-") + "-" + shortHash(name)
}

// shortHash is 8 hex digits of s's SHA-256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// hclLiteral escapes s for a string of a task's driver configuration,
// which Nomad evaluates as an HCL template: "${" and "%{" would start an
// interpolation or a directive; "$${" and "%%{" are their literal forms.
func hclLiteral(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	s = strings.ReplaceAll(s, "${", "$${")
	return strings.ReplaceAll(s, "%{", "%%{")
}

func hclLiterals(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = hclLiteral(s)
	}
	return out
}
