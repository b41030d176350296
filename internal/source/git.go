package source

import (
	"bytes"
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
)

// Fetcher clones repositories with the git binary, in a clean environment:
// no system or global configuration, no terminal prompts, no hooks, no
// submodules, and only the https, http and ssh protocols (and file, when
// AllowFile says so).
type Fetcher struct {
	// Git is the git binary; "git" on PATH when empty.
	Git string
	// AllowFile admits file:// URLs and absolute local paths. It is off by
	// default: a local path would let any app creator read repositories on
	// the host. Tests use local bare repositories.
	AllowFile bool
}

var (
	errCloneTimeout = errors.New("clone timed out")
	errCloneSize    = errors.New("clone too large")
)

// Clone checks out repo at ref (a branch or tag, shallowly; a full commit
// SHA, from a full clone; the default branch when empty) into dest, which
// must not exist, and returns the commit checked out. The checkout has no
// .git directory. It is refused, as VALID_INVALID, for a bad address, ref
// or subdir, a repository or ref that does not exist, one that needs
// credentials, a checkout over the limits (size, entries, names) or with a
// link leading outside it, a subdir that is not a directory of it, and a
// clone that outlasts lim.CloneTimeout. Credentials in the address never
// appear in an error.
func (f *Fetcher) Clone(ctx context.Context, repo, ref, subdir, dest string, lim Limits) (string, error) {
	lim = lim.withDefaults()
	rem, err := parseRepository(repo, f.AllowFile)
	if err != nil {
		return "", err
	}
	if err := checkRef(ref); err != nil {
		return "", err
	}
	if subdir, err = cleanSubdir(subdir); err != nil {
		return "", err
	}
	if err := absent(dest); err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	work, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".clone-")
	if err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	defer os.RemoveAll(work)
	home, co := filepath.Join(work, "home"), filepath.Join(work, "checkout")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}

	ctx, cancelTimeout := context.WithTimeoutCause(ctx, lim.CloneTimeout, errCloneTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := watchSize(ctx, work, 2*lim.MaxTotalBytes, func() { cancel(errCloneSize) })
	defer stopWatch()
	g := &gitRun{git: f.git(), home: home, dir: work, file: f.AllowFile, rem: rem, repo: repo, ref: ref, lim: lim}

	target := repo
	if rem.scheme == "file" && !strings.Contains(repo, "://") {
		target = "file://" + repo // so that --depth applies and objects are copied, not linked
	}
	if isCommit(ref) {
		if _, err := g.run(ctx, "clone", "clone", "--no-checkout", "--no-recurse-submodules", "--no-local", "--template=", "--", target, co); err != nil {
			return "", err
		}
		g.dir = co
		if _, err := g.run(ctx, "checkout", "checkout", "--quiet", "--detach", strings.ToLower(ref)); err != nil {
			return "", err
		}
	} else {
		args := []string{"clone", "--depth", "1", "--single-branch", "--no-recurse-submodules", "--no-local", "--template="}
		if ref != "" {
			args = append(args, "--branch", ref)
		}
		if _, err := g.run(ctx, "clone", append(args, "--", target, co)...); err != nil {
			return "", err
		}
		g.dir = co
	}
	out, err := g.run(ctx, "rev-parse", "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(out)
	if !isCommit(commit) {
		return "", fmt.Errorf("clone: git rev-parse answered %q", shorten(commit))
	}
	if isCommit(ref) && !strings.EqualFold(commit, ref) {
		return "", errcode.Invalid(fieldRef, "source.ref %s is not a commit of the repository", ref)
	}
	stopWatch()
	if err := context.Cause(ctx); err != nil {
		return "", g.limitError(err)
	}
	if err := os.RemoveAll(filepath.Join(co, ".git")); err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	t, err := checkTree(co, lim)
	if err != nil {
		return "", err
	}
	if subdir != "" {
		if n := t.nodes[subdir]; n == nil || n.kind != dirNode {
			return "", errcode.Invalid(fieldSubdir, "source.subdir %q is not a directory of the repository at %s", shorten(subdir), commit)
		}
	}
	if err := os.Chmod(co, 0o755); err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	if err := os.Rename(co, dest); err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	return commit, nil
}

func (f *Fetcher) git() string {
	if f.Git != "" {
		return f.Git
	}
	return "git"
}

// gitRun runs git commands of one clone.
type gitRun struct {
	git, home, dir string
	file           bool
	rem            remote
	repo, ref      string
	lim            Limits
}

// run runs one git command and returns its standard output, or the error
// its failure means.
func (g *gitRun) run(ctx context.Context, stage string, args ...string) (string, error) {
	cfg := []string{
		"-c", "protocol.allow=never",
		"-c", "protocol.https.allow=always",
		"-c", "protocol.http.allow=always",
		"-c", "protocol.ssh.allow=always",
	}
	if g.file {
		cfg = append(cfg, "-c", "protocol.file.allow=always")
	}
	cfg = append(cfg,
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.symlinks=true",
		"-c", "core.fsmonitor=false",
		"-c", "submodule.recurse=false",
		"-c", "credential.helper=",
		"-c", "advice.detachedHead=false",
		"-c", "transfer.fsckObjects=true",
	)
	cmd := exec.CommandContext(ctx, g.git, append(cfg, args...)...)
	cmd.Dir = g.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + g.home,
		"XDG_CONFIG_HOME=" + g.home,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
		"LC_ALL=C",
		"LANG=C",
	}
	// git starts helpers (git-remote-https, ssh): a timeout ends them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if cause := context.Cause(ctx); cause != nil {
		return "", g.limitError(cause)
	}
	return "", g.failure(stage, err, stderr.String())
}

func (g *gitRun) limitError(cause error) error {
	switch {
	case errors.Is(cause, errCloneTimeout):
		return errcode.Invalid(fieldRepository, "cloning %s took longer than the limit of %s", Redact(g.repo), g.lim.CloneTimeout).
			WithDetail("limit", g.lim.CloneTimeout.String())
	case errors.Is(cause, errCloneSize):
		return errcode.Invalid(fieldRepository, "the clone of %s grew past the limit of %d bytes", Redact(g.repo), 2*g.lim.MaxTotalBytes).
			WithDetail("limit", 2*g.lim.MaxTotalBytes)
	}
	return cause
}

// failure maps what git said to an error: a repository or ref that does
// not exist and a repository that needs credentials are the caller's to
// fix (VALID_INVALID); anything else is ours (uncoded, INTERNAL), with
// git's words, credentials redacted, for the log.
func (g *gitRun) failure(stage string, err error, stderr string) error {
	s := strings.ToLower(stderr)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(s, w) {
				return true
			}
		}
		return false
	}
	repo := Redact(g.repo)
	switch {
	case has("authentication failed", "could not read username", "could not read password", "terminal prompts disabled",
		"permission denied", "host key verification failed", "invalid username or password", "requested url returned error: 401", "requested url returned error: 403"):
		return errcode.Invalid(fieldRepository, "the repository %s needs credentials, or refuses them", repo)
	case has("remote branch", "couldn't find remote ref", "not found in upstream", "reference is not a tree",
		"did not match any", "unknown revision", "not a valid object name", "invalid reference"):
		return errcode.Invalid(fieldRef, "source.ref %q was not found in %s", shorten(g.ref), repo)
	case has("repository not found", "does not appear to be a git repository", "not found", "could not read from remote repository", "no such file or directory"):
		return errcode.Invalid(fieldRepository, "the repository %s was not found or is not reachable", repo)
	case has("could not resolve host", "name or service not known", "could not resolve hostname"):
		return errcode.Invalid(fieldRepository, "the host of %s could not be resolved", repo)
	}
	return fmt.Errorf("git %s of %s: %w: %s", stage, repo, err, strings.TrimSpace(redactText(strings.ReplaceAll(stderr, g.repo, repo))))
}

// capped keeps the first 64 KiB written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 64<<10 - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// watchInterval is how often a clone's size is checked while it runs.
var watchInterval = 250 * time.Millisecond

// watchSize calls over, once, when the files under dir add up to more than
// limit bytes, checking every watchInterval until stop is called.
func watchSize(ctx context.Context, dir string, limit int64, over func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if du(dir) > limit {
				over()
				return
			}
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-finished
	}
}

// du adds up the sizes of the regular files under dir.
func du(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}

// checkTree walks a checkout and applies the limits an archive gets: names,
// depth, entries, sizes, file types, and links that must stay inside.
func checkTree(dir string, lim Limits) (*tree, error) {
	t := newTree("repository entry", lim)
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if err := t.count(rel); err != nil {
			return err
		}
		name, err := t.clean(rel)
		if err != nil {
			return err
		}
		switch typ := d.Type(); {
		case typ&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return t.addLink(rel, name, target)
		case typ.IsDir():
			t.nodes[name] = &node{kind: dirNode}
		case typ.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() > lim.MaxFileBytes {
				return t.refuse(rel, lim.MaxFileBytes, "the file is %d bytes, over the limit of %d", info.Size(), lim.MaxFileBytes)
			}
			if total += info.Size(); total > lim.MaxTotalBytes {
				return t.refuse(rel, lim.MaxTotalBytes, "the files add up to more than the limit of %d bytes", lim.MaxTotalBytes)
			}
			t.nodes[name] = &node{kind: fileNode}
		default:
			return t.refuse(rel, nil, "entries of mode %s are not accepted", typ)
		}
		return nil
	})
	if err != nil {
		if _, ok := errcode.As(err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("check checkout: %w", err)
	}
	if err := t.checkLinks(); err != nil {
		return nil, err
	}
	return t, nil
}
