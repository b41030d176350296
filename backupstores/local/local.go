// Package local is the backup storage adapter that keeps a backup
// repository's objects as files in a directory on this server's disk: by
// default <work dir>/backups, the embedded default of the backup category.
//
// A key is a path below the directory (keys are checked first: segments
// of [a-z0-9._-], no "." or ".."), and every access goes through an
// os.Root opened on the directory for that operation, so no key, symbolic
// link or directory renamed meanwhile reaches outside it, and a directory
// removed while svc runs is noticed rather than written into. Put writes a
// temporary file beside the object (its name holds "~", which no key
// does), fsyncs it, renames it over the key and fsyncs the directory (and
// the directories above a new one): a reader sees the whole object or the
// one before, also after a crash. Directories are 0700 and files 0600.
//
// One limit of a file system: a key cannot also be the directory of other
// keys ("a" and "a/b"); such a Put is refused. Empty directories left by
// Delete stay (removing them would race with a Put into them).
//
// The directory is this server's own: in a cluster each server has its
// own, so a cluster that must restore on any server uses the s3 kind or a
// shared mount. This package must not touch the store, HTTP routing or
// another adapter.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/svchost/svc/backupstores/internal/objects"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/errcode"
)

// DefaultID is the well-known ID of the embedded local backup storage.
const DefaultID = "adp_builtin_backup"

// Interface guards.
var (
	_ adapters.Instance  = (*Local)(nil)
	_ backuprepo.Storage = (*Local)(nil)
)

// Kind declares the local backup storage, the default of its category.
// workDir is this server's work directory: the default path is its
// backups directory. Settings are replicated, defaults are not: a server
// opens the default path under its own work directory.
func Kind(workDir string) adapters.Kind {
	def := ""
	if workDir != "" {
		def = filepath.Join(workDir, "backups")
	}
	return adapters.Kind{
		Category: adapters.CategoryBackup,
		Name:     "local",
		Description: "Keeps backups as files in a directory on this server's disk (each server of a cluster has its own); " +
			"every object written whole or not at all, fsynced",
		Default:   true,
		DefaultID: DefaultID,
		Settings: []adapters.Setting{
			{Name: "path", Description: "Absolute path of the directory backups are kept in, created (0700) when missing; " +
				"by default the backups directory of this server's work directory", Default: def, Example: "/var/backups/svc"},
		},
		Validate: func(settings map[string]string, _ []string) error {
			_, err := pathOf(settings)
			return err
		},
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			p, err := pathOf(c.Settings)
			if err != nil {
				return nil, err
			}
			return New(p)
		},
	}
}

// pathOf is the checked path setting.
func pathOf(settings map[string]string) (string, error) {
	p := settings["path"]
	if p == "" || !filepath.IsAbs(p) {
		return "", errcode.Invalid("config.path", "path must be the absolute path of a directory, such as /var/backups/svc")
	}
	return filepath.Clean(p), nil
}

// Local keeps objects in one directory. It is safe for concurrent use.
type Local struct {
	dir string
}

// New opens the storage in dir (absolute), creating the directory (0700)
// if it is missing.
func New(dir string) (*Local, error) {
	if !filepath.IsAbs(dir) {
		return nil, errcode.Invalid("config.path", "path must be an absolute path")
	}
	l := &Local{dir: filepath.Clean(dir)}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return nil, l.fail("create the directory", err)
	}
	return l, nil
}

// Dir is the directory the objects are in.
func (l *Local) Dir() string { return l.dir }

// open opens the directory as a root for one operation.
func (l *Local) open(ctx context.Context) (*os.Root, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return nil, l.fail("open the directory", err)
	}
	return root, nil
}

// copyBuf is the buffer Put copies through: large enough that a big object
// costs few system calls.
const copyBuf = 1 << 20

var bufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// Put writes the object whole or not at all: a temporary file, fsynced,
// renamed over key, the directory fsynced. A reader that fails or does not
// hold exactly size bytes, or ctx ending, leaves no trace.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := objects.ValidKey(key); err != nil {
		return err
	}
	if size < 0 {
		return errcode.Invalid("size", "an object's size is known: %d is not a size", size)
	}
	root, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := path.Dir(key)
	newDirs, err := l.mkdirs(root, dir, key)
	if err != nil {
		return err
	}
	tmp := key + "~" + randomHex()
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return l.fail("create a file for "+key, err)
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	if err := l.write(f, objects.Exact(ctx, r, size), key); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return l.fail("write "+key, err)
	}
	err, f = f.Close(), nil
	if err != nil {
		return l.fail("write "+key, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := root.Rename(tmp, key); err != nil {
		if fi, serr := root.Lstat(key); serr == nil && fi.IsDir() {
			return conflict(key)
		}
		return l.fail("rename into "+key, err)
	}
	// The rename is durable once the directory is; a directory made for
	// this object is durable once the one above it is.
	for d := dir; ; d = path.Dir(d) {
		if err := syncDir(root, d); err != nil {
			return l.fail("sync the directory of "+key, err)
		}
		if d == "." || !slices.Contains(newDirs, d) {
			return nil
		}
	}
}

// write copies r into f, telling the reader's failures (returned as they
// are) from the disk's.
func (l *Local) write(f *os.File, r io.Reader, key string) error {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return l.fail("write "+key, err)
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("put %s: read the object: %w", key, rerr)
		}
	}
}

// mkdirs makes the directory dir of key and those above it, and returns
// the ones it made.
func (l *Local) mkdirs(root *os.Root, dir, key string) ([]string, error) {
	var missing []string
	for d := dir; d != "."; d = path.Dir(d) {
		fi, err := root.Lstat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, conflict(key)
			}
			break
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, conflict(key)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, l.fail("look up the directory of "+key, err)
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if err := root.MkdirAll(dir, 0o700); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, conflict(key)
		}
		return nil, l.fail("create the directory of "+key, err)
	}
	return missing, nil
}

// conflict is the refusal of a key that is, or lies under, another key.
func conflict(key string) error {
	return errcode.Invalid("key", "backup storage key %q clashes with another key: local storage cannot keep both an object and objects below it (%q and %q/…)",
		key, key, key).WithRemedy("use keys of which none is a directory of another")
}

func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Get opens the object; an absent one is NOT_FOUND.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objects.ValidKey(key); err != nil {
		return nil, err
	}
	root, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, notFound(key)
	}
	if err != nil {
		return nil, l.fail("open "+key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, l.fail("open "+key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notFound(key)
	}
	return f, nil
}

func notFound(key string) error {
	return errcode.New(errcode.NotFound, "backup storage holds no object %s", key)
}

// List returns the objects whose keys start with prefix, by key.
// Temporary files of Puts under way and files whose names are not keys
// are not objects.
func (l *Local) List(ctx context.Context, prefix string) ([]backuprepo.Object, error) {
	if err := objects.ValidPrefix(prefix); err != nil {
		return nil, err
	}
	root, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	out := []backuprepo.Object{}
	err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while listed
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(p, prefix) || objects.ValidKey(p) != nil {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, backuprepo.Object{Key: p, Size: fi.Size()})
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, l.fail("list "+prefix, err)
	}
	slices.SortFunc(out, func(a, b backuprepo.Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete removes the object; an absent one is no error.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := objects.ValidKey(key); err != nil {
		return err
	}
	root, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && fi.IsDir() {
		return nil
	}
	if err != nil {
		return l.fail("delete "+key, err)
	}
	if err := root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l.fail("delete "+key, err)
	}
	return nil
}

// Check says whether the directory is there and writable: it creates and
// removes a file.
func (l *Local) Check(ctx context.Context) error {
	root, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	probe := ".check~" + randomHex()
	f, err := root.OpenFile(probe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return l.fail("write a file", err)
	}
	_ = f.Close()
	if err := root.Remove(probe); err != nil {
		return l.fail("remove a file", err)
	}
	return nil
}

// Capabilities: the directory and the space free on its file system.
func (l *Local) Capabilities() map[string]any {
	c := map[string]any{"path": l.dir}
	var st syscall.Statfs_t
	if syscall.Statfs(l.dir, &st) == nil {
		c["free_bytes"] = int64(st.Bavail) * int64(st.Bsize)
	}
	return c
}

// fail translates a file system failure (or the end of ctx, returned as
// it is) into an error with a code: the directory missing is
// ADAPTER_UNAVAILABLE, anything else ADAPTER_FAILED, with what to do.
func (l *Local) fail(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	reason := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		reason = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		reason = le.Err
	}
	msg := fmt.Sprintf("local backup storage in %s cannot %s: %v", l.dir, what, reason)
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return errcode.Wrap(err, errcode.AdapterFailed, "%s", msg).WithRemedy("free space on the disk of %s, remove old backups, or configure another path", l.dir)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
		return errcode.Wrap(err, errcode.AdapterFailed, "%s", msg).WithRemedy("let the user svc runs as write to %s (svc makes it 0700), on a file system mounted read-write", l.dir)
	case what == "open the directory" && errors.Is(err, fs.ErrNotExist):
		return errcode.Wrap(err, errcode.AdapterUnavailable, "%s", msg).
			WithRemedy("create %s (mode 0700, owned by the user svc runs as) or mount the disk it is on; svc creates it only when it loads the adapter", l.dir)
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "%s", msg).WithRemedy("check the disk and the file system of %s", l.dir)
}
