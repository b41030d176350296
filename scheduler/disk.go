package scheduler

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Disk limits (after Kubernetes' ephemeral-storage eviction). A
// workload's resources.disk_bytes limits its own disk: what the runtime
// reports as its DiskBytes, on the process runtime its working copy (the
// built files and whatever it writes beside them). Its volumes do not
// count: each has a size of its own (volumes.<name>.size_bytes), they
// outlive the app, and stopping the app would free none of them. Nor do
// its logs, which the runtime caps apart (max_log_disk_bytes).
//
// CheckDisk, a leader loop, reads every running app with a limit every
// Config.DiskInterval; a reading of GET …/usage on the leader counts too.
// decideDisk (pure, table-tested) says what a reading means for the app,
// from what the leader remembers of it: a workload at DiskNearPercent of
// its limit or more warns once (app.disk_warning, over: false), one over
// it warns once more (over: true), and the app over at two of the loop's
// readings in a row is stopped. A reading of GET …/usage warns at once but
// never hastens a stop: only the loop's readings count towards the two,
// and a reading under the limit in between breaks the row.
//
// A stop is one write: the app stopped and meant to stay so
// (apps.TransitionOps with Desired), app.disk_stopped, and the audit entry
// of the system's app.stop; then the runtime stops the job and drops what
// it wrote outside its volumes (WriteDropper), so that the app, once
// somebody starts it, runs from its built files again under its limit.
// The reconciler leaves an app meant to be stopped stopped.
//
// What was said lives in the leader's memory only: a new leader may warn
// once more about an app it has not seen before, and counts its over
// readings afresh.

// DiskNearPercent is the share of its disk limit at which a workload is
// near it (app.disk_warning with over: false).
const DiskNearPercent = 90

// diskOversToStop is how many of the loop's readings in a row must find
// an app over its disk limit for it to be stopped.
const diskOversToStop = 2

// diskLevel is where a reading stands against its limit.
type diskLevel int

const (
	diskUnder diskLevel = iota
	diskNear
	diskOver
)

// diskLevelOf places a workload's use against its limit; no limit (0) is
// never near it.
func diskLevelOf(used, limit int64) diskLevel {
	switch {
	case limit <= 0:
		return diskUnder
	case used > limit:
		return diskOver
	case float64(used)*100 >= float64(limit)*DiskNearPercent:
		return diskNear
	}
	return diskUnder
}

// diskReading is an app's reading against its disk limits: of the
// workloads with a limit, the one nearest to it (or furthest over it),
// with its use and its limit, and the job read. Limit 0: no workload has
// a limit.
type diskReading struct {
	JobID    string
	Workload string
	Used     int64
	Limit    int64
}

// worstDisk is the reading of the workload with the largest share of its
// limit (by name among equals), from each workload's limit (from the spec)
// and its use (from the runtime; a workload missing from it reads as 0).
func worstDisk(jobID string, limits, used map[string]int64) diskReading {
	worst := diskReading{JobID: jobID}
	share := -1.0
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		limit := limits[name]
		if limit <= 0 {
			continue
		}
		if s := float64(used[name]) / float64(limit); s > share {
			worst, share = diskReading{JobID: jobID, Workload: name, Used: used[name], Limit: limit}, s
		}
	}
	return worst
}

// diskMemory is what the leader remembers of an app's disk between
// readings: the job it read, the level it last warned of, and how many of
// the loop's readings in a row found it over its limit.
type diskMemory struct {
	JobID string
	Said  diskLevel
	Overs int
}

// diskVerdict is what a reading calls for: a warning (Over says whether
// of being over), or the stop.
type diskVerdict struct {
	Warn bool
	Over bool
	Stop bool
}

// decideDisk says what a reading means for the app and what to remember
// of it; scheduled says the reading is the loop's (one of GET …/usage's
// is not). A new job starts afresh. Under the limit (or without one)
// nothing is said and everything is forgotten, so that the next crossing
// warns again. Near it warns once, when it was not said yet. Over it warns
// once (over: true); the loop's second reading over it in a row stops the
// app. A reading that falls back from over to near says nothing, but a
// later rise over the limit warns again.
func decideDisk(r diskReading, m diskMemory, scheduled bool) (diskVerdict, diskMemory) {
	if m.JobID != r.JobID {
		m = diskMemory{JobID: r.JobID}
	}
	var v diskVerdict
	switch diskLevelOf(r.Used, r.Limit) {
	case diskUnder:
		return v, diskMemory{JobID: r.JobID}
	case diskNear:
		v.Warn = m.Said < diskNear
		m.Said, m.Overs = diskNear, 0
		return v, m
	}
	v.Warn, v.Over = m.Said < diskOver, true
	m.Said = diskOver
	if scheduled {
		m.Overs++
		v.Stop = m.Overs >= diskOversToStop
	}
	return v, m
}

// diskState is the disk limits' memory on the leader.
type diskState struct {
	mu      sync.Mutex
	leading int                   // CheckDisk loops running on this node
	apps    map[string]diskMemory // by app ID
	// drops are the jobs whose writes are still to be dropped, by app
	// (their stop was left to the reconciler, or failed).
	drops map[string]string
	// trouble is the last reading error logged, by app, so that it is
	// logged once.
	trouble map[string]string
}

func newDiskState() *diskState {
	return &diskState{apps: map[string]diskMemory{}, drops: map[string]string{}, trouble: map[string]string{}}
}

// CheckDisk is the leader loop of disk limits: every Config.DiskInterval
// it reads the disk of every running app with a limit and acts on it
// (CheckDiskOnce). While it runs, readings of GET …/usage on this node
// count too. It returns when ctx ends, forgetting what it remembered.
func (s *Service) CheckDisk(ctx context.Context) error {
	s.disk.mu.Lock()
	s.disk.leading++
	s.disk.mu.Unlock()
	defer func() {
		s.disk.mu.Lock()
		defer s.disk.mu.Unlock()
		if s.disk.leading--; s.disk.leading == 0 {
			clear(s.disk.apps)
			clear(s.disk.drops)
			clear(s.disk.trouble)
		}
	}()
	return raftstore.Every(s.cfg.DiskInterval, func(ctx context.Context) error {
		s.CheckDiskOnce(ctx)
		return nil
	})(ctx)
}

// CheckDiskOnce reads the disk of every running app with a disk limit, one
// after another (each reading bounded by the start timeout), and acts on
// each reading; it first stops and drops the jobs of apps stopped over
// their limit whose writes are still there.
func (s *Service) CheckDiskOnce(ctx context.Context) {
	ctx = actor.With(ctx, actor.System)
	r := s.d.Store.Read()
	rels, _ := Releases.List(r, raftstore.Query{})
	read := map[string]bool{}
	for _, it := range rels {
		if ctx.Err() != nil {
			return
		}
		rel := it.Value
		a, _, ok := apps.Apps.Get(r, rel.AppID)
		if !ok {
			continue
		}
		s.dropPending(ctx, a, rel)
		limits := diskLimits(s.specOf(rel))
		if len(limits) == 0 || !diskRunning(a) {
			continue
		}
		read[a.ID] = true
		used, err := s.readDisk(ctx, rel)
		if s.diskTrouble(rel, err) {
			continue
		}
		s.judgeDisk(ctx, rel, worstDisk(rel.JobID, limits, used), true)
	}
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	for id := range s.disk.apps {
		if !read[id] {
			delete(s.disk.apps, id) // stopped, deleted, deploying, or its limit gone
		}
	}
}

// noteUsage counts a reading of GET …/usage against the app's disk limits,
// when this node runs the loop (the leader): it may warn, never stop.
func (s *Service) noteUsage(ctx context.Context, rel Release, u Usage) {
	s.disk.mu.Lock()
	leading := s.disk.leading > 0
	s.disk.mu.Unlock()
	if !leading || !u.Supported {
		return
	}
	r := s.d.Store.Read()
	a, _, ok := apps.Apps.Get(r, rel.AppID)
	if cur, _, has := Releases.Get(r, rel.AppID); !ok || !has || cur.JobID != rel.JobID || !diskRunning(a) {
		return // a reading of a job the app no longer runs says nothing
	}
	limits := diskLimits(s.specOf(rel))
	if len(limits) == 0 {
		return
	}
	used := make(map[string]int64, len(u.Workloads))
	for name, w := range u.Workloads {
		used[name] = w.DiskBytes
	}
	s.judgeDisk(actor.With(ctx, actor.System), rel, worstDisk(rel.JobID, limits, used), false)
}

// diskRunning says whether an app is running as far as disk limits go:
// meant to run, and running or degraded (not held by a deploy, not
// failed, not being brought back).
func diskRunning(a apps.App) bool {
	return a.DesiredState == apps.DesiredRunning && (a.State == apps.StateRunning || a.State == apps.StateDegraded)
}

// diskLimits are the disk limits of a spec's workloads that have one.
func diskLimits(d spec.Document) map[string]int64 {
	var out map[string]int64
	for name, w := range d.Workloads {
		if w.Resources != nil && w.Resources.DiskBytes > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[name] = w.Resources.DiskBytes
		}
	}
	return out
}

// errNoDiskReading: the runtime reads no disk use.
var errNoDiskReading = errcode.New(errcode.PlanCapabilityUnsupp, "the runtime cannot read disk use")

// readDisk reads each workload's disk use of the release's job through
// the runtime's DiskReader, bounded by the start timeout. A runtime
// without one is not read (Nomad reports no disk use: reading its usage
// every check would ask its agents for nothing).
func (s *Service) readDisk(ctx context.Context, rel Release) (map[string]int64, error) {
	rt, err := s.runtime(rel.Runtime)
	if err != nil {
		return nil, err
	}
	dr, ok := rt.(DiskReader)
	if !ok {
		return nil, errNoDiskReading
	}
	return bounded(ctx, s.cfg.StartTimeout, func(ctx context.Context) (map[string]int64, error) {
		return dr.DiskUsage(ctx, rel.JobID)
	})
}

// diskTrouble says whether a reading failed, logging why once until it
// changes or a reading succeeds. A runtime that cannot read disk use, and
// a job it does not have (the reconciler brings it back), are no trouble
// to log.
func (s *Service) diskTrouble(rel Release, err error) bool {
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	if err == nil {
		delete(s.disk.trouble, rel.AppID)
		return false
	}
	if errors.Is(err, errNoDiskReading) || errcode.Has(err, errcode.NotFound) {
		return true
	}
	msg := errcode.MessageOf(err)
	if s.disk.trouble[rel.AppID] != msg {
		s.disk.trouble[rel.AppID] = msg
		s.d.Log.Warn("disk: cannot read the app's disk use", s.attrs(rel, "", "reason", msg)...)
	}
	return true
}

// judgeDisk acts on a reading: a warning or a stop is written (the memory
// kept only once it is), then a stopped app's job is stopped and its
// writes dropped. Readings of one app are judged one at a time.
func (s *Service) judgeDisk(ctx context.Context, rel Release, rd diskReading, scheduled bool) {
	s.disk.mu.Lock()
	v, next := decideDisk(rd, s.disk.apps[rel.AppID], scheduled)
	var err error
	stopped, claimed := false, false
	switch {
	case v.Stop:
		// Hold the app against the reconciler while it is stopped, so
		// that no pass that read it running reports it so afterwards.
		claimed = s.claim(rel.AppID)
		stopped, err = s.writeDiskStop(ctx, rel, rd)
	case v.Warn:
		err = s.writeDiskWarning(ctx, rel, rd, v.Over)
	}
	switch {
	case err != nil:
		// Nothing was said: the next reading says it again.
	case v.Stop:
		delete(s.disk.apps, rel.AppID)
	default:
		s.disk.apps[rel.AppID] = next
	}
	if stopped && !claimed {
		s.disk.drops[rel.AppID] = rel.JobID // the reconciler stops it; the next check drops
	}
	s.disk.mu.Unlock()
	attrs := s.attrs(rel, "", "workload", rd.Workload, "used_bytes", rd.Used, "limit_bytes", rd.Limit)
	switch {
	case err != nil:
		s.d.Log.Warn("disk: could not record what the app's disk reading calls for", append(attrs, "err", errcode.MessageOf(err))...)
	case stopped:
		s.d.Log.Warn("disk: stopped the app: over its disk limit at two checks in a row; it stays stopped until somebody starts it", attrs...)
	case v.Warn && v.Over:
		s.d.Log.Warn("disk: the app is over its disk limit; the next check stops it if it still is", attrs...)
	case v.Warn:
		s.d.Log.Info("disk: the app is near its disk limit", attrs...)
	}
	if claimed {
		if stopped {
			s.haltJob(ctx, rel)
		}
		s.unclaim(rel.AppID)
	}
}

// writeDiskWarning writes app.disk_warning for an app still meant to run.
func (s *Service) writeDiskWarning(ctx context.Context, rel Release, rd diskReading, over bool) error {
	now := s.d.Now()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, ok := apps.Apps.Get(r, rel.AppID)
		if !ok || a.DesiredState != apps.DesiredRunning {
			return nil, nil
		}
		return []raftstore.Op{events.Emit(ctx, now, "app.disk_warning", appRef(a), "", "",
			map[string]any{"used_bytes": rd.Used, "limit_bytes": rd.Limit, "over": over})}, nil
	})
	return err
}

// writeDiskStop stops an app over its disk limit in one write: stopped
// and meant to stay so, app.disk_stopped, and the audit entry of the
// system's stop. Nothing is written (false) when the app is no longer
// running the job read: stopped meanwhile, deleted, deploying, or
// running another release.
func (s *Service) writeDiskStop(ctx context.Context, rel Release, rd diskReading) (bool, error) {
	now := s.d.Now()
	stopped := false
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		stopped = false
		a, _, ok := apps.Apps.Get(r, rel.AppID)
		if !ok || !diskRunning(a) {
			return nil, nil
		}
		cur, meta, ok := Releases.Get(r, rel.AppID)
		if !ok || cur.JobID != rel.JobID {
			return nil, nil
		}
		ops, err := apps.TransitionOps(ctx, r, a.ID, apps.Transition{Cause: apps.Observed, To: apps.StateStopped, Desired: apps.DesiredStopped, Because: apps.StoppedDiskLimit}, now)
		if err != nil {
			return nil, err
		}
		stopped = true
		return append(ops, Releases.Check(a.ID, meta.ModifyIndex),
			audit.Record(ctx, now, "app.stop", a.ID, audit.Target{Kind: "app", ID: a.ID}, map[string]any{
				"from": a.DesiredState, "to": apps.DesiredStopped, "reason": apps.StoppedDiskLimit,
				"workload": rd.Workload, "used_bytes": rd.Used, "limit_bytes": rd.Limit}),
			events.Emit(ctx, now, "app.disk_stopped", appRef(a), "app", a.ID,
				map[string]any{"used_bytes": rd.Used, "limit_bytes": rd.Limit})), nil
	})
	return stopped && err == nil, err
}

// haltJob stops the job of an app stopped over its disk limit and drops
// what it wrote outside its volumes; what fails is retried at the next
// check. The caller holds the app's claim.
func (s *Service) haltJob(ctx context.Context, rel Release) {
	rt, err := s.runtime(rel.Runtime)
	if err == nil {
		if err = s.stopJob(ctx, rt, rel); err == nil {
			if wd, ok := rt.(WriteDropper); ok {
				_, err = bounded(ctx, s.cfg.StartTimeout, func(ctx context.Context) (struct{}, error) {
					return struct{}{}, wd.DropWrites(ctx, rel.JobID)
				})
			}
		}
	}
	s.disk.mu.Lock()
	if err != nil {
		s.disk.drops[rel.AppID] = rel.JobID
	} else {
		delete(s.disk.drops, rel.AppID)
	}
	s.disk.mu.Unlock()
	if err != nil {
		s.d.Log.Warn("disk: could not stop the app's job and drop what it wrote; the next check tries again",
			s.attrs(rel, actionStop, "err", errcode.MessageOf(err))...)
		return
	}
	s.d.Log.Info("disk: stopped the app's job and dropped what it wrote outside its volumes", s.attrs(rel, actionStop)...)
}

// dropPending stops and drops the job of an app stopped over its disk
// limit whose writes are still there, if it is still meant to be stopped
// with that job and the reconciler is not at it; a start or a deploy
// meanwhile forgets it.
func (s *Service) dropPending(ctx context.Context, a apps.App, rel Release) {
	s.disk.mu.Lock()
	jobID, ok := s.disk.drops[a.ID]
	if ok && (a.DesiredState != apps.DesiredStopped || rel.JobID != jobID) {
		delete(s.disk.drops, a.ID)
		ok = false
	}
	s.disk.mu.Unlock()
	if !ok || !s.claim(a.ID) {
		return
	}
	defer s.unclaim(a.ID)
	s.haltJob(ctx, rel)
}
