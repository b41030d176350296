package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
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
// AllowFile says so). A clone connects only to addresses the rule in
// reach.go allows: never svc's own host, private networks only when host
// policy's source_allowlist names the host.
type Fetcher struct {
	// Git is the git binary; "git" on PATH when empty.
	Git string
	// AllowFile admits file:// URLs and absolute local paths. It is off by
	// default: a local path would let any app creator read repositories on
	// the host. Tests use local bare repositories.
	AllowFile bool
	// addrs replaces the address rule (tests reach servers on loopback).
	addrs addrPolicy
}

var (
	errCloneTimeout = errors.New("clone timed out")
	errCloneSize    = errors.New("clone too large")
)

// Clone checks out repo at ref (a branch or tag, shallowly; a full commit
// SHA, from a full clone; the default branch when empty) into dest, which
// must not exist, and returns the commit checked out. The checkout has no
// .git directory. allowlist is host policy's source_allowlist, which says
// which private addresses the clone may connect to (reach.go); an address
// the rule refuses is POLICY_SOURCE_NOT_ALLOWED.
//
// It is refused, as VALID_INVALID, for a bad address, ref or subdir, a ref
// the repository lacks, a checkout over the limits (size, entries, names)
// or with a link leading outside it, a subdir that is not a directory of
// it, and a clone that outlasts lim.CloneTimeout. A repository that could
// not be fetched (unreachable, refused, not found, not git, asking for
// credentials) has one answer whatever the reason, naming only the address
// given (Unfetchable): the reason, which would tell an open port from a
// closed one, is in the error's cause for the log, never in its message.
// Neither are server paths. Credentials in the address never appear in an
// error.
func (f *Fetcher) Clone(ctx context.Context, repo, ref, subdir, dest string, lim Limits, allowlist []string) (string, error) {
	lim = lim.withDefaults()
	rem, err := parseRepository(repo, f.AllowFile)
	if err != nil {
		return "", err
	}
	policy := f.policy(allowlist)
	if err := checkLiteralHost(rem, policy); err != nil {
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
	switch rem.scheme {
	case "http", "https":
		if g.guard, err = startGuard(policy); err != nil {
			return "", err
		}
		defer g.guard.close()
	case "ssh":
		a, err := pick(ctx, rem.host, policy)
		if _, coded := errcode.As(err); coded {
			return "", err
		}
		if err != nil {
			return "", g.unfetchable(err)
		}
		g.sshAddr = a.String()
	}

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
		return "", g.unfetchable(fmt.Errorf("clone: git rev-parse answered %q", shorten(commit)))
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

// policy is the address rule under allowlist.
func (f *Fetcher) policy(allowlist []string) addrPolicy {
	if f.addrs != nil {
		return f.addrs
	}
	return defaultAddrPolicy(allowlist)
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
	guard          *guard // the proxy of a clone over http(s)
	sshAddr        string // the checked address an ssh clone connects to
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
	ssh := "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new"
	if g.sshAddr != "" {
		// Connect to the address checked, keep the host's name for its
		// key (checkHost admits no shell metacharacters in either).
		ssh += " -o HostName=" + g.sshAddr + " -o HostKeyAlias=" + g.rem.host
	}
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + g.home,
		"XDG_CONFIG_HOME=" + g.home,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_SSH_COMMAND=" + ssh,
		"LC_ALL=C",
		"LANG=C",
	}
	if g.guard != nil {
		// In the environment, not the command line that anyone on the
		// host can read: the proxy's password.
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0="+g.guard.proxyURL(),
			"GIT_CONFIG_KEY_1=http.proxyAuthMethod", "GIT_CONFIG_VALUE_1=basic")
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

// failure maps what git said to an error. An address the rule refused is
// that refusal; a ref the repository lacks is the caller's to fix, once
// the repository was reached; any other failure of git is Unfetchable, one
// answer whatever git said (so that the answers to a closed port, an open
// one that is not git and one asking for credentials are the same: an
// HTML page cloned "successfully" as an empty repository fails at
// rev-parse, for one); git that did not run is ours (uncoded, INTERNAL).
// git's words, credentials redacted, are the cause, for the log only.
func (g *gitRun) failure(stage string, err error, stderr string) error {
	repo := Redact(g.repo)
	detail := fmt.Errorf("git %s of %s: %w: %s", stage, repo, err, strings.TrimSpace(redactText(strings.ReplaceAll(stderr, g.repo, repo))))
	if g.guard != nil {
		if refused := g.guard.refused(); refused != nil {
			return refused
		}
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return detail // git did not run
	}
	s := strings.ToLower(stderr)
	for _, w := range []string{"remote branch", "couldn't find remote ref", "not found in upstream", "reference is not a tree",
		"did not match any", "unknown revision", "not a valid object name", "invalid reference"} {
		if strings.Contains(s, w) {
			return errcode.Wrap(detail, errcode.ValidInvalid, "source.ref %q was not found in %s", shorten(g.ref), repo).WithDetail("field", fieldRef)
		}
	}
	return g.unfetchable(detail)
}

// unfetchable is Unfetchable for this clone's address, with its cause.
func (g *gitRun) unfetchable(cause error) error { return Unfetchable(g.repo, cause) }

// Unfetchable is the one answer to a repository that could not be fetched,
// whatever the reason: VALID_INVALID naming the address as given
// (credentials redacted) and nothing the server learned; cause, kept for
// the log, says why.
func Unfetchable(repo string, cause error) *errcode.Error {
	return errcode.Wrap(cause, errcode.ValidInvalid, "the repository %s could not be fetched: check the URL, that it is reachable from the server, and that it is public", Redact(repo)).
		WithDetail("field", fieldRepository)
}

// checkLiteralHost applies the address rule at once to a repository whose
// host is an address (no name to resolve).
func checkLiteralHost(rem remote, policy addrPolicy) error {
	if rem.scheme == "file" {
		return nil
	}
	a, err := netip.ParseAddr(strings.Trim(rem.host, "[]"))
	if err != nil {
		return nil
	}
	return policy(rem.host, a)
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
