// Package nomad is the Nomad runtime adapter: it implements the
// scheduler's whole runtime interface (builds, runs, status, restarts,
// logs, exec, usage, the host's size) over Nomad's HTTP API, and is the
// only package that imports Nomad's API client (fakenomad, its test fake,
// uses the API's types).
//
// Builds run as Nomad batch jobs rendered from jobtemplates' build
// template (Config.Builds "nomad", the default): the app's source is
// packed as .tar.gz into an artifact store (Artifacts, under the work
// dir), the job's artifact block downloads it at a short-lived
// HMAC-signed URL, the task builds in the build context and then PUTs the
// built tree to a signed upload URL of the same store, which checks it
// (a gzipped tar whose entries stay inside the tree, within a size cap)
// and keeps the first upload. Artifacts' handler, mounted by cmd/svc at
// ArtifactPath, answers both; every URL is signed for one method and one
// artifact. The build's wait is a blocking query on its allocations; its
// output reaches the deploy log when it ends; its exit code becomes
// BUILD_FAILED and its time limit BUILD_TIMEOUT; the job is purged
// afterwards. Builds "controller" runs them on the svc server with an
// injected scheduler.Builder (the process runtime's) and packs the result
// into the same store.
//
// A scheduler job becomes a version of the app's one Nomad service job,
// svc-<slug> (Name: the app's name), rendered by jobtemplates (one group
// per workload, in start order; its task downloads the artifact into
// local/ and runs there; secrets are read from Vault by a template block
// with workload identity, so no secret value is ever in a job, in Nomad's
// state or in a log). The scheduler's job IDs stay per deployment;
// appjob.go maps them onto the app's job: a deployment is the job's
// current version (meta deployment_id), or its outgoing one (meta
// previous_deployment_id) while the new version's canaries run beside
// its allocations, or gone. Each version is tagged with its deployment's
// ID (Nomad's version tags), so `nomad job history`, `nomad job revert`
// and the UI follow the app. Stopping the outgoing deployment promotes
// the canaries; stopping the current one while its canaries wait reverts
// the job to the version before (the failed deploy's canaries go, the
// running allocations were never touched); otherwise Stop deregisters the
// job. Restarting, discarding or purging an older deployment never
// touches the app's job (RemoveJobLogs only deletes its slot
// credentials). Jobs of an earlier svc, svc-<slug>-<deployment>, are
// found by their meta as their deployment's current job: the next deploy
// registers the app's job beside one, and the scheduler stops it once the
// new job serves, then purges it with the old deployment's logs.
//
// A filled slot's credentials (Task.SealedEnv, such as a database URL
// with its password) reach the workload the same way: before registering
// the job, the runtime writes their values through Config.JobSecrets (the
// vault secrets adapter) into Vault, one entry per job and workload at
// <mount>/data/<prefix>/apps/<app>/job-env/<deployment>/<workload> with a
// field per variable, and the job's template block reads them from there
// into the task's environment. Each job has its own entries, so an old job
// keeps its values while a new one deploys. A run that fails deletes what
// it wrote (unless another writer's registration of the job may read it);
// discarding a stopped job, or purging it (RemoveJobLogs), deletes its
// entries with every version, found by the job's meta while Nomad still
// knows it; vaultsecrets' SweepJobSecrets, run by a leader loop, deletes
// those of deleted apps. Without JobSecrets (the secrets are not in Vault), a task with
// such a variable is refused (PLAN_CAPABILITY_UNSUPPORTED) rather than
// carry it in the job.
//
// Registering plans first and refuses what cannot be placed, by the plan's
// structured metrics (CAPACITY_WOULD_OVERSUBSCRIBE for exhausted nodes,
// ADAPTER_FAILED for no eligible node, naming the constraints that
// filtered them), then registers with EnforceIndex: 0 for a new job, the
// modify index Run read for an update of the app's job (check-and-set),
// so that two controllers racing never both register and an operator's
// change made meanwhile (`nomad job run` of their own version) is never
// overwritten: Nomad refuses the loser with a 500 whose text is its only
// description, so the runtime reads the job back and calls it a conflict
// (STATE_INVALID, with `nomad job history` as the remedy; the previous
// release keeps serving; deploying again registers over it) when the
// job's modify index moved, never parsing the text. The registration's
// evaluation is read (a blocking query) and what it could not place is
// refused the same way. A new job's start order is kept by registering it
// once per workload, each time with the next group added (an in-place
// update for the others), and waiting for that group to be healthy before
// the next; an update registers the whole version at once (removing a
// group would stop it) and waits for its canaries in start order.
//
// Nomad's reasons reach the deploy in svc's words (reasons.go, pure
// functions tested on payloads captured from a real agent): a task whose
// secrets template waits on a Vault path ("Template" event "Missing:
// vault.read(...)", which Nomad retries without end) fails the run at once
// with ADAPTER_FAILED naming the path; a driver that cannot launch the
// command is STATE_APP_EXITED with the driver's error; an artifact
// download or setup failure ADAPTER_FAILED with the event; each with a
// remedy that fits. Those failure texts are Nomad's task events, the one
// place the runtime reads Nomad's words.
//
// Waits are blocking queries (?index= with X-Nomad-Index): on the job's
// allocations until a group's allocation is healthy by Nomad's
// deployment health (checks passing for min_healthy_time; a workload
// without a port, its task running), or its task terminates first
// (STATE_APP_EXITED with the exit code from the task's events), or the
// context ends; on the job's allocations until they stop (Stop); on an
// allocation until its restart is counted (Restart). No wait polls.
//
// Status maps each group's newest allocation: running from the task state,
// restarts from TaskState.Restarts, the last exit code from Terminated
// events, Dead when the task is dead and failed (the restart policy gave
// up; rescheduling is off), the address of the "http" port, and health
// from Nomad's own checks of the allocation (service provider "nomad"),
// else the allocation's deployment health. Logs read the fs logs API
// (stdout, then stderr: Nomad keeps them apart without timestamps),
// capped. Exec speaks the allocation exec websocket; without a TTY the
// command runs under /bin/sh, which marks its end, because Nomad reports
// the exit of such a command only once its stdin is closed. Usage reads
// allocation stats; Host sums the eligible nodes.
//
// An app's volumes are Nomad host volumes named after the app and the
// volume, which outlive its jobs: the dynamic one an earlier job created,
// else a static one declared in a client's configuration, else a new
// dynamic one of Nomad's built-in "mkdir" plugin, waited for (a blocking
// query) until its node reports it ready. A raw_exec workload is told the
// volume's directory (SVC_VOLUME_<NAME>). A failure of the host volumes
// API is ADAPTER_FAILED with Nomad's text and what to configure. Backups
// copy a volume out and in (volcopy.go) with a batch job on the node that
// holds it, asking for the volume as the app's jobs do (exec mounts it,
// read-only for a copy out; raw_exec is told its directory): a copy out
// tars it and PUTs it to a signed upload URL of the artifact store, and
// svc unpacks it into a directory of the server through an os.Root (no
// entry outside it, no link out, size capped); a copy in packs a
// directory as an artifact, which the job downloads (checksummed) and
// unpacks inside the volume under a hidden name before it moves the old
// entries aside and the new ones in. The clients need /bin/sh, tar and
// curl, as builds do.
//
// Vendor errors of the API itself become our codes by HTTP status only: no answer is
// ADAPTER_UNAVAILABLE, 403 ADAPTER_FAILED with the token as the remedy,
// 404 NOT_FOUND, anything else ADAPTER_FAILED.
//
// It must not import other adapters, the HTTP server or the store; the
// Nomad job a scheduler job runs as is found by its meta (deployment_id,
// previous_deployment_id), and remembered.
package nomad
