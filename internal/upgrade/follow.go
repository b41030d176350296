package upgrade

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// blobDir is where, in the work directory, a server keeps the binary of
// the rollout under way, served to the other servers.
const blobDir = "upgrades"

// FollowEvery is how often a server looks at the rollout under way.
const FollowEvery = time.Second

// clustered says whether the store is a cluster of several voting
// servers, which an upload upgrades one at a time.
func (s *Service) clustered() bool {
	if s.d.Cluster == nil {
		return false
	}
	return len(voters(s.d.Cluster.Status())) > 1
}

func voters(st raftstore.Status) []string {
	var ids []string
	for _, srv := range st.Servers {
		if srv.Suffrage == "Voter" {
			ids = append(ids, srv.ID)
		}
	}
	return ids
}

// startRollout records a rollout of the checked binary at path to every
// voting server (the audit entry svc.upgrade with it) and keeps the
// binary in the work directory for them; the servers' Follow loops do the
// rest.
func (s *Service) startRollout(ctx context.Context, m *Marker, path string, digest [32]byte, size int64, signature string) (Status, error) {
	defer os.Remove(path)
	cs := s.d.Cluster.Status()
	ro := &Rollout{Record: m.Record, Digest: hex.EncodeToString(digest[:]), Size: size, Signature: signature, Origin: s.d.Node}
	ro.State = StateRolling
	for _, id := range Order(voters(cs), cs.LeaderID) {
		ro.Steps = append(ro.Steps, Step{Node: id, State: StepPending})
	}
	if err := keepBlob(s.d.Dir, ro.Blob(), path); err != nil {
		return Status{}, fmt.Errorf("keep the binary for the other servers: %w", err)
	}
	order := make([]string, len(ro.Steps))
	for i, st := range ro.Steps {
		order[i] = st.Node
	}
	entry := audit.New(ctx, ro.StartedAt, "svc.upgrade", "", audit.Target{Kind: "node", ID: s.d.Node},
		map[string]any{"from": ro.From, "to": ro.To, "upgrade_id": ro.ID, "bytes": size, "nodes": order})
	if _, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops, err := startRolloutOps(r, ro)
		if err != nil {
			return nil, err
		}
		return append(ops, audit.Insert(entry)), nil
	}); err != nil {
		_ = os.Remove(filepath.Join(s.d.Dir, blobDir, ro.Blob()))
		return Status{}, err
	}
	s.mu.Lock()
	s.checking = nil
	s.mu.Unlock()
	return ro.status(s.d.Node, s.d.Version), nil
}

// Follow takes this server's turns in rollouts (NextStep) until ctx ends
// or it has handed its upgrade to the process. Without a cluster or the
// means to upgrade it returns at once.
func (s *Service) Follow(ctx context.Context) {
	if s.d.Cluster == nil || s.d.Begin == nil {
		return
	}
	t := time.NewTicker(FollowEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.follow(ctx) {
			return
		}
	}
}

// follow acts once on the rollout under way; true when this server's
// upgrade was handed to the process.
func (s *Service) follow(ctx context.Context) bool {
	ro := LatestRollout(s.d.Store.Read())
	dropBlobs(s.d.Dir, ro)
	if ro == nil || ro.State != StateRolling {
		return false
	}
	cs := s.d.Cluster.Status()
	a, i := NextStep(ro, s.d.Node, cs.LeaderID, s.d.Now(), s.d.StepTimeout)
	switch a {
	case Transfer:
		s.log().Info("upgrade: this server's turn in the rollout; handing leadership on first", "upgrade_id", ro.ID)
		if err := s.d.Cluster.TransferLeadership(); err != nil {
			s.log().Warn("upgrade: leadership could not be handed on; trying again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	case Abandon:
		node := ro.Steps[i].Node
		s.endStep(ctx, ro, node, StepUpgrading, fmt.Sprintf("it did not finish within %s", s.d.StepTimeout))
	case Upgrade:
		return s.takeTurn(ctx, ro)
	}
	return false
}

// takeTurn upgrades this server as its step of ro: the step goes to
// upgrading, the binary is fetched (unless kept here) and checked, and
// handed to the process. A failure ends the step, and the rollout, failed.
func (s *Service) takeTurn(ctx context.Context, ro *Rollout) bool {
	if s.d.Version == ro.To {
		s.log().Info("upgrade: this server already runs the rollout's version", "upgrade_id", ro.ID, "version", ro.To)
		s.moveStep(ctx, ro, s.d.Node, StepPending, StepDone, "")
		return false
	}
	now := s.d.Now().UTC().Truncate(time.Microsecond)
	entry := audit.New(ctx, now, "svc.upgrade", "", audit.Target{Kind: "node", ID: s.d.Node},
		map[string]any{"from": s.d.Version, "to": ro.To, "upgrade_id": ro.ID, "bytes": ro.Size})
	if !s.moveStep(ctx, ro, s.d.Node, StepPending, StepUpgrading, "", audit.Insert(entry)) {
		return false
	}
	s.log().Info("upgrade: this server's turn in the rollout", "upgrade_id", ro.ID, "from", s.d.Version, "to", ro.To)
	path, reason := s.prepare(ctx, ro)
	if reason == "" {
		s.mu.Lock()
		if s.checking != nil || s.begun {
			reason = "another upgrade of this server is under way"
		} else {
			s.begun = true
		}
		s.mu.Unlock()
	}
	m := &Marker{Record: Record{ID: ro.ID, State: StateRestarting, From: s.d.Version, To: ro.To, StartedAt: now}, Rollout: ro.ID}
	if reason == "" {
		if err := Save(s.d.Dir, m); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		if path != "" {
			_ = os.Remove(path)
		}
		s.endStep(ctx, ro, s.d.Node, StepUpgrading, reason)
		return false
	}
	s.d.Begin(*m, path)
	return true
}

// prepare puts the rollout's binary next to the executable, checked: its
// digest the rollout's, its signature verified under this server's key
// when it has one, its version the rollout's. It returns the path, or why
// it cannot.
func (s *Service) prepare(ctx context.Context, ro *Rollout) (path, reason string) {
	kept := filepath.Join(s.d.Dir, blobDir, ro.Blob())
	if _, err := os.Stat(kept); err != nil {
		if err := s.fetch(ctx, ro.Blob(), kept); err != nil {
			return "", fmt.Sprintf("the binary could not be fetched from the other servers: %v", err)
		}
	}
	f, err := os.Open(kept)
	if err != nil {
		return "", err.Error()
	}
	path, digest, _, err := Receive(s.d.Exe, f)
	f.Close()
	if err != nil {
		return "", err.Error()
	}
	fail := func(format string, a ...any) (string, string) {
		_ = os.Remove(path)
		return "", fmt.Sprintf(format, a...)
	}
	if hex.EncodeToString(digest[:]) != ro.Digest {
		_ = os.Remove(kept)
		return fail("the binary this server got is not the one the rollout names (its SHA-256 digest differs)")
	}
	if s.d.PublicKey != nil {
		if err := Verify(s.d.PublicKey, digest, ro.Signature); err != nil {
			return fail("the binary's signature does not verify under this server's upgrade.signing_public_key: %v", err)
		}
	}
	v, err := Check(ctx, path)
	switch {
	case err != nil:
		return fail("the binary does not run on this server: %v", err)
	case v != ro.To:
		return fail("the binary is version %s here, not %s", v, ro.To)
	}
	return path, ""
}

// fetch copies the named blob from another server to the file to.
func (s *Service) fetch(ctx context.Context, name, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(to), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	_, err = s.d.Cluster.FetchBlob(ctx, name, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), to)
}

// moveStep moves node's step of ro from one state to another, with extra
// in the same write; false when it could not (another server moved it
// first, or the store refused).
func (s *Service) moveStep(ctx context.Context, ro *Rollout, node, from, to, reason string, extra ...raftstore.Op) bool {
	now := s.d.Now().UTC().Truncate(time.Microsecond)
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, ops, err := stepOps(r, ro.ID, node, []string{from}, to, reason, now)
		if err != nil {
			return nil, err
		}
		return append(ops, extra...), nil
	})
	if err != nil {
		if !errors.Is(err, errStepMoved) {
			s.log().Warn("upgrade: the rollout's step could not be recorded", "upgrade_id", ro.ID, "node", node, "state", to, "err", err)
		}
		return false
	}
	return true
}

// endStep fails node's step of ro (and the rollout) for reason, with
// svc.upgrade_failed naming the server.
func (s *Service) endStep(ctx context.Context, ro *Rollout, node, from, reason string) {
	now := s.d.Now().UTC().Truncate(time.Microsecond)
	ev := events.Emit(ctx, now, "svc.upgrade_failed", nil, "node", node, map[string]any{"from": ro.From, "to": ro.To, "reason": node + ": " + reason})
	if s.moveStep(ctx, ro, node, from, StepFailed, reason, ev) {
		s.log().Error("upgrade: the rollout stopped", "upgrade_id", ro.ID, "node", node, "reason", reason)
	}
}

func (s *Service) log() *slog.Logger {
	if s.d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.d.Log
}

// keepBlob copies the binary at path into dir's blob directory as name.
func keepBlob(dir, name, path string) error {
	if err := os.MkdirAll(filepath.Join(dir, blobDir), 0o700); err != nil {
		return err
	}
	return copyFile(path, filepath.Join(dir, blobDir, name))
}

// dropBlobs removes the binaries kept for rollouts that have ended, given
// the latest rollout ro (nil: none). A binary newer than ro is kept: it
// belongs to a rollout being started, not yet written.
func dropBlobs(dir string, ro *Rollout) {
	if ro == nil {
		return
	}
	entries, err := os.ReadDir(filepath.Join(dir, blobDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), BlobPrefix)
		if !ok || id > ro.ID || id == ro.ID && ro.State == StateRolling {
			continue
		}
		_ = os.Remove(filepath.Join(dir, blobDir, e.Name()))
	}
}

// OpenBlob opens the rollout binary name (BlobPrefix and a rollout's ID)
// kept in the work directory dir, for the other servers (raftstore's
// BlobSource); one not kept here wraps fs.ErrNotExist.
func OpenBlob(dir, name string) (io.ReadCloser, int64, error) {
	if !strings.HasPrefix(name, BlobPrefix) || strings.ContainsAny(name, `/\`) {
		return nil, 0, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
	}
	f, err := os.Open(filepath.Join(dir, blobDir, name))
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
