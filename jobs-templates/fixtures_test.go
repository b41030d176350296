package jobtemplates

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/detect"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// A fixture is an app's spec document and how the tests run it.
type fixture struct {
	name   string
	doc    spec.Document
	driver string
}

// The apps of the fixtures.
const (
	testAppID  = "app_01JB2Z8Q4V0000000000000000"
	testDepID  = "dep_01JB2Z9K7M5X3T8R2Q6W4Y1N0P"
	testSpecID = "spec_01JB2Z9A1B2C3D4E5F6G7H8J9K"
	// testLogDisk is the host policy's max_log_disk_bytes the fixtures'
	// jobs split among their workloads.
	testLogDisk = 64 << 20
)

// samples are the sample apps of the repository.
var samples = []string{"go-hello", "node-hello", "python-hello", "static-hello"}

// fixtures returns the spec document detection proposes for every sample
// (run with raw_exec, as on a dev agent) and the hand-written rich spec
// (run with exec: it mounts a volume).
func fixtures(t testing.TB) []fixture {
	t.Helper()
	var out []fixture
	for _, name := range samples {
		r := detect.Detect(os.DirFS(filepath.Join("..", "samples", name)), nil, detect.Runtime{})
		if r.Winner == nil {
			t.Fatalf("detection proposes nothing for samples/%s", name)
		}
		if len(r.Questions) > 0 {
			t.Fatalf("detection asks %v for samples/%s; the samples deploy with nothing to answer", r.Questions, name)
		}
		if err := spec.Validate(r.Winner.Proposal); err != nil {
			t.Fatalf("samples/%s: the proposal is not valid: %v", name, err)
		}
		out = append(out, fixture{name: name, doc: r.Winner.Proposal, driver: DriverRawExec})
	}
	b, err := os.ReadFile(filepath.Join("testdata", "rich.spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := spec.Parse(b)
	if err != nil {
		t.Fatalf("testdata/rich.spec.yaml: %v", err)
	}
	if err := spec.Validate(d); err != nil {
		t.Fatalf("testdata/rich.spec.yaml: %v", err)
	}
	return append(out, fixture{name: "rich", doc: d, driver: DriverExec})
}

// secretValue is the value the fixtures' secret key resolves to: a canary
// no rendered job may contain.
func secretValue(key string) string { return "canary-" + key + "-do-not-render" }

// slotValue is what a slot's field resolves to.
func slotValue(slot, field string) string {
	return fmt.Sprintf("postgres://%s.internal:5432/app?field=%s", slot, field)
}

// jobFromSpec makes the runtime job of a document as the scheduler's deploy
// path does (scheduler.Service.makeJob): environment resolved (slots and
// secrets, the secrets named in SecretEnv, the slots' secret fields, which
// a fill keeps sealed, in SealedEnv), the start order, the log cap split
// among the workloads, mounts with their volumes' sizes.
func jobFromSpec(d spec.Document, depID string) scheduler.Job {
	job := scheduler.Job{ID: depID, AppID: testAppID, Workloads: map[string]scheduler.Task{}, Order: plan.StartOrder(d), Primary: d.Primary()}
	logCap := max(int64(testLogDisk)/int64(len(d.Workloads)), 4096)
	for name, w := range d.Workloads {
		env, secretEnv, sealedEnv := map[string]string{}, map[string]string{}, map[string]bool{}
		for _, layer := range []map[string]spec.EnvValue{d.Env, w.Env} {
			for k, v := range layer {
				delete(secretEnv, k)
				delete(sealedEnv, k)
				switch {
				case v.Secret != "":
					env[k], secretEnv[k] = secretValue(v.Secret), v.Secret
				case v.Slot != "":
					env[k] = slotValue(v.Slot, v.Field)
					if slots.IsSecret(d.Slots[v.Slot].Type, v.Field) {
						sealedEnv[k] = true
					}
				default:
					env[k] = v.Value
				}
			}
		}
		kind := spec.BuildCommand
		if w.Build != nil {
			kind = w.Build.Kind
		}
		t := scheduler.Task{
			Artifact: scheduler.Artifact{ID: depID + "-" + name, Kind: kind, Dir: "/var/lib/svc/builds/" + depID + "-" + name},
			Command:  w.Run.Command, Env: env, SecretEnv: secretEnv, SealedEnv: sealedEnv, AppPort: w.Run.Port, Health: w.Run.Health,
			Resources: w.Resources, LogCapBytes: logCap,
		}
		if w.Run.Port == 0 && w.Run.Health == nil && name != job.Primary && kind != spec.BuildStatic {
			t.NoPort = true
		}
		for _, m := range w.Mounts {
			t.Mounts = append(t.Mounts, scheduler.Mount{Volume: m.Volume, Path: m.Path, SizeBytes: d.Volumes[m.Volume].SizeBytes})
		}
		job.Workloads[name] = t
	}
	return job
}

// artifactURL is the signed URL the fixtures' tasks download from.
func artifactURL(depID, workload string) string {
	return "https://svc.test:8443/api/v1/internal/artifacts/" + depID + "-" + workload + ".tar.gz?expires=1767225600&sig=AbC-123_x"
}

// serviceInput is the service job's input for a fixture.
func serviceInput(fx fixture) ServiceInput {
	job := jobFromSpec(fx.doc, testDepID)
	arts := map[string]ArtifactSource{}
	for name := range job.Workloads {
		arts[name] = ArtifactSource{URL: artifactURL(testDepID, name), Archive: "tar.gz"}
	}
	return ServiceInput{
		AppID: testAppID, AppSlug: fx.name, SpecID: testSpecID, SpecRevision: 4,
		Job: job, Primary: fx.doc.Primary(), Artifacts: arts,
		StaticCommand: []string{"/usr/local/bin/svc", "static", "--dir", ".", "--port", "${NOMAD_PORT_http}"},
		Datacenters:   []string{"dc1"},
		Driver:        fx.driver,
		Vault:         VaultSettings{Role: "svc-apps"},
	}
}

// buildInput is the build job's input for a fixture's workload.
func buildInput(fx fixture, workload string) BuildInput {
	b := spec.Build{Kind: spec.BuildCommand, Context: "."}
	if w := fx.doc.Workloads[workload]; w.Build != nil {
		b = *w.Build
	}
	id := testDepID + "-" + workload
	return BuildInput{
		AppID: testAppID, AppSlug: fx.name, BuildID: id, DeploymentID: testDepID, Workload: workload,
		Build:       b,
		Source:      ArtifactSource{URL: "https://svc.test:8443/api/v1/internal/sources/" + testAppID + ".tar.gz?expires=1767225600&sig=SrC-456", Archive: "tar.gz"},
		UploadURL:   artifactURL(testDepID, workload),
		Timeout:     15 * time.Minute,
		Datacenters: []string{"dc1"},
		Driver:      fx.driver,
	}
}

func sortedWorkloads(d spec.Document) []string { return slices.Sorted(maps.Keys(d.Workloads)) }

// nomadJob mirrors the part of the Nomad API's Job (api.Job) the templates
// write, with the API's field names; tests decode rendered jobs into it
// with unknown fields refused, so a misspelt field fails here and not at
// Nomad. (This package must not import Nomad's API.)
type nomadJob struct {
	ID, Name, Type, Region, Namespace, NodePool string
	Datacenters                                 []string
	Meta                                        map[string]string
	Update                                      *UpdateStrategy
	TaskGroups                                  []nomadGroup
}

type nomadGroup struct {
	Name             string
	Count            int
	Meta             map[string]string
	RestartPolicy    RestartPolicy
	ReschedulePolicy ReschedulePolicy
	ShutdownDelay    time.Duration
	MaxRunDuration   time.Duration
	EphemeralDisk    *EphemeralDisk
	Networks         []NetworkResource
	Volumes          map[string]VolumeRequest
	Services         []ServiceRegistration
	Tasks            []nomadTask
}

type nomadTask struct {
	Name         string
	Driver       string
	Config       TaskConfig
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

// decodeJob decodes a rendered job strictly.
func decodeJob(t testing.TB, b []byte) nomadJob {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var j nomadJob
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("decode the rendered job: %v\n%s", err, b)
	}
	return j
}

// hclUnescape undoes hclLiteral: what Nomad's HCL evaluation makes of an
// escaped string.
func hclUnescape(s string) string {
	s = strings.ReplaceAll(s, "$${", "${")
	return strings.ReplaceAll(s, "%%{", "%{")
}
