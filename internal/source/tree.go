package source

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
)

// nodeKind is what a path of a checkout is.
type nodeKind uint8

const (
	dirNode nodeKind = iota + 1
	fileNode
	linkNode
)

type node struct {
	kind   nodeKind
	target string // of a link, as written
}

// tree is the set of paths a checkout is made of, as cleaned relative
// paths ("a/b"). It is the only authority on what an extraction created:
// the extraction directory is fresh and nothing else writes to it, so a
// path that is not in the tree does not exist. Symbolic links are recorded
// here and created last, after every one has been checked against the
// final tree.
type tree struct {
	label   string // "archive entry" or "checkout entry", for messages
	lim     Limits
	nodes   map[string]*node
	links   []string // in the order they came
	entries int
}

func newTree(label string, lim Limits) *tree {
	return &tree{label: label, lim: lim, nodes: map[string]*node{}}
}

// refuse is the VALID_INVALID error refusing an entry: the message names
// the entry and, where one was crossed, the limit (also in details).
func (t *tree) refuse(entry string, limit any, format string, args ...any) *errcode.Error {
	shown := shorten(entry)
	e := errcode.New(errcode.ValidInvalid, "%s %q: %s", t.label, shown, fmt.Sprintf(format, args...)).WithDetail("entry", shown)
	if limit != nil {
		e.WithDetail("limit", limit)
	}
	return e
}

// shorten keeps messages readable when a name is huge.
func shorten(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// count counts one more entry against the limit.
func (t *tree) count(entry string) error {
	t.entries++
	if t.entries > t.lim.MaxEntries {
		return t.refuse(entry, t.lim.MaxEntries, "more than %d entries", t.lim.MaxEntries)
	}
	return nil
}

// checkText refuses what no name or link target may hold.
func (t *tree) checkText(entry, s, what string) error {
	switch {
	case s == "":
		return t.refuse(entry, nil, "empty %s", what)
	case len(s) > t.lim.MaxPathBytes:
		return t.refuse(entry, t.lim.MaxPathBytes, "%s is %d bytes, over the limit of %d", what, len(s), t.lim.MaxPathBytes)
	case strings.IndexByte(s, 0) >= 0:
		return t.refuse(entry, nil, "%s contains a NUL byte", what)
	case !utf8.ValidString(s):
		return t.refuse(entry, nil, "%s is not valid UTF-8", what)
	case strings.ContainsFunc(s, unicode.IsControl):
		return t.refuse(entry, nil, "%s contains a control character", what)
	case strings.Contains(s, `\`):
		return t.refuse(entry, nil, "%s contains a backslash (a Windows path separator)", what)
	case s[0] == '/':
		return t.refuse(entry, nil, "%s is an absolute path", what)
	case len(s) >= 2 && s[1] == ':' && (s[0]|0x20) >= 'a' && (s[0]|0x20) <= 'z':
		return t.refuse(entry, nil, "%s starts with a Windows drive letter", what)
	}
	return nil
}

// clean validates an entry's name and returns it as a cleaned relative
// path; "" is the root of the checkout itself.
func (t *tree) clean(name string) (string, error) {
	if err := t.checkText(name, name, "the name"); err != nil {
		return "", err
	}
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", t.refuse(name, nil, "path traversal: the name contains ..")
		}
		if len(p) > maxNameComponentBytes {
			return "", t.refuse(name, maxNameComponentBytes, "a name in the path is %d bytes, over the limit of %d", len(p), maxNameComponentBytes)
		}
		out = append(out, p)
	}
	if len(out) > t.lim.MaxDepth {
		return "", t.refuse(name, t.lim.MaxDepth, "the path is %d levels deep, over the limit of %d", len(out), t.lim.MaxDepth)
	}
	return strings.Join(out, "/"), nil
}

// missingParents returns the parent directories of p that do not exist
// yet, shallowest first. A parent that is a link or a file is refused:
// nothing is ever written through a symbolic link.
func (t *tree) missingParents(entry, p string) ([]string, error) {
	var missing []string
	for i := 0; ; {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			return missing, nil
		}
		parent := p[:i+j]
		switch n := t.nodes[parent]; {
		case n == nil:
			missing = append(missing, parent)
		case n.kind == linkNode:
			return nil, t.refuse(entry, nil, "would be written through the symbolic link %q", shorten(parent))
		case n.kind == fileNode:
			return nil, t.refuse(entry, nil, "its parent %q is a file", shorten(parent))
		}
		i += j + 1
	}
}

// fresh refuses a path that already exists: a later entry never replaces an
// earlier one (it could turn a directory into a link).
func (t *tree) fresh(entry, p string) error {
	if t.nodes[p] != nil {
		return t.refuse(entry, nil, "duplicate entry: %q is already in the archive", shorten(p))
	}
	return nil
}

// addLink records a symbolic link, to be checked and created at the end.
func (t *tree) addLink(entry, p, target string) error {
	if err := t.fresh(entry, p); err != nil {
		return err
	}
	if err := t.checkText(entry, target, "the link target"); err != nil {
		return err
	}
	t.nodes[p] = &node{kind: linkNode, target: target}
	t.links = append(t.links, p)
	return nil
}

// checkLinks refuses any link that, followed the way the kernel follows it
// (each link resolved where it stands, .. applied to the resolved path),
// leads outside the root at any step, or loops.
func (t *tree) checkLinks() error {
	for _, p := range t.links {
		if err := t.resolve(p); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) resolve(p string) error {
	hops := 0
	var walk func(dir []string, target string) ([]string, error)
	walk = func(dir []string, target string) ([]string, error) {
		cur := append([]string(nil), dir...)
		for _, c := range strings.Split(target, "/") {
			switch c {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, t.refuse(p, nil, "the symbolic link points outside the checkout (to %q)", shorten(t.nodes[p].target))
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, c)
			n := t.nodes[strings.Join(cur, "/")]
			if n == nil || n.kind != linkNode {
				continue
			}
			hops++
			if hops > maxSymlinkHops {
				return nil, t.refuse(p, maxSymlinkHops, "the symbolic link loops or chains through more than %d links", maxSymlinkHops)
			}
			var err error
			if cur, err = walk(cur[:len(cur)-1], n.target); err != nil {
				return nil, err
			}
		}
		return cur, nil
	}
	dir := strings.Split(p, "/")
	_, err := walk(dir[:len(dir)-1], t.nodes[p].target)
	return err
}
