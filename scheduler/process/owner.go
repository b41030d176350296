package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Whose files and processes a sandbox's are. A sandboxed workload or build
// runs as an unprivileged host user, never as the server's: when the
// server runs as root, each app has a user of its own (allocated from
// Config.UIDBase on first use and kept in WorkDir/uids.json: volumes
// outlive jobs, so an app keeps its user), and every file the app's
// sandboxes write (build areas, working copies, volumes, caches) belongs
// to it, mode 0700, so that one app's user cannot open another's even by
// name. A server that is not root cannot switch users: its sandboxes run
// as its own user, and the namespaces alone keep them apart (each sees only
// its own files).
//
// The directories on the way to those files (the work directory and the
// runtime's own) are 0711 when users are switched, so an app's user can
// reach its own files by path but list nothing; everything else the server
// keeps beside them is 0700 (tightened at start by Runtime.New).

// DefaultUIDBase is the first host user ID given to apps when the server
// runs as root: far above the users and ranges a distribution hands out
// (/etc/subuid ranges usually start at 100000), below 2^31.
const DefaultUIDBase = 1_800_000_000

// maxApps bounds the users allocated, so that a UID never wraps.
const maxApps = 1 << 24

// owner is the host identity a sandbox runs as.
type owner struct {
	uid, gid uint32
	// switched says the server changes to this user for the sandbox (it
	// runs as root); false means the server's own user.
	switched bool
}

// credential is what exec needs to run a process as o: nil when the
// server's own user is o.
func (o owner) credential() *syscall.Credential {
	if !o.switched {
		return nil
	}
	return &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: []uint32{}}
}

// uidsFile is where apps' users are recorded.
func (r *Runtime) uidsFile() string { return filepath.Join(r.cfg.WorkDir, "uids.json") }

// ownerFor returns the app's sandbox identity, allocating a user the first
// time when the server runs as root. appID "" (a job that is nobody's, in
// tests) shares the first user.
func (r *Runtime) ownerFor(appID string) (owner, error) {
	if os.Geteuid() != 0 {
		return owner{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}, nil
	}
	r.uidMu.Lock()
	defer r.uidMu.Unlock()
	if r.uids == nil {
		m := map[string]uint32{}
		b, err := os.ReadFile(r.uidsFile())
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return owner{}, fmt.Errorf("sandbox users: %w", err)
		default:
			if err := json.Unmarshal(b, &m); err != nil {
				return owner{}, fmt.Errorf("sandbox users: %s: %w", r.uidsFile(), err)
			}
		}
		r.uids = m
	}
	if uid, ok := r.uids[appID]; ok {
		return owner{uid: uid, gid: uid, switched: true}, nil
	}
	next := r.cfg.UIDBase
	for _, uid := range r.uids {
		if uid >= next {
			next = uid + 1
		}
	}
	if next-r.cfg.UIDBase >= maxApps {
		return owner{}, errors.New("sandbox users: every user of the range is taken")
	}
	r.uids[appID] = next
	b, err := json.Marshal(r.uids)
	if err != nil {
		return owner{}, err
	}
	if err := writeFileAtomic(r.uidsFile(), b, 0o600); err != nil {
		delete(r.uids, appID)
		return owner{}, fmt.Errorf("sandbox users: %w", err)
	}
	return owner{uid: next, gid: next, switched: true}, nil
}

// give makes dir (made if missing, 0700) and everything under it the
// owner's, without following symbolic links. A file with more than one
// link keeps its owner: the tree may be an app's, and a hard link in it
// to a file elsewhere (a volume written before sandboxes, when the app ran
// as the server) must never hand that file over. (From inside a sandbox no
// such link can be made: every tree it writes is a bind mount of its own,
// and link(2) does not cross mounts.) Nothing to do when users are not
// switched.
func (o owner) give(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !o.switched {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				return nil
			}
		}
		return os.Lchown(path, int(o.uid), int(o.gid))
	})
}

// owns reports whether dir already belongs to o (so give can be skipped
// for a large volume).
func (o owner) owns(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (!o.switched || (st.Uid == o.uid && st.Gid == o.gid))
}

// traversable makes each directory from top down to (not including) leaf
// 0711 when users are switched: an app's user can pass through them to its
// own files but cannot list them.
func traversable(top, leaf string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	rel, err := filepath.Rel(top, leaf)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("%s is not under %s", leaf, top)
	}
	dir := top
	for _, part := range append([]string{""}, splitPath(filepath.Dir(rel))...) {
		dir = filepath.Join(dir, part)
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	return nil
}

func splitPath(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	var out []string
	for rel != "." && rel != "" {
		out = append([]string{filepath.Base(rel)}, out...)
		rel = filepath.Dir(rel)
	}
	return out
}
