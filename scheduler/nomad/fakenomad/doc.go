// Package fakenomad owns an in-process fake of Nomad's HTTP API for tests:
// exactly the endpoints scheduler/nomad calls, with Nomad's JSON shapes
// (the nomad/api types), its headers (X-Nomad-Index, X-Nomad-KnownLeader,
// X-Nomad-LastContact) and its blocking-query semantics (?index=&wait=
// answer when the table's index passes index, or when wait ends, with the
// current index either way).
//
// It keeps every version of a job (GET /v1/job/<id>/versions, with
// version tags set and moved as Nomad does: PUT/DELETE
// /v1/job/<id>/versions/<tag>/tag), reverts to one (POST
// /v1/job/<id>/revert, EnforcePriorVersion checked), each registration's
// evaluation with the groups it could not place (GET
// /v1/evaluation/<id>, a blocked evaluation beside it) and each service
// job's latest deployment (GET /v1/job/<id>/deployment): a changed group
// whose update block asks for canaries gets one beside its running
// allocation (an older canary is stopped), promoted with POST
// /v1/deployment/promote/<id> only when healthy, which stops the group's
// other allocations. A template that reads a Vault path that is not there
// (or that the token may not read) leaves its task pending with a
// "Template" event "Missing: vault.read(<path>)", as Nomad's template hook
// does.
//
// It is one server and one client node. Registering enforces the job
// modify index exactly as Nomad does (EnforceIndex with JobModifyIndex 0
// for a new job; a mismatch answers 500 with Nomad's own text, which is how
// Nomad answers it) and places each task group at once, as Nomad's
// scheduler would on one node: a group whose spec did not change keeps its
// allocation (an in-place update), a changed one is replaced, a removed one
// stopped. Plans check the node's datacenter, pool, drivers, free CPU and
// memory and reserved ports, and report what cannot be placed in
// FailedTGAllocs with Nomad's metric fields.
//
// It really runs the tasks with raw_exec semantics: each allocation gets
// an allocation directory (<DataDir>/allocs/<alloc id>/<task>/{local,
// secrets,tmp}), its artifacts are downloaded (plain HTTP GET of the
// getter source, a "checksum" option verified, .tar.gz unpacked) into the
// destination, its templates rendered (Go text/template, as consul-template
// is, with the secret function reading Vault KV through Config.Vault or
// the test's Config.Secrets; an env template's variables join the task's
// environment and are written only under secrets/), and its command run by
// a scheduler/process.Runtime of its own (restart policy from the group's
// restart block, health from the group's service checks), whose state the
// fake maps onto task states, events, restarts and deployment health.
// Logs, stats, checks, restarts and exec (the websocket protocol of
// /v1/client/allocation/<id>/exec, on a pseudo-terminal from the process
// runtime when tty=true) are served from that runtime. As Nomad's executor
// does, exec without a terminal reports the end of output and the exit
// code only once the client closed stdin (or wrote after the exit); the
// fake cannot half-close the command's own input, so a command that reads
// stdin to its end sees it only when the session ends.
//
// With Config.Consul, its client registers the services of provider
// consul with that Consul agent as Nomad's client does (services.go,
// after command/agent/consul/service_client.go): PUT
// /v1/agent/service/register with Nomad's service ID
// (_nomad-task-<alloc>-<task, or group-<group>>-<service>-<port label>),
// the name, tags and meta interpolated, meta external-source=nomad and
// the port label's host address and port; a group's services from the
// moment its allocation runs until it is told to stop (deregistered
// before the tasks are killed) or fails, a task's while the task runs.
// Each check is registered under Nomad's check ID (_nomad-check-<hash>)
// as Nomad registers a script check, a TTL of its interval plus 31s,
// and the client reports the task's health into it with PUT
// /v1/agent/check/update/<id> on every change and every interval (a
// failed call is retried with the service client's backoff, 1s doubling
// to 30s, and a service Consul lost is registered again); Nomad
// registers http, tcp and grpc checks for the agent to run instead.
// Services of provider nomad are registered nowhere: the fake has no
// native service catalog (no /v1/services).
//
// Dynamic host volumes are created by the node's one plugin, "mkdir" (a
// directory under <DataDir>/volumes), and a group's host volume request
// must name a ready one whose capabilities serve its access mode to be
// placed (a read-only request asks for single-node-reader-only by default,
// as Nomad's scheduler has it; the one writer of single-node-single-writer
// is not checked); the node declares no static host volumes. A task's
// volume_mount with a relative destination is made as a symbolic link at
// <task dir>/<destination> to the volume's directory (read_only is not
// enforced: the task may write through it). Config.Hold places allocations
// without running them, for tests and benchmarks of the control plane.
//
// Known differences from Nomad: one task per group is what it supports
// well (every task of a group gets the group's port); stdout and stderr
// are kept as one stream (type=stdout serves it, type=stderr is empty);
// a service task's logs are served whole (no follow; a batch task's are
// followed); restart attempts of 0 mean the
// process runtime's default; the exec driver's volume mounts with an
// absolute destination are not made (there is no chroot), and the exec
// driver runs tasks as raw_exec does; the checks endpoint reports every check of a
// provider "nomad" service with its task's health, and every check in
// Consul carries its task's health too (the process runtime checks the
// group's first check only); canary tags and meta, address modes other
// than auto and host, and Connect are not registered; job lists filter by
// prefix only (no filter expressions); a change of the job's meta alone
// is an in-place update (Nomad replaces the groups); deployments have no
// progress deadline; nothing is garbage-collected until Close.
//
// It is for tests only: production code never imports it.
package fakenomad
