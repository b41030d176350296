// Package process is the embedded-default runtime: it builds apps with the
// host's toolchains and supervises their workloads as process groups, like a
// one-node Nomad. It implements the scheduler's runtime interface.
//
// It must not import other adapters or the HTTP server. So far it declares
// its adapter kind (settings and live capabilities); building and running
// arrive with the deploys issue.
package process
