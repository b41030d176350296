package jobtemplates

import (
	"time"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// The samples are what Load renders with every template before it accepts
// a set: a job with each kind of part (a primary with a health check,
// secrets, a volume and limits; a worker without a port; a static site),
// and a build.

// SampleServiceInput is a service job's input with each kind of part.
func SampleServiceInput() ServiceInput {
	return ServiceInput{
		AppID: "app_01J0SAMPLE0000000000000000", AppSlug: "sample",
		SpecID: "spec_01J0SAMPLE0000000000000000", SpecRevision: 3,
		Job: scheduler.Job{
			ID: "dep_01J0SAMPLE0000000000000000", AppID: "app_01J0SAMPLE0000000000000000",
			Order: []string{"worker", "web", "site"},
			Workloads: map[string]scheduler.Task{
				"web": {
					Artifact:  scheduler.Artifact{Kind: spec.BuildGo},
					Command:   []string{"./app", "-listen", ":${PORT}"},
					Env:       map[string]string{"GREETING": "hello", "TOKEN": "not in the job"},
					SecretEnv: map[string]string{"TOKEN": "TOKEN"},
					AppPort:   8080,
					Health:    &spec.Health{Path: "/healthz", Interval: spec.Duration(5 * time.Second), Timeout: spec.Duration(time.Second)},
					Resources: &spec.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30},
					Mounts:    []scheduler.Mount{{Volume: "data", Path: "/data", SizeBytes: 1 << 30}},
				},
				"worker": {
					Artifact:    scheduler.Artifact{Kind: spec.BuildPython},
					Command:     []string{"python", "worker.py"},
					Env:         map[string]string{},
					NoPort:      true,
					LogCapBytes: 8 << 20,
				},
				"site": {Artifact: scheduler.Artifact{Kind: spec.BuildStatic}},
			},
		},
		Primary: "web",
		Artifacts: map[string]ArtifactSource{
			"web":    {URL: "https://svc.example/artifacts/web?sig=x", Archive: "tar.gz"},
			"worker": {URL: "https://svc.example/artifacts/worker?sig=x", Archive: "tar.gz"},
			"site":   {URL: "https://svc.example/artifacts/site?sig=x", Archive: "tar.gz"},
		},
		StaticCommand: []string{"/usr/local/bin/svc", "serve-static"},
		Driver:        DriverExec,
		Vault:         VaultSettings{Role: "svc-apps", Audience: []string{"vault.io"}},
	}
}

// SampleBuildInput is a build job's input.
func SampleBuildInput() BuildInput {
	return BuildInput{
		AppID: "app_01J0SAMPLE0000000000000000", AppSlug: "sample",
		BuildID: "dep_01J0SAMPLE0000000000000000-web", DeploymentID: "dep_01J0SAMPLE0000000000000000", Workload: "web",
		Build:     spec.Build{Kind: spec.BuildPython, Context: "app", Command: "pip install -r requirements.txt"},
		Source:    ArtifactSource{URL: "https://svc.example/sources/app?sig=x", Archive: "tar.gz"},
		UploadURL: "https://svc.example/artifacts/web?sig=y",
		Timeout:   15 * time.Minute,
		Driver:    DriverExec,
	}
}

// sampleData is the data Load renders the template name with.
func sampleData(name string) any {
	switch name {
	case ServiceTemplate:
		job, err := ServiceData(SampleServiceInput())
		if err != nil {
			panic("jobtemplates: the sample service input is refused: " + err.Error())
		}
		return job
	case BuildTemplate:
		job, err := BuildData(SampleBuildInput())
		if err != nil {
			panic("jobtemplates: the sample build input is refused: " + err.Error())
		}
		return job
	}
	return nil
}
