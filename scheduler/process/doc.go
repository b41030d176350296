// Package process is the embedded-default runtime: it builds apps with the
// host's toolchains and supervises their workloads as process groups, like a
// one-node Nomad. It implements the scheduler's runtime interface.
//
// Builds run with `sh -c` in a copy of the source (a work area per build)
// with a clean environment and a time limit; static builds need no command
// and are served by the runtime itself. Each workload runs as its own
// process group on a 127.0.0.1 port, supervised: restarted with a backoff,
// health-checked over HTTP, its output kept up to a cap. There is no
// isolation: workloads run as the server's user.
//
// It must not import other adapters or the HTTP server. Its adapter kind
// (kind.go) is not yet wired to a Runtime: Open still returns an instance
// that only reports capabilities.
package process
