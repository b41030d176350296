package backuprepo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"filippo.io/age"
	"golang.org/x/sys/unix"

	"github.com/svchost/svc/internal/errcode"
)

// A restore stages every part next to its target (<target>.restore-<id>,
// on the same filesystem), reading and checking every chunk as it goes;
// any problem removes the staging and refuses the restore before a target
// changes. Then it commits all the targets or none, through a journal in
// the journal directory:
//
//  1. the journal is written (and synced) in state "staging", naming the
//     targets and their staging directories, before anything is staged;
//  2. once every part is staged and synced, the journal is rewritten in
//     state "commit" with each staging directory's inode: the commit
//     point;
//  3. each staging directory is swapped with its target (renameat2
//     RENAME_EXCHANGE: one atomic step; a plain rename where there was no
//     target), so the staging name then holds the old data;
//  4. the old data and the journal are removed.
//
// Recover, at start and before every restore, finishes what a killed
// restore left: a journal in state "staging" is rolled back (the staging
// removed, the targets untouched), one in state "commit" is rolled
// forward (each target whose inode is not the staged one is swapped now),
// so the targets hold wholly the old data or wholly the new.

type journal struct {
	State  string        `json:"state"` // "staging" or "commit"
	Backup string        `json:"backup"`
	Pairs  []journalPair `json:"pairs"`
}

type journalPair struct {
	Part   string `json:"part"`
	Target string `json:"target"`
	Staged string `json:"staged"`
	Inode  uint64 `json:"inode,omitempty"`
}

func (r *Repo) journalPath(id string) string { return filepath.Join(r.journal, "restore-"+id+".json") }

// Restore restores the parts named in targets (part name → target
// directory) from backup id, all or nothing; see above.
func (r *Repo) Restore(ctx context.Context, id string, targets map[string]string, ids ...age.Identity) error {
	if err := r.Recover(); err != nil {
		return err
	}
	m, err := r.Manifest(ctx, id, ids...)
	if err != nil {
		return err
	}
	j := journal{State: "staging", Backup: id}
	only := map[string]bool{}
	held := m.sortedParts()
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		if !slices.Contains(held, name) {
			return errcode.New(errcode.BackupIncomplete, "backup %s holds no part %s", id, name)
		}
		t := filepath.Clean(targets[name])
		j.Pairs = append(j.Pairs, journalPair{Part: name, Target: t, Staged: t + ".restore-" + id})
		only[name] = true
	}
	if err := r.writeJournal(j); err != nil {
		return err
	}
	staged, err := r.stage(ctx, m, only, j, ids)
	if err != nil {
		_ = r.rollBack(j)
		return err
	}
	for i := range j.Pairs {
		j.Pairs[i].Inode = staged[j.Pairs[i].Staged]
	}
	j.State = "commit"
	if err := r.writeJournal(j); err != nil {
		_ = r.rollBack(j)
		return err
	}
	return r.rollForward(j)
}

// stage writes the parts into their staging directories, checking every
// chunk, and syncs them; it returns each staging directory's inode.
func (r *Repo) stage(ctx context.Context, m Manifest, only map[string]bool, j journal, ids []age.Identity) (map[string]uint64, error) {
	dirOf := map[string]string{}
	for _, p := range j.Pairs {
		dirOf[p.Part] = p.Staged
	}
	roots := map[string]*os.Root{}
	defer func() {
		for _, rt := range roots {
			rt.Close()
		}
	}()
	var cur *os.File
	var curPath string
	// done syncs and closes the file being written.
	done := func() error {
		if cur == nil {
			return nil
		}
		err := cur.Sync()
		if cerr := cur.Close(); err == nil {
			err = cerr
		}
		cur = nil
		return err
	}
	defer done()
	var problem error
	err := r.walk(ctx, m, only, ids, func(err error) bool { problem = err; return false }, func(part string, e Entry, data []byte) error {
		dir := dirOf[part]
		rt := roots[part]
		if rt == nil {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			var err error
			if rt, err = os.OpenRoot(dir); err != nil {
				return err
			}
			roots[part] = rt
		}
		switch e.Type {
		case "d":
			if e.Path != "." {
				if err := rt.Mkdir(e.Path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
			}
			return nil
		case "l":
			return rt.Symlink(e.Target, e.Path)
		}
		if curPath != part+"/"+e.Path {
			if err := done(); err != nil {
				return err
			}
			f, err := rt.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			cur, curPath = f, part+"/"+e.Path
		}
		_, err := cur.Write(data)
		return err
	})
	if err == nil {
		err = problem
	}
	if derr := done(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, err
	}
	// Modes and times, files before their directories.
	out := map[string]uint64{}
	for _, p := range m.Parts {
		if !only[p.Name] {
			continue
		}
		rt := roots[p.Name]
		if rt == nil { // a part with no entries cannot be: checkEntries wants a root
			return nil, errcode.New(errcode.BackupIncomplete, "part %s is empty", p.Name)
		}
		for i := len(p.Entries) - 1; i >= 0; i-- {
			e := p.Entries[i]
			if e.Type == "l" {
				continue
			}
			if err := rt.Chmod(e.Path, e.Mode); err != nil {
				return nil, err
			}
			if err := rt.Chtimes(e.Path, e.MTime, e.MTime); err != nil {
				return nil, err
			}
		}
		if err := syncDirs(rt, p.Entries); err != nil {
			return nil, err
		}
		fi, err := os.Stat(dirOf[p.Name])
		if err != nil {
			return nil, err
		}
		out[dirOf[p.Name]] = fi.Sys().(*syscall.Stat_t).Ino
	}
	return out, nil
}

func syncDirs(rt *os.Root, es []Entry) error {
	for _, e := range es {
		if e.Type != "d" {
			continue
		}
		d, err := rt.Open(e.Path)
		if err != nil {
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Repo) writeJournal(j journal) error {
	if err := os.MkdirAll(r.journal, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	p := r.journalPath(j.Backup)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	return syncDir(r.journal)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// rollBack removes a restore's staging and its journal: nothing was
// swapped.
func (r *Repo) rollBack(j journal) error {
	for _, p := range j.Pairs {
		if err := os.RemoveAll(p.Staged); err != nil {
			return err
		}
	}
	return os.Remove(r.journalPath(j.Backup))
}

// rollForward swaps in every staged directory not yet swapped, then
// removes the old data and the journal.
func (r *Repo) rollForward(j journal) error {
	for _, p := range j.Pairs {
		cur, err := inodeOf(p.Target)
		switch {
		case err == nil && cur == p.Inode:
			continue // swapped already
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(p.Staged, p.Target); err != nil {
				return fmt.Errorf("restore %s: %w", p.Target, err)
			}
		case err != nil:
			return err
		default:
			if err := unix.Renameat2(unix.AT_FDCWD, p.Staged, unix.AT_FDCWD, p.Target, unix.RENAME_EXCHANGE); err != nil {
				return fmt.Errorf("restore %s: swap: %w", p.Target, err)
			}
		}
		if err := syncDir(filepath.Dir(p.Target)); err != nil {
			return err
		}
	}
	for _, p := range j.Pairs {
		if err := os.RemoveAll(p.Staged); err != nil { // the old data now
			return err
		}
	}
	return os.Remove(r.journalPath(j.Backup))
}

func inodeOf(p string) (uint64, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, err
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

// Recover finishes the restores a kill interrupted: rolled back before
// their commit point, forward after it.
func (r *Repo) Recover() error {
	entries, err := os.ReadDir(r.journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if filepath.Ext(name) == ".tmp" {
			_ = os.Remove(filepath.Join(r.journal, name))
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.journal, name))
		if err != nil {
			return err
		}
		var j journal
		if err := json.Unmarshal(b, &j); err != nil || j.Backup == "" {
			return fmt.Errorf("restore journal %s does not read: %v", name, err)
		}
		if j.State == "commit" {
			err = r.rollForward(j)
		} else {
			err = r.rollBack(j)
		}
		if err != nil {
			return fmt.Errorf("finish the interrupted restore of %s: %w", j.Backup, err)
		}
	}
	return nil
}
