package main

import (
	"time"

	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// buildBackups wires backups: the repository over the backup storage, the
// process runtime's volumes, the scheduler's pause and restart around a
// copy or a restore, and the runner (a leader loop: pending and rolling
// backups, retention).
func buildBackups(gen *generation, store *raftstore.Store, st *storage, sched *scheduler.Service, now func() time.Time) *backups.Service {
	svc := backups.New(backups.Deps{Store: store, Repo: repoOf(gen, st), Data: gen.procs, Runner: sched, Volumes: st.volumes,
		Now: now, Log: gen.log.With("component", "backups")})
	store.RunWhileLeader("backups", svc.Run)
	return svc
}

// repoOf returns the backup repository over the configured backup storage.
func repoOf(*generation, *storage) func() (backups.Repo, error) {
	return func() (backups.Repo, error) {
		return nil, errcode.New(errcode.AdapterUnavailable, "no backup storage is configured")
	}
}
