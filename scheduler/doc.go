// Package scheduler owns the deploy path and the leader-only reconciler:
// plan checks, build, start, health, route, and converging every app on its
// desired state. It declares the runtime adapter interface, shaped after
// Nomad's model (a job per app revision, allocations with task states,
// restarts, exit codes, logs, exec, stats); scheduler/process (the embedded
// default) and scheduler/nomad implement it and pass one contract suite.
//
// It must not import any adapter, HTTP framework or vendor client; adapters
// import it for its types. Its decisions are pure functions of state and an
// injected clock. So far it declares the runtime interface (runtime.go):
// Builder, Runner and the optional LogReader, with the Job, Task, Artifact
// and status types; scheduler/runtimetest holds the contract suite. The
// deploy pipeline and the reconciler arrive with the deploys issue.
package scheduler
