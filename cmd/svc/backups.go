package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// Where backups keep their files in the work dir: the installation's
// backup key beside the key-encryption key, and the journals of restores
// under way (the local backup storage's directory is its adapter's).
func backupKeyFile(workDir string) string  { return filepath.Join(workDir, "keyring", "backup-key") }
func restoreJournal(workDir string) string { return filepath.Join(workDir, "restores") }

// bundleStaging is where a bundle's copy of the store is written before
// it goes to the backup storage (hidden from sandboxes like the store).
func bundleStaging(workDir string) string { return filepath.Join(workDir, "bundles") }

// remoteStaging is where the volumes of apps whose runtime keeps them on
// other machines (Nomad's host volumes) are copied to before a backup
// writes them, and restored into before they are copied back.
func remoteStaging(workDir string) string { return filepath.Join(workDir, "backups-staging") }

var _ backups.Remote = (*scheduler.Service)(nil)

// bundleDirs are the directories of the work dir a disaster-recovery
// bundle holds besides the store and the volumes, by part name: the
// keyring (the key-encryption key the store's secrets are sealed with,
// and the backup key), apps' sources and the process runtime's builds.
// svc restore --bundle puts each back at the same place.
func bundleDirs(workDir string) map[string]string {
	return map[string]string{
		"keyring": filepath.Dir(kekFile(workDir)),
		"sources": filepath.Join(workDir, "apps"),
		"builds":  filepath.Join(workDir, "runtime", "builds"),
	}
}

// buildBackups wires backups: the repository over the backup storage, the
// process runtime's volumes, the scheduler's pause and restart around a
// copy or a restore and its copies of volumes kept elsewhere (staged under
// remoteStaging), and the runner (a leader loop: pending and rolling
// backups, retention). A restore a kill interrupted is finished first, and
// what a killed copy left staged removed.
func buildBackups(gen *generation, store *raftstore.Store, st *storage, sched *scheduler.Service, now func() time.Time) (*backups.Service, error) {
	work := gen.cfg.Server.WorkDir
	id, err := backups.LoadIdentity(backupKeyFile(work))
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	recipients, err := backups.ParseRecipients(gen.cfg.Backups.Recipients)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	keys := backuprepo.Keys{Identity: id, Recipients: recipients}
	if err := backuprepo.New(nil, keys, restoreJournal(work)).Recover(); err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("finish an interrupted restore: %w", err)}
	}
	if err := os.RemoveAll(remoteStaging(work)); err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("clear the backups' staging directory: %w", err)}
	}
	repos := &repos{keys: keys, journal: restoreJournal(work), set: st.adapters.Current}
	svc := backups.New(backups.Deps{Store: store, Repo: repos.current, Data: gen.procs, Runner: sched, Volumes: st.volumes,
		Installation: store, Dirs: bundleDirs(work), Staging: bundleStaging(work),
		BundleEvery: gen.cfg.Backups.BundleInterval, BundleKeep: gen.cfg.Backups.BundleKeep,
		Remote: sched, RemoteStaging: remoteStaging(work),
		Now: now, Log: gen.log.With("component", "backups")})
	store.RunWhileLeader("backups", svc.Run)
	return svc, nil
}

// repos gives the repository over the backup storage in force: the
// primary backup adapter (the built-in local one under the work dir unless
// another is configured). One repository per adapter, so that pruning sees
// every write of this server under way.
type repos struct {
	keys    backuprepo.Keys
	journal string
	set     func() *adapters.Set

	mu   sync.Mutex
	byID map[string]backups.Repo
}

func (rs *repos) current() (backups.Repo, error) {
	l, ok := rs.set().Primary(adapters.CategoryBackup)
	switch {
	case !ok:
		return nil, errcode.New(errcode.AdapterUnavailable, "no backup storage adapter is loaded yet").WithRemedy("retry in a moment")
	case l.Err != nil:
		return nil, errcode.New(errcode.AdapterUnavailable, "the backup storage adapter %s did not load: %v", l.Adapter.ID, l.Err)
	}
	st, ok := l.Instance.(backuprepo.Storage)
	if !ok {
		return nil, errcode.New(errcode.AdapterUnavailable, "adapter %s is not a backup storage", l.Adapter.ID)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.byID[l.Adapter.ID]; ok {
		return r, nil
	}
	if rs.byID == nil {
		rs.byID = map[string]backups.Repo{}
	}
	r := backups.Over(backuprepo.New(st, rs.keys, rs.journal))
	rs.byID[l.Adapter.ID] = r
	return r, nil
}
