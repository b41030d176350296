package scheduler

import (
	"context"
	"runtime"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Capacity is what the host has and what apps meant to run commit of it.
type Capacity struct {
	Host      Host      `json:"host"`
	Committed Committed `json:"committed"`
	// Free is what is left: Host minus Committed, never below 0.
	Free  Host      `json:"free"`
	Ports PortRange `json:"ports"`
}

// Committed sums the declared resources of apps meant to run. Workloads
// that declare no limit commit nothing; Unlimited counts them.
type Committed struct {
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
	Apps        int   `json:"apps"`
	Unlimited   int   `json:"unlimited_workloads"`
}

// PortRange is the host port range for apps and how much of it is held.
type PortRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
	Used  int `json:"used"`
	Free  int `json:"free"`
}

// Capacity reports what the host has and what is committed.
func (s *Service) Capacity(ctx context.Context) (Capacity, error) {
	r := s.d.Store.Read()
	host := s.host(ctx, "")
	c := s.committed(r, "")
	out := Capacity{Host: host, Committed: c,
		Free: Host{CPUMillis: max(host.CPUMillis-c.CPUMillis, 0), MemoryBytes: max(host.MemoryBytes-c.MemoryBytes, 0)}}
	if s.cfg.RoutingMode == "port" && s.cfg.PortEnd >= s.cfg.PortStart && s.cfg.PortStart > 0 {
		used := Ports.Count(r)
		total := s.cfg.PortEnd - s.cfg.PortStart + 1
		out.Ports = PortRange{Start: s.cfg.PortStart, End: s.cfg.PortEnd, Used: used, Free: max(total-used, 0)}
	}
	return out, nil
}

// host asks the runtime what the host has; without an answer, this
// machine's CPUs and no memory figure.
func (s *Service) host(ctx context.Context, runtimeID string) Host {
	if rt, err := s.runtime(runtimeID); err == nil {
		if hr, ok := rt.(HostReader); ok {
			if h, err := hr.Host(ctx); err == nil {
				return h
			}
		}
	}
	return Host{CPUMillis: int64(runtime.NumCPU()) * 1000}
}

// committed sums the resources of every app meant to run (but except),
// from the revision each runs.
func (s *Service) committed(r *raftstore.Reader, except string) Committed {
	var c Committed
	rels, _ := Releases.List(r, raftstore.Query{})
	for _, it := range rels {
		rel := it.Value
		if rel.AppID == except {
			continue
		}
		app, _, ok := apps.Apps.Get(r, rel.AppID)
		if !ok || app.DesiredState != apps.DesiredRunning || app.State == apps.StateFailed {
			continue
		}
		view, err := s.d.Specs.Get(rel.AppID, rel.Revision)
		if err != nil {
			continue
		}
		c.Apps++
		cpu, mem, unlimited := demand(view.Spec)
		c.CPUMillis += cpu
		c.MemoryBytes += mem
		c.Unlimited += unlimited
	}
	return c
}

// demand is what a revision's workloads declare.
func demand(d spec.Document) (cpu, mem int64, unlimited int) {
	for _, w := range d.Workloads {
		if w.Resources == nil || (w.Resources.CPUMillis == 0 && w.Resources.MemoryBytes == 0) {
			unlimited++
			continue
		}
		cpu += w.Resources.CPUMillis
		mem += w.Resources.MemoryBytes
	}
	return cpu, mem, unlimited
}

// checkCapacity refuses to run d for an app when, with every other app
// meant to run, it would commit more CPU or memory than the host has (as
// the runtime said before the write: it is not asked inside one).
func (s *Service) checkCapacity(r *raftstore.Reader, appID string, d spec.Document, host Host) error {
	cpu, mem, _ := demand(d)
	if cpu == 0 && mem == 0 {
		return nil
	}
	c := s.committed(r, appID)
	over := func(what string, need, used, have int64) error {
		return errcode.New(errcode.CapacityOversubscribe,
			"running this would commit %d of %d %s (%d committed by other apps)", used+need, have, what, used).
			WithDetail("resource", what).WithDetail("requested", need).WithDetail("committed", used).WithDetail("host", have).
			WithRemedy("lower the app's resources, or stop other apps; GET /api/v1/capacity shows what is committed")
	}
	if host.CPUMillis > 0 && cpu > 0 && c.CPUMillis+cpu > host.CPUMillis {
		return over("cpu_millis", cpu, c.CPUMillis, host.CPUMillis)
	}
	if host.MemoryBytes > 0 && mem > 0 && c.MemoryBytes+mem > host.MemoryBytes {
		return over("memory_bytes", mem, c.MemoryBytes, host.MemoryBytes)
	}
	return nil
}

// portOps allocates the app a host port from the range when routing by
// port and it holds none; CAPACITY_NO_FREE_PORT when the range is full.
func (s *Service) portOps(r *raftstore.Reader, appID string) ([]raftstore.Op, error) {
	if s.cfg.RoutingMode != "port" || s.cfg.PortStart <= 0 || s.cfg.PortEnd < s.cfg.PortStart {
		return nil, nil
	}
	if _, _, ok := Ports.Get(r, appID); ok {
		return nil, nil
	}
	for p := s.cfg.PortStart; p <= s.cfg.PortEnd; p++ {
		if _, _, taken := Ports.First(r, "port", raftstore.Uint(uint64(p))); !taken {
			// The check goes first: a port another request took meanwhile
			// is a stale read (retried), not a refused insert.
			return []raftstore.Op{Ports.CheckTable(r.TableIndex(Ports)), Ports.Insert(&Port{AppID: appID, Port: p})}, nil
		}
	}
	return nil, errcode.New(errcode.CapacityNoFreePort, "every host port from %d to %d is held by an app", s.cfg.PortStart, s.cfg.PortEnd).
		WithDetail("start", s.cfg.PortStart).WithDetail("end", s.cfg.PortEnd).
		WithRemedy("widen SVC_APP_PORT_START..SVC_APP_PORT_END, delete apps you no longer need, or route by subdomain or path")
}

// PortOf returns the host port an app holds, if any.
func (s *Service) PortOf(appID string) (int, bool) {
	p, _, ok := Ports.Get(s.d.Store.Read(), appID)
	return p.Port, ok
}

// SweepDeletedApps releases the ports, releases and jobs of apps that no
// longer exist. It runs on the leader.
func (s *Service) SweepDeletedApps(ctx context.Context) error {
	r := s.d.Store.Read()
	rels, _ := Releases.List(r, raftstore.Query{})
	for _, it := range rels {
		if !apps.Exists(r, it.Value.AppID) {
			s.dropRelease(ctx, it.Value)
		}
	}
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		ports, _ := Ports.List(r, raftstore.Query{Filter: func(v any) bool { return !apps.Exists(r, v.(*Port).AppID) }})
		for _, it := range ports {
			ops = append(ops, Ports.DeleteIf(it.Value.AppID, it.Meta.ModifyIndex))
		}
		return ops, nil
	})
	return err
}

// dropRelease stops the job of a deleted app and forgets its release; the
// app's volumes stay (they outlive it).
func (s *Service) dropRelease(ctx context.Context, rel Release) {
	if _, err := s.runtime(rel.Runtime); err != nil {
		return
	}
	s.retire(ctx, rel.Runtime, rel.JobID)
	s.forget(rel.AppID)
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Releases.Get(r, rel.AppID)
		if !ok || cur.JobID != rel.JobID {
			return nil, nil // forgotten already, or another job's now
		}
		return []raftstore.Op{Releases.DeleteIf(rel.AppID, meta.ModifyIndex)}, nil
	})
	if err != nil {
		s.d.Log.Warn("forget the release of a deleted app", "app", rel.AppID, "err", err)
	}
}
