package ai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/spec"
)

// Limits of the summary beyond the settings.
const (
	// maxWalk is how many files the walk notes (the paths an answer may
	// name); it is internal/scan's own cap.
	maxWalk = scan.MaxFiles
	// maxPerFile is the most of one file the summary carries.
	maxPerFile = 8 << 10
	// maxSpecBytes is the most of the spec document it carries.
	maxSpecBytes = 16 << 10
)

// manifests are dependency manifests, by file name (lock files are left
// out: long, and the OSV check reads them).
var manifests = map[string]bool{
	"go.mod": true, "package.json": true, "requirements.txt": true, "pyproject.toml": true, "Pipfile": true,
	"setup.py": true, "setup.cfg": true, "Gemfile": true, "Cargo.toml": true, "composer.json": true,
	"pom.xml": true, "build.gradle": true, "build.gradle.kts": true, "mix.exs": true, "deno.json": true,
}

// entrypoints are the files that say how an app is built and started.
var entrypoints = map[string]bool{
	"Dockerfile": true, "Containerfile": true, "Procfile": true, "Makefile": true,
	"docker-compose.yml": true, "docker-compose.yaml": true, "compose.yml": true, "compose.yaml": true,
	"entrypoint.sh": true, "docker-entrypoint.sh": true, "start.sh": true, "run.sh": true,
	"main.go": true, "main.py": true, "app.py": true, "manage.py": true, "wsgi.py": true, "asgi.py": true,
	"server.js": true, "index.js": true, "app.js": true, "main.js": true, "server.ts": true, "index.ts": true,
	"nixpacks.toml": true, "fly.toml": true, "app.yaml": true,
}

// kindOf ranks a file for the summary's contents: 0 a manifest, 1 an
// entrypoint, -1 neither.
func kindOf(p string) int {
	base := path.Base(p)
	switch {
	case manifests[base] || (strings.HasPrefix(base, "requirements") && strings.HasSuffix(base, ".txt")):
		return 0
	case entrypoints[base] || strings.HasPrefix(base, "Dockerfile.") || strings.HasSuffix(base, ".dockerfile"):
		return 1
	}
	return -1
}

// summary is what is sent about a checkout.
type summary struct {
	text   string
	files  map[string]bool // every regular file the walk noted
	listed int             // paths the text lists
	sent   int             // files whose contents it carries
	bytes  int             // bytes of file contents it carries
}

// summarize walks the checkout at dir (no symbolic link followed, nothing
// outside it opened) and writes the summary: deterministic for the same
// tree and spec, at most maxFiles paths and maxBytes of file contents,
// the contents of the files in withheld left out, and the whole redacted
// with scan.Redact.
func summarize(ctx context.Context, dir string, doc spec.Document, withheld map[string]bool, maxFiles, maxBytes int) (summary, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return summary{}, errcode.New(errcode.Internal, "AI screening: the source tree cannot be read")
	}
	defer root.Close()
	files, err := walk(ctx, root.FS())
	if err != nil {
		return summary{}, err
	}
	s := summary{files: make(map[string]bool, len(files))}
	for _, f := range files {
		s.files[f] = true
	}
	var b strings.Builder
	b.WriteString("Summary of an application's source. Secrets are replaced by " + scan.Redacted + "; files with committed secrets are listed without their contents.\n\n")
	s.listed = min(len(files), maxFiles)
	fmt.Fprintf(&b, "## Files (%d of %d)\n", s.listed, len(files))
	for _, f := range files[:s.listed] {
		b.WriteString(f + "\n")
	}
	specJSON, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return summary{}, err
	}
	b.WriteString("\n## Spec document\n")
	b.WriteString(cut(scan.Redact(specJSON), maxSpecBytes))
	b.WriteString("\n")

	budget := maxBytes
	for _, f := range chosen(files) {
		if budget <= 0 {
			break
		}
		if withheld[f] {
			fmt.Fprintf(&b, "\n## File %s\n(withheld: the secret check flagged it)\n", f)
			continue
		}
		content, ok := read(root, f)
		if !ok {
			continue
		}
		text := cut(scan.Redact(content), min(maxPerFile, budget))
		fmt.Fprintf(&b, "\n## File %s (%d bytes)\n%s\n", f, len(content), text)
		budget -= len(text)
		s.sent++
		s.bytes += len(text)
	}
	// Once more over the whole: a secret in a path or across the parts.
	s.text = string(scan.Redact([]byte(b.String())))
	return s, nil
}

// walk lists the regular files of fsys in lexical order, at most maxWalk,
// not descending into the directories internal/scan skips nor following links.
func walk(ctx context.Context, fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // unreadable: skipped
		}
		if len(out)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		switch {
		case d.IsDir() && p != "." && scan.SkippedDir(d.Name()):
			return fs.SkipDir
		case d.Type().IsRegular():
			if len(out) >= maxWalk {
				return fs.SkipAll
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errcode.New(errcode.Internal, "AI screening: the source tree cannot be read")
	}
	return out, nil
}

// chosen are the files whose contents the summary carries: manifests,
// then entrypoints, each shallowest first, then by path.
func chosen(files []string) []string {
	var out []string
	for _, f := range files {
		if kindOf(f) >= 0 {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if d := kindOf(a) - kindOf(b); d != 0 {
			return d
		}
		if d := strings.Count(a, "/") - strings.Count(b, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return out
}

// read is a text file's contents through root; false for a link, one over
// scan.MaxFileBytes (the secret check did not read it either), binary,
// or not a regular file by now.
func read(root *os.Root, p string) ([]byte, bool) {
	// The file opened must be the regular file seen (os.Root resolves a
	// link in the last element within the root, O_NOFOLLOW or not); no
	// FIFO swapped in is waited on.
	seen, err := root.Lstat(p)
	if err != nil || !seen.Mode().IsRegular() {
		return nil, false
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(seen, st) || st.Size() > scan.MaxFileBytes {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, scan.MaxFileBytes+1))
	if err != nil || len(b) > scan.MaxFileBytes || slices.Contains(b[:min(len(b), 8000)], 0) {
		return nil, false
	}
	return b, true
}

// cut is b as valid UTF-8, at most n bytes of it, saying so when cut.
func cut(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	i := n
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return strings.ToValidUTF8(string(b[:i]), "\uFFFD") + fmt.Sprintf("\n[… cut: %d bytes in all]", len(b))
}
