package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
)

// Limits of a tree walk.
const (
	// MaxFiles is how many regular files a scan looks at; a tree with more
	// is scanned in part and the scan says so (a finding).
	MaxFiles = 100_000
	// MaxDepth is how deep a scan descends below the root.
	MaxDepth = 64
	// MaxFileBytes is the largest file searched for secrets.
	MaxFileBytes = 1 << 20
	// MaxManifestBytes is the largest manifest or lock file read.
	MaxManifestBytes = 32 << 20
)

// maxFiles is MaxFiles, lowered by tests.
var maxFiles = MaxFiles

// skippedDirs are directories never descended into: version control and
// vendored or installed dependencies (their own manifests are what the
// dependency check reads; their contents are other people's code).
var skippedDirs = map[string]bool{
	".git": true, ".hg": true, ".svn": true,
	"node_modules": true, "bower_components": true, "vendor": true,
	".venv": true, "venv": true, "site-packages": true, "__pycache__": true, ".tox": true,
}

// file is a regular file of the tree: its slash-separated path relative to
// the root, its size and what the walk saw of it (read checks the file it
// opens is still that one).
type file struct {
	path string
	size int64
	info fs.FileInfo
}

// tree is a walked source tree. Files are read through root, an os.Root,
// so that nothing outside the directory is ever opened even if the tree
// changes under the scan (a file swapped for a symbolic link).
type tree struct {
	root      *os.Root
	files     []file
	skipped   int  // regular files not listed: over MaxFiles
	truncated bool // MaxFiles or MaxDepth was reached
}

// walk lists the regular files under dir, in lexical order, without
// following symbolic links. The caller closes t.root.
func walk(ctx context.Context, dir string) (*tree, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("scan: the source tree: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("scan: the source tree %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("scan: the source tree: %w", err)
	}
	t := &tree{root: root}
	if err := t.walkDir(ctx, ".", 0); err != nil {
		root.Close()
		return nil, err
	}
	return t, nil
}

func (t *tree) walkDir(ctx context.Context, dir string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if depth > MaxDepth {
		t.truncated = true
		return nil
	}
	f, err := t.root.Open(dir)
	if err != nil {
		return nil // unreadable: skipped
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil && len(entries) == 0 {
		return nil
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch mode := e.Type(); {
		case mode&fs.ModeSymlink != 0:
			continue // never followed
		case mode.IsDir():
			if skippedDirs[e.Name()] {
				continue
			}
			if err := t.walkDir(ctx, p, depth+1); err != nil {
				return err
			}
		case mode.IsRegular():
			if len(t.files) >= maxFiles {
				t.skipped++
				t.truncated = true
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			t.files = append(t.files, file{path: p, size: info.Size(), info: info})
		}
	}
	return nil
}

// SkippedDir says whether a walk of a source tree leaves out a directory
// of this name (version control, vendored or installed dependencies), for
// other readers of a tree (scanners/ai) to leave out the same.
func SkippedDir(name string) bool { return skippedDirs[name] }

// errTooLarge says a file is over the size a reader allows.
var errTooLarge = errors.New("scan: file too large")

// read returns a regular file's contents, at most limit bytes; a larger file
// is errTooLarge. A path that is no longer a regular file (swapped for a
// link, a device, a FIFO or a directory) is an error: os.Root refuses a link
// out of the tree; a link within it is refused because the file opened
// must be the regular file the walk saw there (os.Root resolves a link in
// the last element itself, O_NOFOLLOW or not); O_NONBLOCK keeps a FIFO
// swapped in from blocking the open.
func (t *tree) read(fl file, limit int64) ([]byte, error) {
	p := fl.path
	f, err := t.root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || fl.info == nil || !os.SameFile(fl.info, info) {
		return nil, fmt.Errorf("scan: %s changed while it was read", p)
	}
	if info.Size() > limit {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// isBinary reports whether b looks like a binary file: a NUL byte in its
// first 8000 bytes (the test git uses).
func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return slices.Contains(b, 0)
}
