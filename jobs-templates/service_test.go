package jobtemplates

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/vaultsecrets"
)

// TestSlotCredentialsReadFromVault: a variable marked as a slot's
// credential is left out of the job; the secrets template reads it from
// the job's entry for the workload in Vault, in a field of its own name.
// A sealed variable the task does not set is not read.
func TestSlotCredentialsReadFromVault(t *testing.T) {
	const canary = "slot-credential-canary-91c4 \"quoted\"\nline two"
	quoted, _ := json.Marshal(canary)
	for _, fx := range fixtures(t) {
		in := serviceInput(fx)
		for name, task := range in.Job.Workloads {
			task.Env = cloneMap(task.Env)
			task.Env["DB_PASSWORD"] = canary
			sealed := map[string]bool{"DB_PASSWORD": true, "UNSET_SLOT_VAR": true}
			for k, v := range task.SealedEnv {
				sealed[k] = v
			}
			task.SealedEnv = sealed
			in.Job.Workloads[name] = task
		}
		got, err := Default().RenderService(in)
		if err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
		for _, form := range [][]byte{[]byte(canary), quoted[1 : len(quoted)-1], []byte("slot-credential-canary")} {
			if bytes.Contains(got, form) {
				t.Errorf("%s: the rendered job holds a slot credential (%q)", fx.name, form)
			}
		}
		job := decodeJob(t, got)
		for _, g := range job.TaskGroups {
			task := g.Tasks[0]
			for v := range in.Job.Workloads[g.Name].SealedEnv {
				if _, ok := task.Env[v]; ok {
					t.Errorf("%s/%s: the slot variable %s is in the job's env", fx.name, g.Name, v)
				}
			}
			if len(task.Templates) != 1 || task.Vault == nil {
				t.Fatalf("%s/%s: %d templates, vault %v; want the secrets template and a vault block", fx.name, g.Name, len(task.Templates), task.Vault)
			}
			tmpl := task.Templates[0].EmbeddedTmpl
			path := "secret/data/svc/apps/" + testAppID + "/job-env/" + testDepID + "/" + g.Name
			for _, v := range SealedVars(in.Job.Workloads[g.Name]) {
				line := v + `={{ with secret "` + path + `" }}{{ .Data.data.` + v + ` | toJSON }}{{ end }}` + "\n"
				if !strings.Contains(tmpl, line) {
					t.Errorf("%s/%s: the template does not read %s from the job's entry:\n%s", fx.name, g.Name, v, tmpl)
				}
			}
			if strings.Contains(tmpl, "UNSET_SLOT_VAR") {
				t.Errorf("%s/%s: the template reads a sealed variable the task does not set:\n%s", fx.name, g.Name, tmpl)
			}
		}
	}
}

// TestSlotCredentialsRefusedWhereNoEntryCanBeNamed: a deployment ID or
// workload name that is not one Vault path segment, and a variable that
// is both a secret and a slot credential, fail the render.
func TestSlotCredentialsRefusedWhereNoEntryCanBeNamed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(in *ServiceInput)
	}{
		{"deployment ID with a slash", func(in *ServiceInput) { in.DeploymentID = "dep_a/b" }},
		{"deployment ID with a dot", func(in *ServiceInput) { in.DeploymentID = "dep_a.b" }},
		{"secret and slot credential", func(in *ServiceInput) {
			task := in.Job.Workloads["web"]
			task.SecretEnv = map[string]string{"DB_URL": "DB_URL"}
			in.Job.Workloads["web"] = task
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := SampleServiceInput()
			task := in.Job.Workloads["web"]
			task.Env = cloneMap(task.Env)
			task.Env["DB_URL"] = "postgres://u:p@db/x"
			task.SealedEnv = map[string]bool{"DB_URL": true}
			in.Job.Workloads["web"] = task
			if _, err := ServiceData(in); err != nil {
				t.Fatalf("the sample with a slot credential: %v", err)
			}
			tc.change(&in)
			_, err := ServiceData(in)
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			if strings.Contains(err.Error(), "u:p@db") {
				t.Errorf("the error shows the value: %v", err)
			}
		})
	}
}

// TestJobEnvPathMatchesVaultsecrets: the entry the template reads a slot's
// credential from is in the folder vaultsecrets writes, which its policy
// covers.
func TestJobEnvPathMatchesVaultsecrets(t *testing.T) {
	if JobEnvFolder != vaultsecrets.JobEnvFolder {
		t.Fatalf("JobEnvFolder = %q; vaultsecrets writes %q", JobEnvFolder, vaultsecrets.JobEnvFolder)
	}
	got := VaultJobEnvPath("kv", "teams/svc", "app_x", "dep_y", "web")
	if want := "kv/data/teams/svc/apps/app_x/job-env/dep_y/web"; got != want {
		t.Errorf("VaultJobEnvPath = %s, want %s", got, want)
	}
	if !strings.Contains(vaultsecrets.VaultPolicy("kv", "teams/svc"), `path "kv/data/teams/svc/apps/*"`) {
		t.Errorf("vaultsecrets' policy does not cover %s", got)
	}
}

// TestSecretValuesNeverRendered puts secret values (canaries, some with
// characters JSON escapes) into the tasks' environment, as the scheduler
// does, and checks that no rendered job holds them in any form, and that
// each secret variable is read from Vault instead.
func TestSecretValuesNeverRendered(t *testing.T) {
	canaries := []string{"canary-plain-7f3a9", "canary \"quoted\"\nmultiline</script>{{ .x }}", "canary-ünïcode-☃"}
	for _, fx := range fixtures(t) {
		in := serviceInput(fx)
		for name, task := range in.Job.Workloads {
			task.Env = cloneMap(task.Env)
			task.SecretEnv = cloneMap(task.SecretEnv)
			for i, c := range canaries {
				v := "CANARY_" + string(rune('A'+i))
				task.Env[v], task.SecretEnv[v] = c, "CANARY_KEY"
			}
			in.Job.Workloads[name] = task
		}
		got, err := Default().RenderService(in)
		if err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
		for _, c := range append(canaries, secretValue("SESSION_SECRET"), secretValue("STRIPE_API_KEY")) {
			quoted, _ := json.Marshal(c)
			for _, form := range [][]byte{[]byte(c), quoted[1 : len(quoted)-1]} {
				if bytes.Contains(got, form) {
					t.Errorf("%s: the rendered job holds the secret value %q", fx.name, form)
				}
			}
		}
		job := decodeJob(t, got)
		for _, g := range job.TaskGroups {
			task := g.Tasks[0]
			want := in.Job.Workloads[g.Name].SecretEnv
			for v := range want {
				if _, ok := task.Env[v]; ok {
					t.Errorf("%s/%s: the secret variable %s is in the job's env", fx.name, g.Name, v)
				}
			}
			if len(task.Templates) != 1 || task.Vault == nil {
				t.Fatalf("%s/%s: %d templates, vault %v; want the secrets template and a vault block", fx.name, g.Name, len(task.Templates), task.Vault)
			}
			tmpl := task.Templates[0]
			if !tmpl.Envvars || tmpl.DestPath != "secrets/app.env" {
				t.Errorf("%s/%s: template %+v; want an env template in secrets/", fx.name, g.Name, tmpl)
			}
			for v, key := range want {
				line := v + `={{ with secret "secret/data/svc/apps/` + testAppID + "/" + key + `" }}{{ .Data.data.value | toJSON }}{{ end }}` + "\n"
				if !strings.Contains(tmpl.EmbeddedTmpl, line) {
					t.Errorf("%s/%s: the template does not read %s from Vault:\n%s", fx.name, g.Name, v, tmpl.EmbeddedTmpl)
				}
			}
		}
	}
}

// TestVaultPathMatchesVaultsecrets checks that the path the template reads
// is where the vault secrets adapter writes (its defaults and the policy
// its credentials need).
func TestVaultPathMatchesVaultsecrets(t *testing.T) {
	if DefaultVaultMount != vaultsecrets.DefaultVaultMount || DefaultVaultPrefix != vaultsecrets.DefaultVaultPrefix {
		t.Fatalf("defaults %s/%s; vaultsecrets has %s/%s", DefaultVaultMount, DefaultVaultPrefix, vaultsecrets.DefaultVaultMount, vaultsecrets.DefaultVaultPrefix)
	}
	for _, mp := range [][2]string{{"", ""}, {"kv", "teams/platform/svc"}} {
		in := SampleServiceInput()
		in.Vault.Mount, in.Vault.Prefix = mp[0], mp[1]
		job, err := ServiceData(in)
		if err != nil {
			t.Fatal(err)
		}
		mount, prefix := orDefault(mp[0], DefaultVaultMount), orDefault(mp[1], DefaultVaultPrefix)
		glob := `path "` + mount + "/data/" + prefix + `/apps/*"`
		if !strings.Contains(vaultsecrets.VaultPolicy(mp[0], mp[1]), glob) {
			t.Fatalf("vaultsecrets' policy does not cover %s", glob)
		}
		data := job.Groups[slices.IndexFunc(job.Groups, func(g Group) bool { return g.Name == "web" })].Task.Templates[0].EmbeddedTmpl
		want := `secret "` + mount + "/data/" + prefix + "/apps/" + in.AppID + `/TOKEN"`
		if !strings.Contains(data, want) {
			t.Errorf("mount %q prefix %q: template\n%s\ndoes not read %s", mp[0], mp[1], data, want)
		}
	}
}

// hostile are values that would break out of a JSON string, a Go template
// or an HCL template if they were written as they are.
var hostile = []string{
	`"quoted" and \backslashed\`,
	"new\nline\r\tand\x00nul",
	"{{ .ID }} and }} and {{",
	"</script><script>alert(1)</script>",
	"${NOMAD_TASK_DIR} %{ if true }x%{ endif } $${ %%{",
	`"},"Driver":"docker","x":{"`,
	"ünïcödé ☃ \u2028\u2029",
}

// TestHostileValuesStayInTheirStrings renders a job whose names, env,
// commands, health path, meta and URLs hold hostile values, and reads each
// value back from the decoded job.
func TestHostileValuesStayInTheirStrings(t *testing.T) {
	for i, h := range hostile {
		in := SampleServiceInput()
		in.AppSlug = "slug " + h
		in.SpecID = h
		in.DeploymentID = "dep_" + h
		workload := "w" + h
		web := in.Job.Workloads["web"]
		web.Env = map[string]string{"GREETING": h, "KEY " + h: h}
		web.Command = []string{"./app" + h, h, "--flag=" + h}
		web.Health = &spec.Health{Path: "/health?q=" + h}
		web.Mounts = []scheduler.Mount{{Volume: "data" + h, Path: "/data/" + h}}
		in.Job.Workloads[workload] = web
		delete(in.Job.Workloads, "web")
		in.Job.Order = []string{"worker", workload, "site"}
		in.Primary = workload
		in.Artifacts[workload] = ArtifactSource{URL: "https://svc.example/a?x=" + h, Archive: h, Checksum: h}
		in.StaticCommand = []string{"/bin/serve", h}
		in.Vault.Role = h

		got, err := Default().RenderService(in)
		if err != nil {
			t.Fatalf("hostile[%d]: %v", i, err)
		}
		job := decodeJob(t, got)
		if job.Meta[MetaAppSlug] != in.AppSlug || job.Meta[MetaSpecID] != h || job.Meta[MetaDeploymentID] != in.DeploymentID {
			t.Errorf("hostile[%d]: meta %q", i, job.Meta)
		}
		if strings.ContainsAny(job.ID, " \"\n{}$%<>") {
			t.Errorf("hostile[%d]: job ID %q is not fit for Nomad", i, job.ID)
		}
		var g *nomadGroup
		for k := range job.TaskGroups {
			if job.TaskGroups[k].Name == workload {
				g = &job.TaskGroups[k]
			}
		}
		if g == nil {
			t.Fatalf("hostile[%d]: no group named %q in %v", i, workload, job.TaskGroups)
		}
		task := g.Tasks[0]
		if task.Name != workload || task.Env["GREETING"] != h || task.Env["KEY "+h] != h {
			t.Errorf("hostile[%d]: task %q env %q", i, task.Name, task.Env)
		}
		gotCmd := append([]string{hclUnescape(task.Config.Command)}, mapSlice(task.Config.Args, hclUnescape)...)
		if diff := cmp.Diff(web.Command, gotCmd); diff != "" {
			t.Errorf("hostile[%d]: command (-want +got, after Nomad's HCL evaluation):\n%s", i, diff)
		}
		if c := g.Services[0].Checks[0]; c.Path != web.Health.Path {
			t.Errorf("hostile[%d]: check path %q", i, c.Path)
		}
		name := g.Services[0].Name
		if len(name) > 63 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Errorf("hostile[%d]: service name %q is not an RFC 1123 label", i, name)
		}
		if v := g.Volumes["data"+h]; v.Name != "data"+h || task.VolumeMounts[0].Destination != "/data/"+h {
			t.Errorf("hostile[%d]: volume %+v mount %+v", i, v, task.VolumeMounts)
		}
		if a := task.Artifacts[0]; a.GetterSource != in.Artifacts[workload].URL || a.GetterOptions["archive"] != h || a.GetterOptions["checksum"] != h {
			t.Errorf("hostile[%d]: artifact %+v", i, a)
		}
		if task.Vault.Role != h {
			t.Errorf("hostile[%d]: vault role %q", i, task.Vault.Role)
		}
		for _, sg := range job.TaskGroups {
			if sg.Name == "site" && sg.Tasks[0].Config.Args[0] != h {
				t.Errorf("hostile[%d]: static command args %q", i, sg.Tasks[0].Config.Args)
			}
		}
	}
}

// TestHostileValuesInBuilds does the same for the build job: the build
// command reaches sh as it is, the context stays a path under the source.
func TestHostileValuesInBuilds(t *testing.T) {
	for i, h := range hostile {
		in := SampleBuildInput()
		in.AppSlug, in.Workload, in.DeploymentID = h, h, h
		in.BuildID = "dep_x-" + h
		in.Build = spec.Build{Kind: spec.BuildCommand, Context: "sub/" + strings.ReplaceAll(h, "/", "_"), Command: "echo " + h}
		in.Source.URL = "https://svc.example/s?x=" + h
		in.UploadURL = "https://svc.example/u?x=" + h
		in.Env = map[string]string{"X": h}
		in.AppSlug = "a" + h
		got, err := Default().RenderBuild(in)
		if err != nil {
			t.Fatalf("hostile[%d]: %v", i, err)
		}
		job := decodeJob(t, got)
		task := job.TaskGroups[0].Tasks[0]
		if hclUnescape(task.Config.Args[3]) != in.Build.Command {
			t.Errorf("hostile[%d]: build command %q", i, task.Config.Args[3])
		}
		if want := "${NOMAD_TASK_DIR}/src/" + hclLiteral(in.Build.Context); task.Config.WorkDir != want {
			t.Errorf("hostile[%d]: work_dir %q; want %q", i, task.Config.WorkDir, want)
		}
		if task.Env["SVC_UPLOAD_URL"] != in.UploadURL || task.Env["X"] != h || task.Artifacts[0].GetterSource != in.Source.URL {
			t.Errorf("hostile[%d]: env %q artifact %+v", i, task.Env, task.Artifacts[0])
		}
		if job.Meta[MetaWorkload] != h || job.Meta[MetaDeploymentID] != h || job.Meta[MetaBuildID] != in.BuildID {
			t.Errorf("hostile[%d]: meta %q", i, job.Meta)
		}
	}
}

func TestServiceDataRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*ServiceInput)
		code   errcode.Code // "" for a plain error
		want   string
	}{
		{"app ID not a path segment", func(in *ServiceInput) { in.AppID = "app/../x" }, "", "not an app ID"},
		{"slug without letters", func(in *ServiceInput) { in.AppSlug = "--" }, "", "slug"},
		{"no deployment", func(in *ServiceInput) { in.Job.ID, in.DeploymentID = "", "" }, "", "no deployment ID"},
		{"no workloads", func(in *ServiceInput) { in.Job.Workloads = nil }, "", "no workload"},
		{"unknown driver", func(in *ServiceInput) { in.Driver = "docker" }, "", "driver"},
		{"no driver", func(in *ServiceInput) { in.Driver = "" }, "", "driver"},
		{"unknown network mode", func(in *ServiceInput) { in.NetworkMode = "cni/x" }, "", "network mode"},
		{"unknown provider", func(in *ServiceInput) { in.ServiceProvider = "etcd" }, "", "service provider"},
		{"unknown primary", func(in *ServiceInput) { in.Primary = "nope" }, "", "primary"},
		{"no primary among several", func(in *ServiceInput) { in.Primary = "" }, "", "primary"},
		{"no artifact", func(in *ServiceInput) { delete(in.Artifacts, "worker") }, "", "workload worker: no artifact URL"},
		{"static without the static command", func(in *ServiceInput) { in.StaticCommand = nil }, "", "workload site: a static workload needs"},
		{"no command", func(in *ServiceInput) { setTask(in, "worker", func(t *scheduler.Task) { t.Command = nil }) }, "", "workload worker: no command"},
		{"bad vault mount", func(in *ServiceInput) { in.Vault.Mount = "se cret" }, "", "vault mount"},
		{"vault prefix escaping", func(in *ServiceInput) { in.Vault.Prefix = "svc/../other" }, "", "vault mount"},
		{"secret variable not a name", func(in *ServiceInput) {
			setTask(in, "web", func(t *scheduler.Task) { t.SecretEnv = map[string]string{`X" }}{{ env "HOME`: "TOKEN"} })
		}, "", "not an environment variable name"},
		{"secret key not a key", func(in *ServiceInput) {
			setTask(in, "web", func(t *scheduler.Task) { t.SecretEnv = map[string]string{"TOKEN": `T" }}`} })
		}, "", "not a secret's key"},
		{"volumes with raw_exec", func(in *ServiceInput) { in.Driver = DriverRawExec }, errcode.PlanCapabilityUnsupp, "cannot mount volumes"},
		{"isolation above exec", func(in *ServiceInput) {
			setTask(in, "worker", func(t *scheduler.Task) { t.Isolation = "container" })
		}, errcode.PlanCapabilityUnsupp, "isolation"},
		{"sandbox with raw_exec", func(in *ServiceInput) {
			in.Driver = DriverRawExec
			setTask(in, "web", func(t *scheduler.Task) { t.Mounts = nil })
			setTask(in, "worker", func(t *scheduler.Task) { t.Isolation = "sandbox" })
		}, errcode.PlanCapabilityUnsupp, "isolation"},
		{"unknown isolation", func(in *ServiceInput) {
			setTask(in, "worker", func(t *scheduler.Task) { t.Isolation = "strong" })
		}, errcode.PlanCapabilityUnsupp, "isolation"},
		{"negative MHz", func(in *ServiceInput) { in.CPUMHzPerCore = -1 }, "", "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := SampleServiceInput()
			tt.change(&in)
			_, err := ServiceData(in)
			if err == nil {
				t.Fatalf("ServiceData = nil error; want one with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
			if got := codeOf(err); got != tt.code {
				t.Errorf("code %q; want %q", got, tt.code)
			}
		})
	}
}

func TestBuildDataRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*BuildInput)
		code   errcode.Code
		want   string
	}{
		{"app ID", func(in *BuildInput) { in.AppID = "" }, "", "not an app ID"},
		{"slug", func(in *BuildInput) { in.AppSlug = "" }, "", "slug"},
		{"no build ID", func(in *BuildInput) { in.BuildID = "dep_" }, "", "no build ID"},
		{"driver", func(in *BuildInput) { in.Driver = "qemu" }, "", "driver"},
		{"dockerfile", func(in *BuildInput) { in.Build.Kind = spec.BuildDockerfile }, errcode.PlanCapabilityUnsupp, "dockerfile"},
		{"image", func(in *BuildInput) { in.Build.Kind = spec.BuildImage }, errcode.PlanCapabilityUnsupp, "image"},
		{"no command", func(in *BuildInput) { in.Build.Command = " " }, errcode.BuildFailed, "needs a command"},
		{"context outside", func(in *BuildInput) { in.Build.Context = "../x" }, "", "outside the source"},
		{"context absolute", func(in *BuildInput) { in.Build.Context = "/etc" }, "", "outside the source"},
		{"context climbing", func(in *BuildInput) { in.Build.Context = "a/../../b" }, "", "outside the source"},
		{"no source", func(in *BuildInput) { in.Source.URL = "" }, "", "no source URL"},
		{"no upload", func(in *BuildInput) { in.UploadURL = "" }, "", "no upload URL"},
		{"isolation", func(in *BuildInput) { in.Driver, in.Isolation = DriverRawExec, "sandbox" }, errcode.PlanCapabilityUnsupp, "isolation"},
		{"negative timeout", func(in *BuildInput) { in.Timeout = -time.Second }, "", "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := SampleBuildInput()
			tt.change(&in)
			_, err := BuildData(in)
			if err == nil {
				t.Fatalf("BuildData = nil error; want one with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
			if got := codeOf(err); got != tt.code {
				t.Errorf("code %q; want %q", got, tt.code)
			}
		})
	}
}

func TestBuildJob(t *testing.T) {
	in := SampleBuildInput()
	in.Build = spec.Build{Kind: spec.BuildStatic, Context: "app/"}
	in.Upload = []string{"/opt/svc/bin/svc", "upload", "${NOMAD_ALLOC_ID}"}
	in.Env = map[string]string{"GOPROXY": "off", "HOME": "/build-home"}
	in.Resources = &spec.Resources{MemoryBytes: 3 << 30}
	job, err := BuildData(in)
	if err != nil {
		t.Fatal(err)
	}
	task := job.Group.Task
	wantArgs := []string{"-c", buildScript, "svc-build", "", "/opt/svc/bin/svc", "upload", "${NOMAD_ALLOC_ID}"}
	if diff := cmp.Diff(wantArgs, task.Config.Args); diff != "" {
		t.Errorf("args (-want +got): a static build runs no command, then the upload as given:\n%s", diff)
	}
	if task.Config.WorkDir != "${NOMAD_TASK_DIR}/src/app" || task.Artifacts[0].RelativeDest != "local/src" {
		t.Errorf("work_dir %q, artifact into %q", task.Config.WorkDir, task.Artifacts[0].RelativeDest)
	}
	if task.Env["GOPROXY"] != "off" || task.Env["HOME"] != "/build-home" {
		t.Errorf("env %q: the input's env is added last", task.Env)
	}
	if *task.Resources != (Resources{MemoryMB: 3072}) {
		t.Errorf("resources %+v", *task.Resources)
	}
	if job.Group.MaxRunDuration != 15*time.Minute || job.Group.Restart.Attempts != 0 || job.Group.Reschedule.Attempts != 0 || job.Group.Reschedule.Unlimited {
		t.Errorf("group %+v: a build runs once, within its timeout", job.Group)
	}
	if job.ID != "svc-sample-build-01j0sample0000000000000000-web" {
		t.Errorf("ID %q", job.ID)
	}
}

func TestGroupsInStartOrder(t *testing.T) {
	in := SampleServiceInput()
	in.Job.Order = []string{"site", "ghost", "site"} // an unknown name and a repeat are dropped; the rest by name
	job, err := ServiceData(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range job.Groups {
		got = append(got, g.Name)
	}
	if want := []string{"site", "web", "worker"}; !slices.Equal(got, want) {
		t.Errorf("groups %q; want %q", got, want)
	}
	if job.Meta[MetaStartOrder] != "site,web,worker" {
		t.Errorf("start_order %q", job.Meta[MetaStartOrder])
	}
}

func TestNetworkAndServices(t *testing.T) {
	for _, tt := range []struct {
		name     string
		change   func(*ServiceInput)
		network  NetworkResource
		provider string
	}{
		{"host", func(*ServiceInput) {}, NetworkResource{Mode: "host", DynamicPorts: []Port{{Label: "http"}}}, "consul"},
		{"bridge maps to run.port", func(in *ServiceInput) { in.NetworkMode = NetworkBridge }, NetworkResource{Mode: "bridge", DynamicPorts: []Port{{Label: "http", To: 8080}}}, "consul"},
		{"static host port", func(in *ServiceInput) { setTask(in, "web", func(t *scheduler.Task) { t.Port = 20001 }) },
			NetworkResource{Mode: "host", ReservedPorts: []Port{{Label: "http", Value: 20001}}}, "consul"},
		{"nomad services", func(in *ServiceInput) { in.ServiceProvider = ProviderNomad }, NetworkResource{Mode: "host", DynamicPorts: []Port{{Label: "http"}}}, "nomad"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := SampleServiceInput()
			tt.change(&in)
			job, err := ServiceData(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range job.Groups {
				switch g.Name {
				case "worker":
					if g.Network != nil || len(g.Services) > 0 || g.Task.Env["PORT"] != "" {
						t.Errorf("worker: network %+v services %+v env %q; a workload without a port gets none", g.Network, g.Services, g.Task.Env)
					}
				case "web":
					if diff := cmp.Diff(tt.network, *g.Network); diff != "" {
						t.Errorf("web network (-want +got):\n%s", diff)
					}
					s := g.Services[0]
					wantTags := []string{"svc", "svc-app=" + in.AppID, "svc-slug=sample", "svc-deployment=" + in.Job.ID, "svc-workload=web", "svc-primary"}
					if s.Name != "svc-sample" || s.Provider != tt.provider || !slices.Equal(s.Tags, wantTags) {
						t.Errorf("web service %q %q %q", s.Name, s.Provider, s.Tags)
					}
					if g.Task.Env["PORT"] != "${NOMAD_PORT_http}" {
						t.Errorf("web PORT %q", g.Task.Env["PORT"])
					}
				case "site":
					s := g.Services[0]
					if s.Name != "svc-sample-site" || slices.Contains(s.Tags, TagPrimary) || s.Checks[0].Type != "tcp" {
						t.Errorf("site service %+v: a serving workload other than the primary, checked by TCP", s)
					}
				}
			}
		})
	}
}

func TestHealthCheck(t *testing.T) {
	for _, tt := range []struct {
		health *spec.Health
		want   ServiceCheck
	}{
		{nil, ServiceCheck{Name: "health", Type: "tcp", PortLabel: "http", Interval: 10 * time.Second, Timeout: 2 * time.Second}},
		{&spec.Health{Path: "/ok"}, ServiceCheck{Name: "health", Type: "http", Path: "/ok", PortLabel: "http", Interval: 10 * time.Second, Timeout: 2 * time.Second}},
		{&spec.Health{Path: "/ok", Interval: spec.Duration(30 * time.Second), Timeout: spec.Duration(5 * time.Second)},
			ServiceCheck{Name: "health", Type: "http", Path: "/ok", PortLabel: "http", Interval: 30 * time.Second, Timeout: 5 * time.Second}},
		{&spec.Health{Path: "/ok", Interval: spec.Duration(100 * time.Millisecond), Timeout: spec.Duration(10 * time.Millisecond)},
			ServiceCheck{Name: "health", Type: "http", Path: "/ok", PortLabel: "http", Interval: time.Second, Timeout: time.Second}},
	} {
		in := SampleServiceInput()
		setTask(&in, "web", func(t *scheduler.Task) { t.Health = tt.health })
		job, err := ServiceData(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range job.Groups {
			if g.Name == "web" {
				if diff := cmp.Diff(tt.want, g.Services[0].Checks[0]); diff != "" {
					t.Errorf("health %+v (-want +got):\n%s", tt.health, diff)
				}
			}
		}
	}
}

func TestResources(t *testing.T) {
	for _, tt := range []struct {
		name   string
		res    *spec.Resources
		logCap int64
		perCPU int
		want   *Resources
		disk   *EphemeralDisk
		logs   *LogConfig
	}{
		{"none", nil, 0, 0, nil, nil, nil},
		{"zeros are Nomad's defaults", &spec.Resources{}, 0, 0, nil, nil, nil},
		{"cpu at 2 GHz a core", &spec.Resources{CPUMillis: 250}, 0, 0, &Resources{CPU: 500}, nil, nil},
		{"cpu at the nodes' MHz, rounded up", &spec.Resources{CPUMillis: 333}, 0, 2400, &Resources{CPU: 800}, nil, nil},
		{"a sliver of cpu is 1 MHz", &spec.Resources{CPUMillis: 1}, 0, 100, &Resources{CPU: 1}, nil, nil},
		{"memory rounded up to MiB", &spec.Resources{MemoryBytes: 100<<20 + 1}, 0, 0, &Resources{MemoryMB: 101}, nil, nil},
		{"memory at least 10 MB", &spec.Resources{MemoryBytes: 1}, 0, 0, &Resources{MemoryMB: 10}, nil, nil},
		{"disk", &spec.Resources{DiskBytes: 5<<30 + 1}, 0, 0, nil, &EphemeralDisk{SizeMB: 5121}, nil},
		{"log cap in two files", nil, 40 << 20, 0, nil, nil, &LogConfig{MaxFiles: 2, MaxFileSizeMB: 20}},
		{"small log cap is 1 MB files", nil, 4096, 0, nil, nil, &LogConfig{MaxFiles: 2, MaxFileSizeMB: 1}},
		{"logs below Nomad's default disk", nil, 1 << 30, 0, nil, nil, &LogConfig{MaxFiles: 2, MaxFileSizeMB: 149}},
		{"logs below the declared disk", &spec.Resources{DiskBytes: 100 << 20}, 1 << 30, 0, nil, &EphemeralDisk{SizeMB: 100}, &LogConfig{MaxFiles: 2, MaxFileSizeMB: 49}},
		{"a tiny disk grows to hold the logs", &spec.Resources{DiskBytes: 1}, 8 << 20, 0, nil, &EphemeralDisk{SizeMB: 3}, &LogConfig{MaxFiles: 2, MaxFileSizeMB: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, disk, logs := resources(tt.res, tt.logCap, tt.perCPU)
			if diff := cmp.Diff(tt.want, res); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.disk, disk); diff != "" {
				t.Errorf("disk (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.logs, logs); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
			if logs != nil {
				size := nomadDefaultDiskMB
				if disk != nil {
					size = disk.SizeMB
				}
				if logs.MaxFiles*logs.MaxFileSizeMB >= size {
					t.Errorf("logs of %d MB do not fit below a disk of %d MB (Nomad refuses the job)", logs.MaxFiles*logs.MaxFileSizeMB, size)
				}
			}
		})
	}
	if got := CPUMillis(float64(CPUMHz(750, 3000)), 3000); got != 750 {
		t.Errorf("CPUMillis(CPUMHz(750)) = %d", got)
	}
}

func TestEnv(t *testing.T) {
	for _, tt := range []struct {
		name   string
		driver string
		kind   string
		env    map[string]string
		noPort bool
		want   map[string]string
	}{
		{"raw_exec keeps the client's PATH", DriverRawExec, spec.BuildGo, map[string]string{"A": "1"}, false,
			map[string]string{"A": "1", "PORT": "${NOMAD_PORT_http}"}},
		{"exec gets a PATH", DriverExec, spec.BuildGo, map[string]string{"A": "1"}, false,
			map[string]string{"A": "1", "PORT": "${NOMAD_PORT_http}", "PATH": defaultPath}},
		{"the spec's PATH wins", DriverExec, spec.BuildGo, map[string]string{"PATH": "/opt/bin"}, true,
			map[string]string{"PATH": "/opt/bin"}},
		{"the runtime's PORT wins", DriverRawExec, spec.BuildGo, map[string]string{"PORT": "8080"}, false,
			map[string]string{"PORT": "${NOMAD_PORT_http}"}},
		{"python on raw_exec", DriverRawExec, spec.BuildPython, nil, true,
			map[string]string{"VIRTUAL_ENV": "${NOMAD_TASK_DIR}/.venv", "PATH": "${NOMAD_TASK_DIR}/.venv/bin:${PATH}"}},
		{"python on exec", DriverExec, spec.BuildPython, map[string]string{"PATH": "/opt/bin"}, true,
			map[string]string{"VIRTUAL_ENV": "${NOMAD_TASK_DIR}/.venv", "PATH": "${NOMAD_TASK_DIR}/.venv/bin:/opt/bin"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := workloadRenderer{in: ServiceInput{Driver: tt.driver}}
			got := w.env(scheduler.Task{Artifact: scheduler.Artifact{Kind: tt.kind}, Env: tt.env, NoPort: tt.noPort})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 40)
	for _, tt := range []struct {
		got, want string
	}{
		{AppJobID("go-hello"), "svc-go-hello"},
		{AppJobID("Go Hello!"), "svc-go-hello"},
		{DeploymentJobID("go-hello", "dep_01JB2Z9K7M5X3T8R2Q6W4Y1N0P"), "svc-go-hello-01jb2z9k7m5x3t8r2q6w4y1n0p"},
		{DeploymentJobID("Go Hello!", "dep_x y"), "svc-go-hello-x-y"},
		{BuildJobID("go-hello", "dep_01JB2Z9K7M5X3T8R2Q6W4Y1N0P-web"), "svc-go-hello-build-01jb2z9k7m5x3t8r2q6w4y1n0p-web"},
		{ServiceName("go-hello", "web", true), "svc-go-hello"},
		{ServiceName("go-hello", "api", false), "svc-go-hello-api"},
		{ServiceName("go-hello", "a--b", false), "svc-go-hello-a-b-" + shortHash("a--b")},
		{ServiceName("go-hello", "{{", false), "svc-go-hello-" + shortHash("{{")},
		{ServiceName(long, "worker", true), "svc-" + long},
		{ServiceName(long, strings.Repeat("w", 31), false), "svc-" + long + "-" + strings.Repeat("w", 9) + "-" + shortHash("svc-"+long+"-"+strings.Repeat("w", 31))},
		{VolumeSource("app_X", "data"), "svc-app_X-data"},
		{hclLiteral("a ${b} %{c} $${d}"), "a $${b} %%{c} $$${d}"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q; want %q", tt.got, tt.want)
		}
	}
	if a, b := ServiceName(long, strings.Repeat("w", 31), false), ServiceName(long, strings.Repeat("w", 30)+"x", false); a == b || len(a) != 63 || len(b) != 63 {
		t.Errorf("long service names %q and %q: want distinct names of 63 characters", a, b)
	}
}

// TestRenderIsDeterministic renders the same input again and again: maps
// are written in key order, nothing depends on the clock or chance.
func TestRenderIsDeterministic(t *testing.T) {
	first, err := Default().RenderService(SampleServiceInput())
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, err := Default().RenderService(SampleServiceInput())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("two renders of one input differ:\n%s\n%s", first, again)
		}
	}
}

func setTask(in *ServiceInput, name string, f func(*scheduler.Task)) {
	t := in.Job.Workloads[name]
	f(&t)
	in.Job.Workloads[name] = t
}

func codeOf(err error) errcode.Code {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapSlice(ss []string, f func(string) string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestPythonRunsThroughEnv: Nomad looks a bare program up outside the
// task's PATH, so a Python workload's bare command goes through env, which
// finds the virtualenv's interpreter first on PATH; other commands run as
// they are.
func TestPythonRunsThroughEnv(t *testing.T) {
	for _, tt := range []struct {
		kind    string
		command []string
		want    TaskConfig
	}{
		{spec.BuildPython, []string{"python", "app.py"}, TaskConfig{Command: "/usr/bin/env", Args: []string{"python", "app.py"}, WorkDir: "${NOMAD_TASK_DIR}"}},
		{spec.BuildPython, []string{"gunicorn", "-b", "0.0.0.0:${PORT}"}, TaskConfig{Command: "/usr/bin/env", Args: []string{"gunicorn", "-b", "0.0.0.0:$${PORT}"}, WorkDir: "${NOMAD_TASK_DIR}"}},
		{spec.BuildPython, []string{"./run.sh"}, TaskConfig{Command: "./run.sh", Args: []string{}, WorkDir: "${NOMAD_TASK_DIR}"}},
		{spec.BuildGo, []string{"app"}, TaskConfig{Command: "app", Args: []string{}, WorkDir: "${NOMAD_TASK_DIR}"}},
	} {
		in := SampleServiceInput()
		setTask(&in, "worker", func(t *scheduler.Task) { t.Artifact.Kind, t.Command = tt.kind, tt.command })
		job, err := ServiceData(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range job.Groups {
			if g.Name == "worker" {
				if diff := cmp.Diff(tt.want, g.Task.Config); diff != "" {
					t.Errorf("%s %q (-want +got):\n%s", tt.kind, tt.command, diff)
				}
			}
		}
	}
}
