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

	"github.com/svchost/svc/scheduler"
)

// Each app has its own toolchain caches (a shared one would let one app's
// build plant compiled code another app's build then links), so the first
// Go build of every app would compile the standard library afresh: a
// minute or more on a small machine. A seed avoids that: a Go build cache
// only the server writes (never a sandbox), holding the standard library
// packages web apps use, built by the server itself with the builds'
// settings once per Go version. An app's first Go build starts from a copy
// of it: hard links when the server switches users (the links stay the
// server's, read-only to the app's user, which can only replace its own
// names for them), plain copies otherwise (a same-user sandbox could
// write through a link).

// seedPackages are the standard library packages the seed holds (with
// everything they import).
var seedPackages = []string{
	"net/http", "net/http/httputil", "encoding/json", "html/template", "database/sql",
	"log/slog", "os/signal", "compress/gzip", "embed", "flag", "regexp", "crypto/tls",
}

// seedDir is the Go build cache seed.
func (r *Runtime) seedDir() string {
	if r.cfg.GoCacheSeed != "" {
		return r.cfg.GoCacheSeed
	}
	return filepath.Join(r.cfg.CacheDir, "seed", "go-build")
}

// seedGoCache gives an app's Go build cache (dst, which does not hold one
// yet) the seed's entries, warming the seed first when it does not hold
// this Go version's. Failing to seed is no failure of the build: it only
// takes longer.
func (r *Runtime) seedGoCache(ctx context.Context, seed, dst string, own owner, log scheduler.LogSink) {
	if _, err := os.Stat(dst); err == nil {
		return // seeded at an earlier build
	}
	r.seedMu.Lock()
	err := WarmGoCacheSeed(ctx, seed, log)
	r.seedMu.Unlock()
	if err != nil {
		if log != nil {
			log(scheduler.StreamStderr, "[svc] the shared Go build cache could not be prepared, so this build compiles the standard library itself: "+err.Error())
		}
		return
	}
	tmp := dst + ".seeding"
	_ = os.RemoveAll(tmp)
	if err := copySeed(seed, tmp, own); err != nil {
		_ = os.RemoveAll(tmp)
		return
	}
	_ = os.Rename(tmp, dst)
}

// WarmGoCacheSeed builds the standard library packages web apps use into
// seed, a Go build cache, as the calling process's user and outside any
// sandbox, unless seed says it holds this Go version's already; log, if
// set, is told when it starts and ends. The runtime warms its seed at the
// first Go build; an operator (or a test harness) may warm one ahead and
// name it in Config.GoCacheSeed. Several may warm one seed at once: Go's
// cache takes concurrent writers.
func WarmGoCacheSeed(ctx context.Context, seed string, log scheduler.LogSink) error {
	ver, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION: %w", err)
	}
	marker := filepath.Join(seed, "svc-seeded-"+strings.TrimSpace(string(ver)))
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	if err := os.MkdirAll(seed, 0o755); err != nil {
		return err
	}
	if log != nil {
		log(scheduler.StreamStdout, "[svc] preparing the shared Go build cache (the standard library, once per Go version)")
	}
	began := time.Now()
	tmp, err := os.MkdirTemp("", "svc-seed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, seedPackages...)...)
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GOCACHE=" + seed, "GOPATH=" + filepath.Join(tmp, "gopath"),
		"GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOFLAGS="}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", strings.Join(seedPackages, " "), err, strings.TrimSpace(string(out)))
	}
	if log != nil {
		log(scheduler.StreamStdout, fmt.Sprintf("[svc] the shared Go build cache is ready (%s)", time.Since(began).Round(time.Second)))
	}
	return os.WriteFile(marker, nil, 0o644)
}

// copySeed fills dst (new) with the seed's entries: its directories made
// and given to the owner, its files hard-linked when users are switched
// (they stay the server's), copied and given to the owner otherwise.
func copySeed(seed, dst string, own owner) error {
	return filepath.WalkDir(seed, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(seed, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			return own.chown(target)
		case !d.Type().IsRegular() || strings.HasPrefix(d.Name(), "svc-seeded-"):
			return nil
		case own.switched:
			if err := os.Link(path, target); err == nil {
				return nil
			}
			fallthrough // another file system: copy
		default:
			if err := copyFile(path, target, 0o600); err != nil {
				return err
			}
			return own.chown(target)
		}
	})
}

// chown gives one path to the owner (nothing when users are not switched).
func (o owner) chown(path string) error {
	if !o.switched {
		return nil
	}
	if err := os.Lchown(path, int(o.uid), int(o.gid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
