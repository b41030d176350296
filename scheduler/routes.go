package scheduler

import (
	"context"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/raftstore"
)

// RouteInfo is what the edge needs to route an app's traffic.
type RouteInfo struct {
	AppID string
	Slug  string
	// Port is the app's host port for port-mode routing (0: none held).
	Port int
	// Upstream is host:port of the primary workload when it runs and its
	// health check is not failing; empty otherwise (nothing to route to).
	Upstream string
}

// Routes lists every app with its host port and, when its primary
// workload serves, where. Apps never deployed are listed without an
// upstream. It reads the runtime's status of each release on this node.
func (s *Service) Routes(ctx context.Context) []RouteInfo {
	r := s.d.Store.Read()
	list, _ := apps.Apps.List(r, raftstore.Query{})
	out := make([]RouteInfo, 0, len(list))
	for _, it := range list {
		a := it.Value
		ri := RouteInfo{AppID: a.ID, Slug: a.Slug}
		if p, _, ok := Ports.Get(r, a.ID); ok {
			ri.Port = p.Port
		}
		if rel, _, ok := Releases.Get(r, a.ID); ok && a.DesiredState == apps.DesiredRunning && a.State != apps.StateFailed {
			ri.Upstream = s.upstream(ctx, rel)
		}
		out = append(out, ri)
	}
	return out
}

// upstream is the address of a release's primary workload if it runs and
// is not failing its health check.
func (s *Service) upstream(ctx context.Context, rel Release) string {
	rt, err := s.runtime(rel.Runtime)
	if err != nil {
		return ""
	}
	st, err := rt.Status(ctx, rel.JobID)
	if err != nil {
		return ""
	}
	ws, ok := st.Workloads[rel.Primary]
	if !ok || !ws.Running || ws.Health == HealthFailing {
		return ""
	}
	return ws.Address
}
