// Package process is the embedded-default runtime: it builds apps with the
// host's toolchains and supervises their workloads as process groups, like a
// one-node Nomad. It implements the scheduler's whole runtime interface:
// builds, runs, restarts, logs, usage, the host's size and exec.
//
// It owns, under its work directory: the build work areas (builds/), the
// workloads' working copies (work/<jobID>/<workload>), the apps' volumes
// (volumes/<appID>/<volume>, never removed by it), the toolchains' caches
// (cache/apps/<appID>, one set per app, and the Go build cache seed), the
// pods' generated files (pods/<id>), the workloads' logs
// (logs/<jobID>/<workload>.log and one rotated .1, within a byte cap; kept
// after Stop until RemoveLogs; FollowLogs hands a reader each line as it is
// written, letting go of one that falls 4096 lines behind), the apps' sandbox users (uids.json) and the
// running jobs' and builds' records (jobs/<id>.json: each process group's
// pid and start time, so that New kills what a crashed server left behind,
// pods included).
//
// Isolation is "sandbox" unless the operator chose "none" (Config.Isolation;
// runtime.isolation). In the sandbox (sandbox.go, pod.go, owner.go) every
// workload, build and exec session runs in its own user, mount, PID, IPC and
// UTS namespaces under bubblewrap, as an unprivileged user (each app its
// own when the server runs as root), seeing its own files, its volumes and
// a read-only view of the system and the toolchains, nothing of the server
// or of other apps; a job's workloads share a network namespace (a pod)
// that pasta connects: their ports are forwarded from the advertise host
// (127.0.0.1), nothing else of the host is reachable, and with host policy's
// egress_allowlist the only way out is a checking proxy (package egress).
// Where the host cannot run the sandbox, nothing runs, and the runtime says
// why (SandboxError). With "none", workloads are processes of the server's
// user on the host's network, as the server's own children.
//
// Builds run with `sh -c` in a copy of the source (a work area per build)
// with a clean environment and a time limit; static builds need no command
// and are served by the runtime itself (through os.Root: no link leads
// out of the site). Each workload runs in its own session and process
// group, in its start order, on its port, supervised: restarted with a
// backoff until its restart policy gives up (then dead), health-checked
// over HTTP or TCP (in a pod, a socket listening inside). Usage is read
// from /proc, never enforced.
//
// It must not import other adapters or the HTTP server, and must not touch
// processes it did not start or record, nor files outside its work and
// cache directories (a volume's link in an artifact is inside the
// artifact), but for the directories above its work directory that it makes
// passable for the apps' users (Config.TraverseFrom). Its adapter kind
// (KindFor) hands one Runtime to every instance.
package process
