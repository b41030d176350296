// Package jobtemplates owns the Nomad job templates: Nomad's API JSON job
// format written as Go text templates, a service job for the workloads of
// one deployment, as a version of the app's one job, svc-<slug>
// (templates/service.json.tmpl), and a batch job for one
// build (templates/build.json.tmpl), embedded in the binary and replaceable
// from an operator's directory (Load). It also owns the data the templates
// render: ServiceData and BuildData turn what the scheduler hands a runtime
// (a scheduler.Job, a build request) and the cluster's settings into it;
// the names of jobs, services and host volumes; how resources, health
// checks, secrets, volumes and restart and update policies map onto
// Nomad's blocks.
//
// Rendering is pure and deterministic: data in, JSON out (Set.Render), no
// clock, no randomness, no I/O. Every value goes through the json template
// function, so nothing an app's spec says can leave its JSON string; an
// app's command is escaped from Nomad's HCL interpolation; the value of a
// variable the scheduler marks as secret (Task.SecretEnv) or as a slot's
// credential (Task.SealedEnv) is never part of a job: the workload reads
// it from Vault through a template block, logged in with its workload
// identity, a secret from its app's entry, a slot's credential from the
// entry the runtime writes for the job and workload before registering it
// (VaultJobEnvPath).
//
// It must not import Nomad's API or client, nor talk to Nomad or Vault:
// scheduler/nomad decodes the JSON into the API's Job and registers it.
package jobtemplates
