// Package scheduler owns the deploy path and the leader-only reconciler:
// plan checks, build, start, health, route, and converging every app on its
// desired state. It declares the runtime adapter interface, shaped after
// Nomad's model (a job per app revision, allocations with task states,
// restarts, exit codes, logs, exec, stats); scheduler/process (the embedded
// default) and scheduler/nomad implement it and pass one contract suite.
//
// It must not import any adapter, HTTP framework or vendor client; adapters
// import it for its types. Its decisions are pure functions of state and an
// injected clock. The deploy pipeline arrives with the deploys issue; until
// then this package only reserves its place in the layout.
package scheduler
