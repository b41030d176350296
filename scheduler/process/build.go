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

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
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
// when Config.BuildIsolation asks for one.
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
	if err := r.runBuild(ctx, area, dir, command, timeout, req.Isolation, req.Log); err != nil {
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
// area, the toolchains' caches under the cache directory, and BuildEnv.
func (r *Runtime) buildEnv(area string) []string {
	env := map[string]string{
		"PATH":             os.Getenv("PATH"),
		"HOME":             area,
		"TMPDIR":           filepath.Join(area, "tmp"),
		"GOCACHE":          filepath.Join(r.cfg.CacheDir, "go-build"),
		"GOPATH":           filepath.Join(r.cfg.CacheDir, "go"),
		"GOTOOLCHAIN":      "local",
		"CGO_ENABLED":      "0",
		"npm_config_cache": filepath.Join(r.cfg.CacheDir, "npm"),
		"PIP_CACHE_DIR":    filepath.Join(r.cfg.CacheDir, "pip"),
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
	return envList(env)
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (r *Runtime) runBuild(ctx context.Context, area, dir, command string, timeout time.Duration, isolation string, sink scheduler.LogSink) error {
	if err := os.MkdirAll(filepath.Join(area, "tmp"), 0o700); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cmd *exec.Cmd
	if isolation == "" || policy.AtLeast(r.cfg.BuildIsolation, isolation) {
		isolation = r.cfg.BuildIsolation
	}
	sandboxed, err := r.sandboxFor(isolation)
	if err != nil {
		return err
	}
	if sandboxed {
		args, err := r.sandboxArgs(sandboxSpec{writable: []string{area, r.cfg.CacheDir}, chdir: dir})
		if err != nil {
			return fmt.Errorf("build: %w", err)
		}
		cmd = exec.CommandContext(ctx, r.bwrap, append(args, "sh", "-c", command)...)
	} else {
		cmd = exec.CommandContext(ctx, "sh", "-c", command)
	}
	cmd.Dir = dir
	cmd.Env = r.buildEnv(area)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	tail := newLogRing(logTailBytes, nil)
	ow := &lineWriter{emit: func(line string) {
		tail.Add(line)
		if sink != nil {
			sink(scheduler.StreamStdout, line)
		}
	}}
	ew := &lineWriter{emit: func(line string) {
		tail.Add(line)
		if sink != nil {
			sink(scheduler.StreamStderr, line)
		}
	}}
	cmd.Stdout, cmd.Stderr = ow, ew
	if err := cmd.Start(); err != nil {
		return errcode.Wrap(err, errcode.BuildFailed, "the build could not start: %v", err)
	}
	unrecord := r.recordBuild(filepath.Base(area), cmd.Process.Pid)
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
