// Package scheduler owns the deploy path and the leader-only reconciler.
//
// It declares the runtime adapter interface (runtime.go), shaped after
// Nomad's model: a Job per app revision, a Task per workload, JobStatus
// with each workload's running state, restarts, exit code and health, and
// the optional capabilities LogReader, LogFollower, UsageReader,
// DiskReader, HostReader, Execer and WriteDropper (among others). scheduler/process (the embedded default) and scheduler/nomad
// implement it (LogFollower: the process runtime only, without polling;
// Nomad's logs API can follow, not done yet); scheduler/runtimetest is the
// contract suite they pass.
//
// Over it the Service keeps, in the replicated store:
//
//   - deployments (deployments.go): queued, waiting_approval, building,
//     starting, then succeeded, failed, rejected or superseded; created by
//     Create after the plan's checks, capacity and the app's host port,
//     with the source they ship (the app's as recorded then; a rollback's
//     and a secret rotation's: the release they ship again);
//   - releases (releases.go): what a deployment shipped, immutable: its
//     revision, its source (commit or archive digest, and checkout) and
//     each workload's build, keyed by BuildKey (the source and the build
//     section, the runtime, the build's isolation and egress; never env or
//     run); the builds and checkouts of each app's KeepBuilds most recent
//     releases stay (keptDeployments: Prune, SyncArtifacts,
//     KeptCheckouts); Rollback ships the last other release exactly,
//     starting its kept artifacts;
//   - the deploy worker (pipeline.go, RunDeploys, leader only): gives each
//     workload its artifact (a kept build with its key started again, or a
//     build from the deployment's own checkout), resolves the environment
//     (spec values, filled slots, bound secrets; never stored), runs the
//     job in dependency order, and on success switches the app's release
//     and stops the previous job; a failure leaves the previous release
//     serving; every phase is a line of the server's log with the app,
//     deployment and request IDs;
//   - the release each app runs (table releases), which the reconciler
//     (reconciler.go, Reconcile, leader only) converges on desired state:
//     start, stop, restart in place, health (running/degraded; restarting
//     while its job is brought back), retries on the configured backoff
//     ending in failed (app.gave_up), which stays until a deploy, and a
//     deploy again when a bound secret rotates. What to do is decided by
//     pure functions (decide.go, table-tested); the shell reconciles apps
//     concurrently (Config.Workers at once, never one app twice at once),
//     bounds every runtime call by the start timeout (a hung runtime holds
//     only its own app), logs every action with the app, the deployment
//     and why, and reports passes, durations and actions to an Observer
//     (internal/telemetry's /metrics);
//   - disk limits (disk.go, CheckDisk, leader only): every
//     Config.DiskInterval a reading of every running app whose workloads
//     have resources.disk_bytes (a workload's own disk, not its volumes);
//     near the limit (DiskNearPercent) app.disk_warning once per crossing,
//     over it a warning saying so, over it at two checks in a row the app
//     stopped and meant to stay so (app.disk_stopped, the system's audited
//     app.stop), its job stopped and its writes dropped; decided by
//     decideDisk (pure, table-tested) from what the leader remembers of
//     each app; a reading of GET …/usage on the leader warns, never stops;
//   - control.go and capacity.go: start/stop/restart, status, usage, logs,
//     exec, capacity and host ports.
//
// The app's state and desired state are the apps package's: the deploy
// worker and the reconciler report what happened (apps.TransitionOps: a
// deploy began or ended, the workloads were observed so) and start and stop
// set the desired state (apps.DesiredOps; the disk limits' stop both at
// once, TransitionOps with Desired), each inside the scheduler's own one
// write; this package never writes the apps table itself. Anything that
// talks to a runtime happens before or after a write, never inside its
// build.
//
// It must not import any adapter, HTTP framework or vendor client;
// adapters import it for its types, and cmd/svc hands it the loaded
// runtimes through the Runtimes interface. A deploy's live output is kept
// in memory on the node running it (loghub.go) and in the store once it
// ends.
package scheduler
