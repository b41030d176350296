package process

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestGiveLeavesHardLinksAlone: handing a tree to an app's user (a volume
// written when the app ran as the server, say) never hands over a file
// that has another link: the app may have linked a file of the server's
// (/etc/shadow) into its tree.
func TestGiveLeavesHardLinksAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch files' owners (CI runs as root)")
	}
	base := t.TempDir()
	outside := filepath.Join(base, "server-file")
	tree := filepath.Join(base, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{outside, filepath.Join(tree, "sub", "own")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(outside, filepath.Join(tree, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(tree, "symlink")); err != nil {
		t.Fatal(err)
	}
	o := owner{uid: DefaultUIDBase + 4242, gid: DefaultUIDBase + 4242, switched: true}
	if err := o.give(tree); err != nil {
		t.Fatal(err)
	}
	uidOf := func(p string) uint32 {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	for _, p := range []string{tree, filepath.Join(tree, "sub"), filepath.Join(tree, "sub", "own"), filepath.Join(tree, "symlink")} {
		if got := uidOf(p); got != o.uid {
			t.Errorf("%s belongs to %d, want the app's user %d", p, got, o.uid)
		}
	}
	if got := uidOf(outside); got != 0 {
		t.Errorf("the server's file, linked into the tree, was handed to %d", got)
	}
	if got := uidOf("/etc/shadow"); got != 0 {
		t.Fatalf("/etc/shadow belongs to %d", got)
	}
}

// TestOwnerFor: when the server runs as root, each app has a user of its
// own, kept across runtimes on the work directory.
func TestOwnerFor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server switches users only as root")
	}
	dir := t.TempDir()
	r := &Runtime{cfg: Config{WorkDir: dir, UIDBase: DefaultUIDBase}}
	a, err := r.ownerFor("app-a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.ownerFor("app-b")
	a2, _ := r.ownerFor("app-a")
	if !a.switched || a.uid == b.uid || a != a2 || a.uid < DefaultUIDBase {
		t.Errorf("owners: a %+v, b %+v, a again %+v", a, b, a2)
	}
	again := &Runtime{cfg: Config{WorkDir: dir, UIDBase: DefaultUIDBase}}
	if a3, _ := again.ownerFor("app-a"); a3 != a {
		t.Errorf("a new runtime gives app-a %+v, not its user %+v", a3, a)
	}
	if c, _ := again.ownerFor("app-c"); c.uid == a.uid || c.uid == b.uid {
		t.Errorf("a new app got a user already given: %+v", c)
	}
}
