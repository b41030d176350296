// Package process is the embedded-default runtime: it builds apps with the
// host's toolchains and supervises their workloads as process groups, like a
// one-node Nomad. It implements the scheduler's whole runtime interface:
// builds, runs, restarts, logs, usage, the host's size and exec.
//
// It owns, under its work directory: the build work areas (builds/), the
// apps' volumes (volumes/<appID>/<volume>, never removed by it), the
// workloads' logs (logs/<jobID>/<workload>.log and one rotated .1, within
// a byte cap; kept after Stop until RemoveLogs) and the running jobs'
// records (jobs/<jobID>.json: each workload's pid and start time, so that
// New kills the workloads a crashed server left behind).
//
// Builds run with `sh -c` in a copy of the source (a work area per build)
// with a clean environment and a time limit; static builds need no command
// and are served by the runtime itself. Each workload runs in its own
// session and process group, in its start order, on a port at the
// advertise host (127.0.0.1 by default), supervised: restarted with a
// backoff until its restart policy gives up (then dead), health-checked
// over HTTP or TCP. Usage is read from /proc, never enforced. Isolation is
// "none" (workloads run as the server's user), or "sandbox" where
// bubblewrap works: a read-only view of the host without the runtime's
// own directories, the artifact and volumes writable.
//
// It must not import other adapters or the HTTP server, and must not touch
// processes it did not start or record, nor files outside its work and
// cache directories (a volume's link in an artifact is inside the
// artifact). Its adapter kind (KindFor) hands one Runtime to every
// instance; Kind is the older capabilities-only declaration.
package process
