package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/svchost/svc/internal/egress"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// buildKinds are the build kinds the process runtime runs: each is a shell
// command in the build context, except static, which needs none.
var buildKinds = []string{spec.BuildGo, spec.BuildNode, spec.BuildPython, spec.BuildStatic, spec.BuildCommand}

// logTailBytes caps the build output kept for the error's details.
const logTailBytes = 8 << 10

// Build copies the source tree into a fresh work area and runs the build
// command there with a clean environment and a time limit, in a sandbox
// (and a pod of its own: the network it needs, under the request's egress
// list) unless the runtime's isolation is none. A sandboxed build writes
// only its work area and its app's own caches, as the app's user.
func (r *Runtime) Build(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	if !supportedBuild(req.Build.Kind) {
		return scheduler.Artifact{}, errcode.New(errcode.PlanCapabilityUnsupp, "the process runtime does not run %q builds", req.Build.Kind).
			WithDetail("kind", req.Build.Kind).WithDetail("supported", buildKinds)
	}
	buildCtx := req.Build.Context
	if buildCtx == "" {
		buildCtx = "."
	}
	if !filepath.IsLocal(filepath.FromSlash(buildCtx)) {
		return scheduler.Artifact{}, errcode.Invalid("build.context", "the build context %q is outside the source", buildCtx)
	}
	id := req.ID
	if id == "" {
		r.mu.Lock()
		r.seq++
		id = fmt.Sprintf("b%d-%d", time.Now().UnixNano(), r.seq)
		r.mu.Unlock()
	}
	if !filepath.IsLocal(id) || strings.ContainsRune(id, filepath.Separator) {
		return scheduler.Artifact{}, errcode.Invalid("id", "the build ID %q is not a plain name", id)
	}
	area := filepath.Join(r.cfg.WorkDir, "builds", id)
	if err := os.Mkdir(area, 0o700); err != nil {
		return scheduler.Artifact{}, fmt.Errorf("build %s: work area: %w", id, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(area)
		}
	}()
	src := filepath.Join(area, "src")
	if err := copyTree(req.Source, src); err != nil {
		return scheduler.Artifact{}, fmt.Errorf("build %s: copy source: %w", id, err)
	}
	dir := filepath.Join(src, filepath.FromSlash(buildCtx))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return scheduler.Artifact{}, errcode.New(errcode.BuildFailed, "the build context %q is not a directory of the source", buildCtx)
	}
	art := scheduler.Artifact{ID: id, Kind: req.Build.Kind, Dir: dir}
	if strings.TrimSpace(req.Build.Command) == "" {
		if req.Build.Kind == spec.BuildStatic {
			ok = true
			return art, nil
		}
		return scheduler.Artifact{}, errcode.New(errcode.BuildFailed, "a %q build needs a command", req.Build.Kind)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = r.cfg.BuildTimeout
	}
	command := req.Build.Command
	if req.Build.Kind == spec.BuildPython {
		// Each app's packages go into its own virtualenv in the artifact,
		// never into the host's interpreter; the workload runs with it
		// first on PATH.
		command = "python3 -m venv " + venvDir + " && . " + venvDir + "/bin/activate && " + command
	}
	if err := r.runBuild(ctx, req, area, dir, command, timeout); err != nil {
		return scheduler.Artifact{}, err
	}
	ok = true
	return art, nil
}

// venvDir is where a Python build's virtualenv lives in the artifact.
const venvDir = ".venv"

func supportedBuild(kind string) bool {
	for _, k := range buildKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// buildEnv is the clean environment of a build: PATH, HOME in the work
// area, the toolchains' caches under cache (the app's), and BuildEnv.
func (r *Runtime) buildEnv(area, cache, path string) map[string]string {
	env := map[string]string{
		"PATH":             path,
		"HOME":             area,
		"TMPDIR":           filepath.Join(area, "tmp"),
		"GOCACHE":          filepath.Join(cache, "go-build"),
		"GOPATH":           filepath.Join(cache, "go"),
		"GOTOOLCHAIN":      "local",
		"CGO_ENABLED":      "0",
		"npm_config_cache": filepath.Join(cache, "npm"),
		"PIP_CACHE_DIR":    filepath.Join(cache, "pip"),
		// pip runs inside the build's own virtualenv: as root it warns
		// for nothing, and it must not look for its own updates.
		"PIP_ROOT_USER_ACTION":          "ignore",
		"PIP_DISABLE_PIP_VERSION_CHECK": "1",
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range r.cfg.BuildEnv {
		env[k] = v
	}
	return env
}

// appCache is an app's own toolchain caches: apps never share a module or
// build cache, which one app's build could poison for another's.
func (r *Runtime) appCache(appID string) string {
	if appID == "" || !scheduler.PlainName(appID) {
		appID = "_"
	}
	return filepath.Join(r.cfg.CacheDir, "apps", appID)
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (r *Runtime) runBuild(ctx context.Context, req scheduler.BuildRequest, area, dir, command string, timeout time.Duration) error {
	if err := os.MkdirAll(filepath.Join(area, "tmp"), 0o700); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sandboxed, err := r.sandboxFor(req.Isolation)
	if err != nil {
		return err
	}
	allow, err := egress.Parse(req.Egress)
	if err != nil {
		return errcode.Wrap(err, errcode.ValidInvalid, "build: %v", err).WithDetail("field", "egress")
	}
	if allow != nil && !sandboxed {
		return errcode.New(errcode.PlanCapabilityUnsupp, "host policy restricts egress (egress_allowlist), which the process runtime enforces only in a sandbox, and this build runs without one").
			WithDetail("capability", "egress_allowlist").
			WithRemedy("run builds in the sandbox (runtime.isolation: sandbox, or policy min_build_isolation: sandbox), or empty egress_allowlist")
	}
	cache := r.appCache(req.AppID)
	var cmd *exec.Cmd
	var env map[string]string
	var p *pod
	if sandboxed {
		own, err := r.ownerFor(req.AppID)
		if err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(cache), 0o711); err != nil {
			return fmt.Errorf("build: cache: %w", err)
		}
		if err := traversable(r.cfg.CacheDir, cache); err != nil {
			return fmt.Errorf("build: cache: %w", err)
		}
		if err := own.give(area); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if !own.owns(cache) {
			if err := own.give(cache); err != nil {
				return fmt.Errorf("build: %w", err)
			}
		}
		if req.Build.Kind == spec.BuildGo {
			r.seedGoCache(ctx, r.seedDir(), filepath.Join(cache, "go-build"), own, req.Log)
		}
		if p, err = r.startPod(ctx, "build-"+filepath.Base(area), podSpec{owner: own, allow: allow, refused: func(dest string, err error) {
			if req.Log != nil {
				req.Log(scheduler.StreamStderr, "[svc] "+err.Error())
			}
		}}); err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The time limit covers the sandbox's set-up too.
				return errcode.Wrap(err, errcode.BuildTimeout, "the build ran past its time limit of %s while its sandbox was being set up", timeout).
					WithDetail("timeout", timeout.String())
			}
			return fmt.Errorf("build: %w", err)
		}
		defer p.stop()
		if cmd, err = r.sandboxCommand(ctx, sandboxSpec{owner: own, pod: p, writable: []string{area, cache}, chdir: dir}, []string{"sh", "-c", command}); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		env = r.buildEnv(area, cache, r.view.path)
		r.sandboxEnv(env, p)
		env["HOME"] = area
	} else {
		if err := os.MkdirAll(cache, 0o700); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if _, own := r.cfg.BuildEnv["GOCACHE"]; req.Build.Kind == spec.BuildGo && !own {
			r.seedGoCache(ctx, r.seedDir(), filepath.Join(cache, "go-build"), owner{}, req.Log)
		}
		cmd = exec.CommandContext(ctx, "sh", "-c", command)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		env = r.buildEnv(area, cache, os.Getenv("PATH"))
	}
	cmd.Dir = dir
	cmd.Env = envList(env)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	tail := newLogRing(logTailBytes, nil)
	ow := &lineWriter{emit: func(line string) {
		tail.Add(line)
		if req.Log != nil {
			req.Log(scheduler.StreamStdout, line)
		}
	}}
	ew := &lineWriter{emit: func(line string) {
		tail.Add(line)
		if req.Log != nil {
			req.Log(scheduler.StreamStderr, line)
		}
	}}
	cmd.Stdout, cmd.Stderr = ow, ew
	if err := cmd.Start(); err != nil {
		return errcode.Wrap(err, errcode.BuildFailed, "the build could not start: %v", err)
	}
	pids := map[string]int{"build": cmd.Process.Pid}
	if p != nil {
		for k, v := range p.pids() {
			pids[k] = v
		}
	}
	unrecord := r.recordBuild(filepath.Base(area), pids)
	err = cmd.Wait()
	defer unrecord()
	ow.Flush()
	ew.Flush()
	// The shell may be gone while its children live on: end the group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == nil {
		return nil
	}
	lines := tail.Lines()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errcode.Wrap(err, errcode.BuildTimeout, "the build ran past its time limit of %s", timeout).
			WithDetail("timeout", timeout.String()).WithDetail("log_tail", lines)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("build: %w", ctx.Err())
	}
	e := errcode.Wrap(err, errcode.BuildFailed, "the build command failed: %v", err).WithDetail("log_tail", lines)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		e = e.WithDetail("exit_code", exit.ExitCode())
	}
	return e
}

// copyTree copies the regular files, directories and symbolic links of src
// into dst (which must not exist).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		default:
			return nil // devices, sockets and pipes are not source
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// exitCodeOf reads the exit code of a finished process: its status, or 128
// plus the signal that ended it.
func exitCodeOf(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
