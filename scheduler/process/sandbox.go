package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
)

// The sandbox isolation level runs a command under bubblewrap (bwrap):
//
//   - the root is a fresh tmpfs holding the host's top-level directories
//     bound read-only (and its top-level symbolic links), then remounted
//     read-only;
//   - /dev and /proc are new (the command gets its own PID namespace, so
//     it sees only its own processes), /tmp is a private tmpfs;
//   - the runtime's work and cache directories, and Config.SandboxHide,
//     are hidden under empty tmpfs mounts: no workload reads another's
//     files, volumes or logs;
//   - the artifact directory is bound read-write at its own path, and each
//     volume read-write at its mount path;
//   - it keeps the host's network (workloads listen on host ports), drops
//     every capability and gets its own IPC and UTS namespaces.
//
// --die-with-parent is not used: it would tie workloads to the server's
// process, while the runtime's model is that workloads outlive a crashed
// server and the next server reaps them (orphans.go). The command runs in
// bwrap's process group, so signals to the group reach it.

// sandboxFor says whether a task's isolation level can be had: "" and
// "none" always, "sandbox" when bubblewrap works here, nothing stronger.
func (r *Runtime) sandboxFor(isolation string) (bool, error) {
	switch isolation {
	case "", policy.IsolationNone:
		return false, nil
	case policy.IsolationSandbox:
		if err := r.sandboxUsable(); err != nil {
			return false, errcode.New(errcode.PlanCapabilityUnsupp, "the process runtime cannot run a sandbox on this host: %v", err).
				WithDetail("isolation", isolation).WithDetail("supported", r.isolationLevels())
		}
		return true, nil
	default:
		return false, errcode.New(errcode.PlanCapabilityUnsupp, "the process runtime does not offer isolation %q", isolation).
			WithDetail("isolation", isolation).WithDetail("supported", r.isolationLevels())
	}
}

// isolationLevels lists what the runtime offers, weakest first.
func (r *Runtime) isolationLevels() []string {
	if r.sandboxUsable() == nil {
		return []string{policy.IsolationNone, policy.IsolationSandbox}
	}
	return []string{policy.IsolationNone}
}

// isolation is the strongest level the runtime offers.
func (r *Runtime) isolation() string {
	l := r.isolationLevels()
	return l[len(l)-1]
}

// sandboxUsable probes bubblewrap once (a trivial command in a sandbox as
// workloads get it) and caches the answer: nil when it works.
func (r *Runtime) sandboxUsable() error {
	r.sandboxOnce.Do(func() { r.sandboxErr = r.probeSandbox() })
	return r.sandboxErr
}

func (r *Runtime) probeSandbox() error {
	path := r.cfg.Bwrap
	if path == "" {
		path = "bwrap"
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return fmt.Errorf("no bubblewrap (bwrap): %w", err)
	}
	r.bwrap = bin
	args, err := r.sandboxArgs(sandboxSpec{chdir: "/"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, "true")...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return fmt.Errorf("bubblewrap does not work here: %v: %s", err, msg)
	}
	return nil
}

// sandboxSpec is what a sandboxed command needs of the host.
type sandboxSpec struct {
	// writable are host directories bound read-write at their own path.
	writable []string
	// binds are host directories bound read-write elsewhere.
	binds []bindMount
	// chdir is the command's working directory.
	chdir string
}

type bindMount struct{ src, dst string }

// maxExplode bounds the entries of a host directory the sandbox rebuilds
// to make room for a mount point that does not exist on the host.
const maxExplode = 4096

// sandboxArgs returns bwrap's arguments up to (not including) the command.
func (r *Runtime) sandboxArgs(sp sandboxSpec) ([]string, error) {
	var args, remountRO []string
	bindEntries := func(dir string, skip func(name string) bool) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(ents) > maxExplode {
			return fmt.Errorf("sandbox: %s has %d entries, more than %d", dir, len(ents), maxExplode)
		}
		for _, e := range ents {
			if skip(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if e.Type()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					continue
				}
				args = append(args, "--symlink", target, p)
				continue
			}
			args = append(args, "--ro-bind", p, p)
		}
		return nil
	}
	special := map[string]bool{"proc": true, "dev": true, "tmp": true}
	if err := bindEntries("/", func(n string) bool { return special[n] }); err != nil {
		return nil, err
	}
	args = append(args, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
	// scratch are the sandbox's own tmpfs trees, where bwrap can make
	// mount points.
	scratch := []string{"/tmp"}
	for _, p := range r.sandboxHidden() {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			args = append(args, "--tmpfs", p)
			scratch = append(scratch, p)
			remountRO = append(remountRO, p)
		} else {
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	for _, p := range sp.writable {
		args = append(args, "--bind", p, p)
		scratch = append(scratch, p)
	}
	for _, b := range sp.binds {
		dst, explode, err := mountPointIn(b.dst, scratch)
		if err != nil {
			return nil, err
		}
		if explode != "" {
			// The mount point is missing under a read-only host
			// directory: rebuild that directory as a tmpfs holding its
			// entries bound read-only, with room for the mount point.
			args = append(args, "--tmpfs", explode)
			if err := bindEntries(explode, func(string) bool { return false }); err != nil {
				return nil, err
			}
			scratch = append(scratch, explode)
			remountRO = append(remountRO, explode)
		}
		args = append(args, "--bind", b.src, dst)
	}
	args = append(args,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--cap-drop", "ALL",
		"--chdir", sp.chdir)
	for i := len(remountRO) - 1; i >= 0; i-- {
		args = append(args, "--remount-ro", remountRO[i])
	}
	return append(args, "--remount-ro", "/", "--"), nil
}

// sandboxHidden are the host paths a sandbox must not see.
func (r *Runtime) sandboxHidden() []string {
	out := []string{r.cfg.WorkDir}
	if !within(r.cfg.CacheDir, r.cfg.WorkDir) {
		out = append(out, r.cfg.CacheDir)
	}
	return append(out, r.cfg.SandboxHide...)
}

// mountPointIn resolves where a volume is bound in the sandbox: the path
// with its existing part's symbolic links resolved, and, if bwrap cannot
// make it (it is missing under a read-only host directory), the directory
// to rebuild.
func mountPointIn(dst string, scratch []string) (resolved, explode string, err error) {
	existing, rest := dst, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", "", fmt.Errorf("sandbox: mount point %s: %w", dst, err)
	}
	resolved = filepath.Join(real, rest)
	if rest == "" || real == "/" {
		return resolved, "", nil
	}
	for _, s := range scratch {
		if within(real, s) {
			return resolved, "", nil
		}
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", "", errors.New("sandbox: the mount point " + dst + " is under a file")
	}
	return resolved, real, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// sandboxCommand wraps name and args to run under bwrap.
func (r *Runtime) sandboxCommand(sp sandboxSpec, name string, args ...string) (*exec.Cmd, error) {
	if err := r.sandboxUsable(); err != nil {
		return nil, err
	}
	bw, err := r.sandboxArgs(sp)
	if err != nil {
		return nil, err
	}
	return exec.Command(r.bwrap, append(append(bw, name), args...)...), nil
}
