package scheduler

import (
	"context"
	"slices"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// KeepBuilds is how many sets of builds each app keeps on the runtimes'
// disks, the release's among them: those of its most recent successful
// deployments (keptDeployments), so that a rollback or a redeploy of one
// of its last releases starts the kept artifact without building. Their
// sources stay in the work dir with them (KeptCheckouts).
const KeepBuilds = 5

// pruneBatch bounds the rows one sweep deletes in one write.
const pruneBatch = 200

// Prune lets go of what old deployments left on the runtimes' disks: the
// builds of all but each app's kept releases (the release and those of
// its KeepBuilds most recent sets of builds: keptDeployments), and the
// logs of jobs that are not the release's.
// The deployments of deleted apps go entirely, records included. It runs
// on the leader.
func (s *Service) Prune(ctx context.Context) error {
	r := s.d.Store.Read()
	var drop []string // deployments of deleted apps whose builds and logs went
	for appID, deps := range deploymentsByApp(r) {
		rel, _, hasRel := Releases.Get(r, appID)
		gone := !apps.Exists(r, appID)
		keep := keptArtifacts(deps, rel, hasRel, gone)
		for _, d := range deps {
			if d.Active() {
				continue
			}
			pr, ok := capability[Pruner](s, d.Runtime)
			if !ok {
				continue
			}
			s.removeUnkept(ctx, pr, d, keep)
			if gone || !hasRel || d.ID != rel.JobID {
				if err := pr.RemoveJobLogs(ctx, d.ID); err != nil && !errcode.Has(err, errcode.StateInvalid) {
					s.d.Log.Warn("remove an old job's logs", "deployment", d.ID, "err", err)
				}
			}
			if gone && len(drop) < pruneBatch {
				drop = append(drop, d.ID)
			}
		}
	}
	if len(drop) == 0 {
		return nil
	}
	// The records go after what they named on the runtimes, each as the
	// store has it now (ended: a deployment ended stays ended).
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		for _, id := range drop {
			if _, m, ok := Deployments.Get(r, id); ok {
				ops = append(ops, Deployments.DeleteIf(id, m.ModifyIndex))
			}
			if _, m, ok := DeployLogs.Get(r, id); ok {
				ops = append(ops, DeployLogs.DeleteIf(id, m.ModifyIndex))
			}
		}
		return ops, nil
	})
	return err
}

// removeUnkept removes a finished deployment's artifacts that keep does
// not name; failures are logged.
func (s *Service) removeUnkept(ctx context.Context, pr Pruner, d Deployment, keep map[string]bool) {
	for _, a := range d.Artifacts {
		if !keep[a.ID] {
			if err := pr.RemoveArtifact(ctx, a); err != nil {
				s.d.Log.Warn("remove an old build", "deployment", d.ID, "artifact", a.ID, "err", err)
			}
		}
	}
}

// deploymentsByApp lists every deployment by app, newest first.
func deploymentsByApp(r *raftstore.Reader) map[string][]Deployment {
	all, _ := Deployments.List(r, raftstore.Query{Index: "app", Prefix: true})
	byApp := map[string][]Deployment{}
	for _, it := range all {
		byApp[it.Value.AppID] = append(byApp[it.Value.AppID], it.Value)
	}
	for _, deps := range byApp {
		slices.Reverse(deps)
	}
	return byApp
}

// SyncArtifacts keeps this server's copies of artifacts that live in a
// runtime's store (ArtifactKeeper: the Nomad runtime's) in step with the
// cluster, so that any node that becomes leader can run and roll back
// without the node that built them: every app's release artifacts are
// fetched when missing, and copies Prune would let go of are removed. It
// runs on every node; problems are logged.
func (s *Service) SyncArtifacts(ctx context.Context) error {
	r := s.d.Store.Read()
	for appID, deps := range deploymentsByApp(r) {
		if ctx.Err() != nil {
			return nil
		}
		rel, _, hasRel := Releases.Get(r, appID)
		gone := !apps.Exists(r, appID)
		keep := keptArtifacts(deps, rel, hasRel, gone)
		if hasRel && !gone {
			if k, ok := capability[ArtifactKeeper](s, rel.Runtime); ok {
				for _, a := range rel.Artifacts {
					if !k.HasArtifact(ctx, a) {
						s.d.Log.Warn("fetch a release's build from the other servers", "app", appID, "artifact", a.ID)
					}
				}
			}
		}
		for _, d := range deps {
			if _, keeps := capability[ArtifactKeeper](s, d.Runtime); d.Active() || !keeps {
				continue
			}
			pr, ok := capability[Pruner](s, d.Runtime)
			if !ok {
				continue
			}
			s.removeUnkept(ctx, pr, d, keep)
		}
	}
	return nil
}

// capability is a loaded runtime's optional capability T; ok is false
// when the runtime is not loaded or has not got it.
func capability[T any](s *Service, runtimeID string) (c T, ok bool) {
	rt, err := s.runtime(runtimeID)
	if err != nil {
		return c, false
	}
	c, ok = rt.(T)
	return c, ok
}
