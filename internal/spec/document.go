package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Document is the spec document: the sole record of how an app runs
// (../shared/design/API.md, "The spec document"). Maps are keyed by name;
// JSON and YAML share the same field names.
type Document struct {
	// Env applies to every workload.
	Env       map[string]EnvValue `json:"env,omitempty"`
	Workloads map[string]Workload `json:"workloads"`
	Volumes   map[string]Volume   `json:"volumes,omitempty"`
	Slots     map[string]Slot     `json:"slots,omitempty"`
	// Runtime optionally names the runtime adapter (by ID or kind) and the
	// isolation the app needs; empty means the installation's primary
	// runtime at whatever isolation host policy allows.
	Runtime *Runtime `json:"runtime,omitempty"`
	// Deploy holds rules for deploys of this revision.
	Deploy *DeployRules `json:"deploy,omitempty"`
	// Lifecycle says what happens to the app when nobody uses it (absent:
	// nothing). It applies once the revision is deployed.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Lifecycle is what happens to an app that receives no request through
// the edge for IdleDays days (internal/idle): IdleAction, stop (the
// default) or delete, its owner warned a day before. IdleDays 0 never.
type Lifecycle struct {
	IdleDays   int    `json:"idle_days,omitempty"`
	IdleAction string `json:"idle_action,omitempty"`
}

// Idle actions.
const (
	IdleStop   = "stop"
	IdleDelete = "delete"
)

// MaxIdleDays caps Lifecycle.IdleDays (ten years).
const MaxIdleDays = 3650

// Idle returns the days after which an idle app is acted on (0: never)
// and the action, stop when the document does not say.
func (d Document) Idle() (int, string) {
	if d.Lifecycle == nil || d.Lifecycle.IdleDays <= 0 {
		return 0, ""
	}
	if d.Lifecycle.IdleAction == "" {
		return d.Lifecycle.IdleDays, IdleStop
	}
	return d.Lifecycle.IdleDays, d.Lifecycle.IdleAction
}

// DeployRules are rules for deploys of a revision.
type DeployRules struct {
	// Approvals is how many people other than the one who asked must
	// approve a deploy before it starts (0: none).
	Approvals int `json:"approvals,omitempty"`
}

// MaxApprovals caps DeployRules.Approvals.
const MaxApprovals = 10

// Build kinds.
const (
	BuildGo         = "go"
	BuildNode       = "node"
	BuildPython     = "python"
	BuildStatic     = "static"
	BuildDockerfile = "dockerfile"
	BuildCommand    = "command"
	BuildImage      = "image"
)

// BuildKinds lists the build kinds a spec may name.
func BuildKinds() []string {
	return []string{BuildGo, BuildNode, BuildPython, BuildStatic, BuildDockerfile, BuildCommand, BuildImage}
}

// Workload is one part of an app: how it is built and how it runs.
type Workload struct {
	// Primary marks the workload the edge routes to; exactly one is. Absent
	// (nil) on a document's only workload still means primary; an explicit
	// false never does (IsPrimary, Document.Primary). A pointer so that the
	// two can be told apart: documents stored when this was a bool with
	// omitempty never carry "primary": false, so they read as before (absent
	// or true) and encode to the same bytes.
	Primary   *bool               `json:"primary,omitempty"`
	Build     *Build              `json:"build,omitempty"`
	Run       Run                 `json:"run"`
	Env       map[string]EnvValue `json:"env,omitempty"`
	Mounts    []Mount             `json:"mounts,omitempty"`
	DependsOn []string            `json:"depends_on,omitempty"`
	Resources *Resources          `json:"resources,omitempty"`
}

// IsPrimary reports whether the workload says primary: true.
func (w Workload) IsPrimary() bool { return w.Primary != nil && *w.Primary }

// Bool returns a pointer to b, for Workload.Primary.
func Bool(b bool) *bool { return &b }

// Build says how a workload is built.
type Build struct {
	Kind string `json:"kind"`
	// Context is the directory of the source the build runs in; "." is the
	// source's root.
	Context string `json:"context,omitempty"`
	// Command builds (kinds go, node, python, command; optional for some).
	Command string `json:"command,omitempty"`
	// Dockerfile names the file of a dockerfile build.
	Dockerfile string `json:"dockerfile,omitempty"`
	// Image is the image an image build runs as it is.
	Image string `json:"image,omitempty"`
}

// Run says how a workload runs.
type Run struct {
	// Command is the program and its arguments (no shell).
	Command []string `json:"command,omitempty"`
	// Port is where the workload listens for HTTP; 0 for none (a worker).
	Port   int     `json:"port,omitempty"`
	Health *Health `json:"health,omitempty"`
}

// Health is a workload's HTTP health check.
type Health struct {
	Path     string   `json:"path"`
	Interval Duration `json:"interval,omitempty"`
	Timeout  Duration `json:"timeout,omitempty"`
}

// Mount puts a declared volume at a path inside a workload.
type Mount struct {
	Volume string `json:"volume"`
	Path   string `json:"path"`
}

// Resources are a workload's limits; 0 means none.
type Resources struct {
	CPUMillis   int64 `json:"cpu_millis,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	DiskBytes   int64 `json:"disk_bytes,omitempty"`
}

// Volume is storage kept between deploys.
type Volume struct {
	SizeBytes int64 `json:"size_bytes"`
}

// Slot is a dependency the app needs (a database, a cache), filled by
// provisioning, binding or a value.
type Slot struct {
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
}

// Runtime is what the app asks of its runtime adapter.
type Runtime struct {
	Adapter   string `json:"adapter,omitempty"`
	Isolation string `json:"isolation,omitempty"`
}

// EnvValue is an environment variable's value: a literal string, a field
// of a filled slot ({slot, field}), or a bound secret ({secret}).
type EnvValue struct {
	Value  string
	Slot   string
	Field  string
	Secret string
}

// Literal returns an EnvValue holding a literal.
func Literal(s string) EnvValue { return EnvValue{Value: s} }

// Kind says which of the three forms the value takes.
func (v EnvValue) Kind() string {
	switch {
	case v.Secret != "":
		return "secret"
	case v.Slot != "":
		return "slot"
	default:
		return "literal"
	}
}

// MarshalJSON writes a literal as a string and a reference as an object.
func (v EnvValue) MarshalJSON() ([]byte, error) {
	switch v.Kind() {
	case "secret":
		return json.Marshal(map[string]string{"secret": v.Secret})
	case "slot":
		return json.Marshal(map[string]string{"slot": v.Slot, "field": v.Field})
	default:
		return json.Marshal(v.Value)
	}
}

// UnmarshalJSON reads a string (numbers and booleans are taken as their
// text, as YAML writes `PORT: 8080`), {slot, field} or {secret}.
func (v *EnvValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*v = EnvValue{}
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &v.Value)
	case len(b) > 0 && b[0] == '{':
		var ref struct {
			Slot   string `json:"slot"`
			Field  string `json:"field"`
			Secret string `json:"secret"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			return fmt.Errorf("an environment reference is {slot, field} or {secret}: %w", err)
		}
		if (ref.Secret != "") == (ref.Slot != "") || (ref.Secret != "" && ref.Field != "") || (ref.Slot != "" && ref.Field == "") {
			return fmt.Errorf("an environment reference is {slot, field} or {secret}")
		}
		v.Slot, v.Field, v.Secret = ref.Slot, ref.Field, ref.Secret
		return nil
	case bytes.Equal(b, []byte("true")), bytes.Equal(b, []byte("false")):
		v.Value = string(b)
		return nil
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		v.Value = n.String()
		return nil
	}
	return fmt.Errorf("an environment value is a string, {slot, field} or {secret}")
}

// Duration is a time.Duration written as a Go duration string ("10s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"10s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as \"10s\"", s)
	}
	*d = Duration(v)
	return nil
}
