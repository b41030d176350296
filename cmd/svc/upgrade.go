package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/upgrade"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler/process"
)

// upgrades drives in-place upgrades (internal/upgrade) for serve; it
// outlives generations. The service of each generation checks an upload
// and hands it here (begin); once the generation has ended, run swaps it
// in, tries it as a child, and execs it or rolls it back.
type upgrades struct {
	exe  string   // the executable, resolved at the process's start
	dir  string   // the work directory, which holds the marker
	args []string // the process's arguments, without argv[0]
	env  []string // the process's environment at its start
	logw io.Writer

	pending atomic.Pointer[pendingUpgrade]

	mu sync.Mutex
	// outcome is an upgrade whose event is still to be written once a
	// generation serves; confirm says it is this binary's own upgrade,
	// to be marked done first.
	outcome *upgrade.Marker
	confirm bool
}

type pendingUpgrade struct {
	m    upgrade.Marker
	path string
}

func newUpgrades(cfg *config.Config, logw io.Writer) *upgrades {
	exe, err := os.Executable()
	if err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
	}
	return &upgrades{exe: exe, dir: cfg.Server.WorkDir, args: os.Args[1:], env: os.Environ(), logw: logw}
}

// service is the generation's upgrade service; begin hands it an upgrade
// and asks for the restart. Without u (a server built outside serve) or
// as a trial child it only answers the latest upgrade.
func (u *upgrades) service(cfg *config.Config, store *raftstore.Store, node string, restart func(), log *slog.Logger) *upgrade.Service {
	d := upgrade.Deps{Store: store, Dir: cfg.Server.WorkDir, Version: version, Node: node, PublicKey: cfg.Upgrade.SigningPublicKey,
		Log: log.With("component", "upgrade"), Now: func() time.Time { return time.Now().UTC() }}
	if u != nil && u.exe != "" && !upgrade.IsTrial() {
		d.Exe, d.Dir = u.exe, u.dir
		if cfg.Cluster.RaftAddr != "" {
			// In a cluster an upload upgrades every server, one at a time;
			// a server whose step takes longer than its own upgrade can
			// (the apps' stop, the trial, the exec, the catch-up) is given
			// up on. A single server never follows a rollout.
			d.Cluster = store
			d.StepTimeout = cfg.Server.ShutdownTimeout + cfg.Upgrade.ReadyTimeout + 5*time.Minute
		}
		d.Begin = func(m upgrade.Marker, path string) {
			u.pending.Store(&pendingUpgrade{m: m, path: path})
			restart()
		}
	}
	return upgrade.New(d)
}

// atStart acts on the marker when the process starts (upgrade.Decide):
// the new binary counts its start, and one that started before without
// finishing rolls back by executing the previous binary.
func (u *upgrades) atStart(ln *keptListener, log *slog.Logger) {
	if upgrade.IsTrial() {
		return
	}
	if stale, _ := filepath.Glob(filepath.Join(filepath.Dir(u.exe), "."+filepath.Base(u.exe)+".upgrade-*")); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	m, err := upgrade.Load(u.dir)
	if err != nil {
		log.Error("upgrade: the marker cannot be read; it is left alone", "err", err)
		return
	}
	now := time.Now().UTC()
	a, reason := upgrade.Decide(m, version)
	switch a {
	case upgrade.Nothing:
		return
	case upgrade.Confirm:
		m.Attempts++
		u.setOutcome(m, true)
		log.Info("upgrade: first start after the upgrade", "from", m.From, "to", m.To)
	case upgrade.RollBack:
		m.Fail(reason, now)
		u.setOutcome(m, false)
		if err := upgrade.Save(u.dir, m); err != nil {
			log.Error("upgrade: marker", "err", err)
		}
		log.Error("upgrade: the new binary started before and did not finish; restoring the previous one", "from", m.From, "to", m.To)
		if err := upgrade.SwapBack(u.exe); err != nil {
			log.Error("upgrade: rollback failed; this binary goes on", "err", err)
			return
		}
		f, err := ln.File()
		if err == nil {
			err = upgrade.Exec(u.exe, u.args, u.env, f)
		}
		log.Error("upgrade: could not start the previous binary; this one goes on", "err", err)
		return
	case upgrade.ReportFailed:
		if reason != "" {
			m.Fail(reason, now)
		}
		u.setOutcome(m, false)
	case upgrade.ReportDone:
		u.setOutcome(m, false)
	}
	if err := upgrade.Save(u.dir, m); err != nil {
		log.Error("upgrade: marker", "err", err)
	}
}

func (u *upgrades) setOutcome(m *upgrade.Marker, confirm bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.outcome, u.confirm = m, confirm
}

// afterServing, once a generation serves, runs the store's migrations for
// this binary's upgrade, marks it done and writes the outcome's event.
// What fails is tried again when the next generation serves.
func (u *upgrades) afterServing(ctx context.Context, store *raftstore.Store, node string, log *slog.Logger) {
	upgrade.SignalReady()
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.outcome
	if m == nil {
		return
	}
	if m.Rollout != "" {
		// A step of a rollout ends (and the next server's turn begins)
		// only once this server has caught up with the cluster.
		for store.CaughtUp() != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if u.confirm {
		if err := upgrade.Migrate(ctx, store, upgrade.Migrations, m.From, m.To, log); err != nil {
			log.Error("upgrade: store migration failed; trying again at the next restart", "err", err)
			return
		}
		m.Finish(time.Now().UTC())
		if err := upgrade.Save(u.dir, m); err != nil {
			log.Error("upgrade: marker", "err", err)
			return
		}
		u.confirm = false
	}
	if err := upgrade.Report(ctx, store, u.dir, m, node, time.Now().UTC()); err != nil {
		log.Warn("upgrade: the outcome's event is not written yet; trying again at the next restart", "err", err)
		return
	}
	u.outcome = nil
	log.Info("upgrade: "+m.State, "from", m.From, "to", m.To)
}

// run swaps in the upgrade the ended generation accepted and tries it as
// a child (the apps stopped first, as at a process's end). Ready: the
// process execs it, and run does not return. Not ready: the previous
// binary is restored, the marker records why, and run returns the process
// runtime to go on with (the old generation starts again in process).
func (u *upgrades) run(ctx context.Context, p *pendingUpgrade, cfg *config.Config, procs *process.Runtime, ln *keptListener, log *slog.Logger) (*process.Runtime, error) {
	log.Info("upgrade: stopping apps and trying the new binary", "from", p.m.From, "to", p.m.To, "ready_timeout", cfg.Upgrade.ReadyTimeout.String())
	_ = procs.Close()
	reason := u.try(ctx, p, cfg, ln, log)
	// Only a failure comes back.
	m := p.m
	m.Fail(reason, time.Now().UTC())
	if err := upgrade.Save(u.dir, &m); err != nil {
		log.Error("upgrade: marker", "err", err)
	}
	u.setOutcome(&m, false)
	log.Error("upgrade: the new binary was rolled back; the previous one starts again", "from", m.From, "to", m.To, "reason", reason)
	next, err := processRuntime(cfg)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	return next, nil
}

// try swaps, tries and execs; it returns only why it failed, with the
// previous binary back in place.
func (u *upgrades) try(ctx context.Context, p *pendingUpgrade, cfg *config.Config, ln *keptListener, log *slog.Logger) string {
	if err := upgrade.Swap(u.exe, p.path); err != nil {
		_ = os.Remove(p.path)
		return err.Error()
	}
	back := func(reason string) string {
		if err := upgrade.SwapBack(u.exe); err != nil {
			log.Error("upgrade: the previous binary could not be restored", "err", err)
			return reason + "; and " + err.Error()
		}
		return reason
	}
	f, err := ln.File()
	if err != nil {
		return back(fmt.Sprintf("the listening socket cannot be handed on: %v", err))
	}
	defer f.Close()
	err = upgrade.Trial(ctx, upgrade.TrialConfig{Exe: u.exe, From: p.m.From, Args: u.args, Env: u.env, Listener: f,
		Timeout: cfg.Upgrade.ReadyTimeout, StopTimeout: cfg.Server.ShutdownTimeout + 10*time.Second, Output: u.logw})
	if err != nil {
		return back(err.Error())
	}
	log.Info("upgrade: the new binary became ready; executing it in place", "to", p.m.To)
	err = upgrade.Exec(u.exe, u.args, u.env, f)
	return back(err.Error())
}

// take returns the upgrade the ended generation accepted, if any.
func (u *upgrades) take() *pendingUpgrade { return u.pending.Swap(nil) }

// inheritedListener is the socket an upgrade handed this process; nil
// when there is none.
func inheritedListener() (net.Listener, error) {
	f, err := upgrade.Inherited()
	if err != nil || f == nil {
		return nil, err
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the listening socket handed on by the upgrade: %w", err)
	}
	return ln, nil
}
