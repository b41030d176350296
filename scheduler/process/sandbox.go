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
	"syscall"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
)

// The sandbox isolation level runs a workload, a build or an exec session
// in namespaces of its own, as an unprivileged user (owner.go), in a pod's
// network (pod.go), under bubblewrap (bwrap):
//
//   - a user namespace (the process is uid 1000, "app", inside; no further
//     user namespaces can be made), and its own PID, IPC, UTS and cgroup
//     namespaces: it sees only its own processes;
//   - a root of its own: a tmpfs holding read-only views of the host's
//     system trees (/usr, /bin, /sbin, /lib*, /etc, /opt) and of the
//     toolchains found on PATH outside them (Go's GOROOT, Node's prefix,
//     Python's base prefix), then remounted read-only; /etc/shadow and
//     /etc/gshadow masked, and /etc/passwd, group, hosts and resolv.conf
//     the pod's; new /dev and /proc; private tmpfs /tmp, /var/tmp and /run.
//     Nothing else of the host is there: not the server's work directory,
//     not /home, /root, /srv or /var, not other workloads;
//   - its working copy (or a build's work area) bound read-write at its own
//     path, and each of its volumes read-write at its mount path;
//   - a clean environment: the task's own, PATH, HOME (/tmp unless set),
//     and the pod's proxy settings; nothing of the server's;
//   - every capability dropped.
//
// --die-with-parent is not used: workloads outlive a crashed server and
// the next server reaps them (orphans.go). The sandbox runs in the process
// group the runtime started, so signals to the group reach it, and its PID
// namespace ends with its first process.

// sandboxUID is the sandbox's user inside its namespace.
const sandboxUID = "1000"

// systemTrees are the host's top-level directories a sandbox sees, read-only
// (or as the symbolic links they are on the host).
var systemTrees = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// maskedFiles are host files inside systemTrees a sandbox never reads.
var maskedFiles = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}

// defaultSandboxPath is PATH in a sandbox, after the toolchains' own.
const defaultSandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostView is what of the host a sandbox sees, found once by the probe.
type hostView struct {
	bwrap string
	pod   podTools
	// args are bwrap's arguments for the read-only root.
	args []string
	// trees are the host directories bound read-only (for masks and
	// mount points under them).
	trees []string
	// path is PATH inside: the toolchains' bin directories first.
	path string
	// skipped names the toolchains a sandbox cannot see, and why.
	skipped []string
	// resolv is the host's resolver, for the pods' resolv.conf.
	resolv hostResolv
}

// sandboxFor says whether a task runs in a sandbox: at the stronger of the
// runtime's own level (Config.Isolation) and the task's. "none" never,
// "sandbox" when the host can run one (else PLAN_CAPABILITY_UNSUPPORTED,
// saying why and what to do), nothing stronger.
func (r *Runtime) sandboxFor(isolation string) (bool, error) {
	level := r.cfg.Isolation
	if isolation != "" && !policy.AtLeast(level, isolation) {
		level = isolation
	}
	switch level {
	case policy.IsolationNone:
		return false, nil
	case policy.IsolationSandbox:
		if err := r.sandboxUsable(); err != nil {
			e := errcode.New(errcode.PlanCapabilityUnsupp, "the process runtime cannot run a sandbox on this host: %v", err).
				WithDetail("isolation", level).WithDetail("supported", r.isolationLevels())
			if r.cfg.Isolation == policy.IsolationSandbox {
				e = e.WithRemedy("install bubblewrap and passt (Debian: apt-get install bubblewrap passt) on a kernel with user namespaces, or set runtime.isolation: none to run workloads without isolation (every app can then read the server's files)")
			}
			return false, e
		}
		return true, nil
	default:
		return false, errcode.New(errcode.PlanCapabilityUnsupp, "the process runtime does not offer isolation %q", level).
			WithDetail("isolation", level).WithDetail("supported", r.isolationLevels())
	}
}

// isolationLevels lists what the runtime offers, weakest first: none only
// when Config.Isolation allows it.
func (r *Runtime) isolationLevels() []string {
	var out []string
	if r.cfg.Isolation == policy.IsolationNone {
		out = append(out, policy.IsolationNone)
	}
	if r.sandboxUsable() == nil {
		out = append(out, policy.IsolationSandbox)
	}
	return out
}

// isolation is the strongest level the runtime offers, "" when it can run
// nothing (Config.Isolation is sandbox and the host cannot).
func (r *Runtime) isolation() string {
	l := r.isolationLevels()
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// SandboxError says why the host cannot run the sandbox, nil when it can:
// probed once (a pod and a sandboxed `true`), so that `svc serve` can say
// so at start.
func (r *Runtime) SandboxError() error { return r.sandboxUsable() }

// Toolchains lists the toolchains found on PATH that a sandbox cannot see,
// and why; empty when every one is visible.
func (r *Runtime) Toolchains() []string {
	if r.sandboxUsable() != nil {
		return nil
	}
	return append([]string(nil), r.view.skipped...)
}

// sandboxUsable probes the sandbox once and caches the answer: nil when it
// works.
func (r *Runtime) sandboxUsable() error {
	r.sandboxOnce.Do(func() { r.sandboxErr = r.probeSandbox() })
	return r.sandboxErr
}

func (r *Runtime) podTools() (podTools, error) {
	if err := r.sandboxUsable(); err != nil {
		return podTools{}, err
	}
	return r.view.pod, nil
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
	tools, err := findPodTools(r.cfg.Pasta)
	if err != nil {
		return err
	}
	if err := r.prepareTraversal(); err != nil {
		return fmt.Errorf("the work directory cannot be reached by the sandboxes' users: %w", err)
	}
	own, err := r.ownerFor("")
	if err != nil {
		return err
	}
	v := hostView{bwrap: bin, pod: tools}
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		v.resolv = parseResolv(b)
	}
	v.args, v.trees = rootArgs()
	v.path, v.skipped = r.toolchainArgs(&v, own)
	r.view = v
	// A pod, and `true` in a sandbox in it, as a workload gets them.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := r.startPodWith(ctx, "probe-"+r.bootID[:min(8, len(r.bootID))]+fmt.Sprint(os.Getpid()), podSpec{owner: own}, tools)
	if err != nil {
		return err
	}
	defer p.stop()
	cmd, err := r.sandboxCommand(ctx, sandboxSpec{owner: own, pod: p, chdir: "/"}, []string{"true"})
	if err != nil {
		return err
	}
	cmd.Env = []string{"PATH=" + v.path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return fmt.Errorf("bubblewrap does not work here: %v: %s", err, msg)
	}
	return nil
}

// prepareTraversal makes the directories from Config.TraverseFrom down to
// the runtime's work directory passable for the sandboxes' users (0711)
// when the server switches users, and takes every permission for others
// off what else TraverseFrom holds. Without TraverseFrom it only checks
// that each directory on the way can be passed.
func (r *Runtime) prepareTraversal() error {
	if os.Geteuid() != 0 {
		return nil
	}
	if from := r.cfg.TraverseFrom; from != "" {
		if err := traversable(from, filepath.Join(r.cfg.WorkDir, "x")); err != nil {
			return err
		}
		ents, err := os.ReadDir(from)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(from, e.Name())
			if within(r.cfg.WorkDir, p) || e.Type()&fs.ModeSymlink != 0 {
				continue
			}
			if fi, err := os.Lstat(p); err == nil && fi.Mode().Perm()&0o007 != 0 {
				if err := os.Chmod(p, fi.Mode().Perm()&^0o007); err != nil {
					return err
				}
			}
		}
	} else if err := os.Chmod(r.cfg.WorkDir, 0o711); err != nil {
		return err
	}
	for _, sub := range []string{"builds", "work", "volumes", "pods", "cache"} {
		if err := os.MkdirAll(filepath.Join(r.cfg.WorkDir, sub), 0o711); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(r.cfg.WorkDir, sub), 0o711); err != nil {
			return err
		}
	}
	for dir := filepath.Dir(r.cfg.WorkDir); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s cannot be passed by other users (mode %v): put the work directory where they can (e.g. under /var/lib), or set runtime.isolation: none", dir, fi.Mode().Perm())
		}
		if dir == "/" {
			return nil
		}
	}
}

// rootArgs are bwrap's arguments for the read-only host trees, and those
// trees.
func rootArgs() (args, trees []string) {
	for _, p := range systemTrees {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
			continue
		}
		if fi.IsDir() {
			args = append(args, "--ro-bind", p, p)
			trees = append(trees, p)
		}
	}
	return args, trees
}

// toolchainArgs binds, read-only at their own paths, the install roots of
// the toolchains on PATH that live outside the system trees, and returns
// the sandbox's PATH (their bin directories first) and those it must
// leave out (unreadable by the sandboxes' user).
func (r *Runtime) toolchainArgs(v *hostView, own owner) (path string, skipped []string) {
	var bins []string
	for _, tc := range toolchainRoots() {
		if underAny(tc.root, v.trees) {
			bins = append(bins, tc.bin) // seen already; first on PATH
			continue
		}
		if own.switched && !readableByOthers(tc.root) {
			skipped = append(skipped, fmt.Sprintf("%s at %s (not readable by other users: install it under /usr/local or /opt, or make it readable)", tc.name, tc.root))
			continue
		}
		v.args = append(v.args, "--ro-bind", tc.root, tc.root)
		v.trees = append(v.trees, tc.root)
		bins = append(bins, tc.bin)
	}
	return strings.Join(append(bins, defaultSandboxPath), ":"), skipped
}

type toolchain struct{ name, root, bin string }

// toolchainRoots finds where the toolchains builds use are installed.
func toolchainRoots() []toolchain {
	var out []toolchain
	ask := func(name string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := exec.CommandContext(ctx, name, args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if root := ask("go", "env", "GOROOT"); filepath.IsAbs(root) {
		out = append(out, toolchain{"go", root, filepath.Join(root, "bin")})
	}
	if p, err := exec.LookPath("node"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			root := filepath.Dir(filepath.Dir(real)) // <prefix>/bin/node
			out = append(out, toolchain{"node", root, filepath.Join(root, "bin")})
		}
	}
	if root := ask("python3", "-c", "import sys; print(sys.base_prefix)"); filepath.IsAbs(root) {
		out = append(out, toolchain{"python3", root, filepath.Join(root, "bin")})
	}
	return out
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// passableByOthers says whether a user with no relation to the owners of
// dir and the directories above it can pass through them all (o+x).
func passableByOthers(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// readableByOthers says whether a user with no relation to its owners can
// list and read dir: o+rx on it and o+x on every directory above it.
func readableByOthers(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.Mode().Perm()&0o005 == 0o005 && passableByOthers(filepath.Dir(dir))
}

// sandboxSpec is what one sandboxed command gets.
type sandboxSpec struct {
	owner owner
	// pod is the network it joins.
	pod *pod
	// writable are host directories bound read-write at their own path.
	writable []string
	// binds are host directories bound read-write elsewhere (volumes).
	binds []bindMount
	// chdir is the command's working directory.
	chdir string
}

type bindMount struct{ src, dst string }

// maxExplode bounds the entries of a host directory the sandbox rebuilds
// to make room for a mount point that does not exist on the host.
const maxExplode = 4096

// sandboxArgs returns bwrap's arguments up to and including "--".
func (r *Runtime) sandboxArgs(sp sandboxSpec) ([]string, error) {
	v := r.view
	args := []string{
		"--unshare-user", "--uid", sandboxUID, "--gid", sandboxUID, "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "app", "--cap-drop", "ALL",
	}
	args = append(args, v.args...)
	args = append(args,
		"--dev", "/dev", "--proc", "/proc",
		"--size", "536870912", "--tmpfs", "/tmp",
		"--size", "536870912", "--tmpfs", "/var/tmp",
		"--size", "16777216", "--tmpfs", "/run")
	if sp.pod != nil {
		for _, f := range []string{"passwd", "group", "hosts", "resolv.conf"} {
			args = append(args, "--ro-bind", filepath.Join(sp.pod.dir, f), "/etc/"+f)
		}
	}
	var remountRO []string
	for _, p := range append(append([]string(nil), maskedFiles...), r.sandboxHidden()...) {
		if !underAny(p, v.trees) {
			continue // not in the sandbox at all
		}
		if sp.owner.switched && !passableByOthers(filepath.Dir(p)) {
			continue // the sandbox's user cannot reach it (nor bwrap mask it)
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			args = append(args, "--tmpfs", p)
			remountRO = append(remountRO, p)
		} else {
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	for _, p := range sp.writable {
		args = append(args, "--bind", p, p)
	}
	// scratch are the sandbox's own directories (its tmpfs root, its tmpfs
	// mounts, its writable binds), where bwrap can make mount points.
	for _, b := range sp.binds {
		dst, explode, err := mountPointIn(b.dst, v.trees)
		if err != nil {
			return nil, err
		}
		if explode != "" {
			// The mount point is missing under a read-only host tree:
			// rebuild that directory as a tmpfs holding its entries bound
			// read-only, with room for the mount point.
			more, err := explodeArgs(explode)
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
			remountRO = append(remountRO, explode)
		}
		args = append(args, "--bind", b.src, dst)
	}
	args = append(args, "--chdir", sp.chdir)
	for i := len(remountRO) - 1; i >= 0; i-- {
		args = append(args, "--remount-ro", remountRO[i])
	}
	return append(args, "--remount-ro", "/", "--"), nil
}

// explodeArgs rebuilds a host directory in the sandbox as a tmpfs of its
// entries, each bound read-only (symbolic links as links).
func explodeArgs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(ents) > maxExplode {
		return nil, fmt.Errorf("sandbox: %s has %d entries, more than %d", dir, len(ents), maxExplode)
	}
	args := []string{"--tmpfs", dir}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
			continue
		}
		args = append(args, "--ro-bind", p, p)
	}
	return args, nil
}

// sandboxHidden are the host paths a sandbox must not see, should they be
// under a tree it sees.
func (r *Runtime) sandboxHidden() []string {
	out := []string{r.cfg.WorkDir}
	if !within(r.cfg.CacheDir, r.cfg.WorkDir) {
		out = append(out, r.cfg.CacheDir)
	}
	return append(out, r.cfg.SandboxHide...)
}

// mountPointIn resolves where a volume is bound in the sandbox: the path
// with the symbolic links of its existing part resolved, and, when bwrap
// cannot make it (it is missing under a read-only host tree), the host
// directory to rebuild. Outside the trees bwrap makes it in its own root.
func mountPointIn(dst string, trees []string) (resolved, explode string, err error) {
	if !underAny(dst, trees) && !underAny(dst, symlinkedTrees()) {
		return dst, "", nil
	}
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
	if rest == "" {
		return resolved, "", nil
	}
	if !underAny(real, trees) {
		return resolved, "", nil
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", "", errors.New("sandbox: the mount point " + dst + " is under a file")
	}
	return resolved, real, nil
}

// symlinkedTrees are the system trees that are symbolic links on the host
// (/bin -> usr/bin on merged-/usr systems).
func symlinkedTrees() []string {
	var out []string
	for _, p := range systemTrees {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			out = append(out, p)
		}
	}
	return out
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// sandboxCommand makes the command that runs argv in a sandbox: nsenter
// into the pod's namespaces, then bwrap, as the sandbox's owner, in a
// session of its own; ctx kills it, as exec.CommandContext does. The
// caller sets its environment and output.
func (r *Runtime) sandboxCommand(ctx context.Context, sp sandboxSpec, argv []string) (*exec.Cmd, error) {
	if sp.pod == nil {
		if err := r.sandboxUsable(); err != nil {
			return nil, err
		}
	}
	bw, err := r.sandboxArgs(sp)
	if err != nil {
		return nil, err
	}
	line := append([]string{r.view.bwrap}, bw...)
	if sp.pod != nil {
		line = append(append([]string(nil), sp.pod.enter...), line...)
	}
	line = append(line, argv...)
	cmd := exec.CommandContext(ctx, line[0], line[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: sp.owner.credential()}
	return cmd, nil
}

// sandboxEnv completes a sandboxed process's environment: the sandbox's
// PATH unless the task set one, HOME (/tmp) unless set, the user's name,
// and the pod's proxy.
func (r *Runtime) sandboxEnv(env map[string]string, p *pod) {
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = r.view.path
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = "/tmp"
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if _, ok := env[k]; !ok {
			env[k] = "app"
		}
	}
	if p != nil {
		for k, v := range p.proxyEnv() {
			env[k] = v
		}
	}
}
