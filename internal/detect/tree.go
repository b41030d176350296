package detect

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Limits on what detection reads of a source tree. They bound the work of
// one Detect call whatever the tree holds.
const (
	// MaxWalk is how many entries (files and directories) the walk visits.
	MaxWalk = 2000
	// MaxFileBytes is how much of one file is read; the rest is ignored.
	MaxFileBytes = 1 << 20
	// MaxReads is how many distinct files are read, markers included.
	MaxReads = 400
	// MaxTotalBytes is how many bytes all reads together may return.
	MaxTotalBytes = 32 << 20
)

// skipDirs are never walked: dependencies, build output and tool state.
var skipDirs = map[string]bool{
	"node_modules": true, ".git": true, "vendor": true, "venv": true,
	".venv": true, "__pycache__": true, "dist": true,
}

// Tree is a source tree as detection sees it: the regular files found by a
// bounded walk (sorted, slash-separated, relative to the root) and cached,
// bounded reads of them. The answers given to Detect travel with it. A Tree
// is used by one goroutine at a time.
type Tree struct {
	fsys      fs.FS
	files     []string
	set       map[string]bool
	dirs      map[string]bool
	cache     map[string][]byte
	reads     int
	bytesRead int
	truncated bool
	answers   map[string]string
}

// newTree walks fsys. Directories named in skipDirs are not entered (a
// detector that needs one file inside such a directory, such as
// dist/index.html, asks for it with probe); symbolic links and other
// non-regular files are left out, so a read never leaves the tree.
func newTree(fsys fs.FS, answers map[string]string) *Tree {
	t := &Tree{
		fsys:    fsys,
		set:     map[string]bool{},
		dirs:    map[string]bool{".": true},
		cache:   map[string][]byte{},
		answers: answers,
	}
	if fsys == nil {
		return t
	}
	walked := 0
	errStop := errors.New("walk limit")
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && p != "." {
				return fs.SkipDir
			}
			return nil
		}
		if p == "." {
			return nil
		}
		walked++
		if walked > MaxWalk {
			t.truncated = true
			return errStop
		}
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return fs.SkipDir
			}
			t.dirs[p] = true
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		t.files = append(t.files, p)
		t.set[p] = true
		return nil
	})
	slices.Sort(t.files)
	return t
}

// Files returns every file the walk found, sorted.
func (t *Tree) Files() []string { return t.files }

// Has reports whether the file exists in the walked tree.
func (t *Tree) Has(p string) bool { return t.set[p] }

// HasDir reports whether the directory exists in the walked tree.
func (t *Tree) HasDir(p string) bool { return t.dirs[p] }

// probe reports whether p is a regular file, looking it up directly when
// the walk did not enter its directory. It never reads the file.
func (t *Tree) probe(p string) bool {
	if t.set[p] {
		return true
	}
	if t.fsys == nil || !fs.ValidPath(p) {
		return false
	}
	fi, err := fs.Stat(t.fsys, p)
	return err == nil && fi.Mode().IsRegular()
}

// Truncated reports whether the walk stopped at MaxWalk.
func (t *Tree) Truncated() bool { return t.truncated }

// Read returns the first MaxFileBytes of a file the walk found. It answers
// false for a file not in the tree, one that cannot be read, or once the
// read budget (MaxReads, MaxTotalBytes) is spent; reads are cached.
func (t *Tree) Read(p string) ([]byte, bool) {
	if b, ok := t.cache[p]; ok {
		return b, b != nil
	}
	if !t.set[p] || t.reads >= MaxReads || t.bytesRead >= MaxTotalBytes {
		return nil, false
	}
	t.reads++
	b, err := t.readFile(p)
	if err != nil {
		t.cache[p] = nil
		return nil, false
	}
	t.bytesRead += len(b)
	t.cache[p] = b
	return b, true
}

func (t *Tree) readFile(p string) ([]byte, error) {
	f, err := t.fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := int64(MaxFileBytes)
	if left := int64(MaxTotalBytes - t.bytesRead); left < limit {
		limit = left
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// ReadString is Read as a string ("" when unreadable).
func (t *Tree) ReadString(p string) string {
	b, _ := t.Read(p)
	return string(b)
}

// Answer returns the answer given for a question key.
func (t *Tree) Answer(key string) (string, bool) {
	v, ok := t.answers[key]
	return v, ok
}

// first returns the first of the paths that exists.
func (t *Tree) first(paths ...string) (string, bool) {
	for _, p := range paths {
		if t.set[p] {
			return p, true
		}
	}
	return "", false
}

// filesUnder returns the files below dir ("." for all) whose name ends
// with one of the suffixes, in order, at most limit of them.
func (t *Tree) filesUnder(dir string, limit int, suffixes ...string) []string {
	var out []string
	for _, f := range t.files {
		if dir != "." && !strings.HasPrefix(f, dir+"/") {
			continue
		}
		for _, s := range suffixes {
			if strings.HasSuffix(f, s) {
				out = append(out, f)
				break
			}
		}
		if len(out) >= limit {
			break
		}
	}
	return out
}

// filesIn returns the files directly in dir ("." for the root).
func (t *Tree) filesIn(dir string) []string {
	var out []string
	for _, f := range t.files {
		if path.Dir(f) == dir {
			out = append(out, f)
		}
	}
	return out
}
